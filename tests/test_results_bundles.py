"""Every shipped table can be checked anywhere: each folder of docs/results/ with a bundle renders from it alone
(`bioablate table --from`) to the same table.md, table.tex and table.csv, byte for byte; a folder without one is
listed in docs/results/README.md as rendered without a bundle."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablations.tables.bundle import BUNDLE
from ablations.tables.publish import render_bundle

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
TABLES = sorted(p for p in RESULTS.iterdir() if (p / "table.md").is_file())
WITHOUT_BUNDLE_HEADING = "## Rendered without a bundle"


@pytest.mark.parametrize("folder", [p for p in TABLES if (p / BUNDLE).is_file()], ids=lambda p: p.name)
def test_a_shipped_table_renders_from_its_bundle_alone(folder, tmp_path):
    render_bundle(folder, tmp_path, figures=False)
    for name in ("table.md", "table.tex", "table.csv"):
        assert (tmp_path / name).read_bytes() == (folder / name).read_bytes(), f"{folder.name}/{name}"


def test_a_table_without_a_bundle_is_listed_as_such():
    readme = (RESULTS / "README.md").read_text(encoding="utf-8")
    assert WITHOUT_BUNDLE_HEADING in readme
    listed = readme.split(WITHOUT_BUNDLE_HEADING, 1)[1].split("\n## ", 1)[0]
    without = {p.name for p in TABLES if not (p / BUNDLE).is_file()}
    assert {name for name in without if f"`{name}`" not in listed} == set()
    assert {p.name for p in TABLES if (p / BUNDLE).is_file() and f"`{p.name}`" in listed} == set()

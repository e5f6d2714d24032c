"""Every shipped table can be checked anywhere: each folder of docs/results/ with a bundle renders from it alone
(`bioablate table --from`) to the same table.md, table.tex and table.csv, byte for byte; a folder without one is
listed in docs/results/README.md as rendered without a bundle."""

from __future__ import annotations

import re
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


CAPTION_WORDS, NOTES_WORDS, CELL_CHARS = 130, 150, 40  # issue 66's limits for a table a journal would print


def table_parts(text: str) -> tuple[str, list[str], str]:
    """A table.md's caption (the paragraphs between its bold title and the table), its table lines, and its
    legend and notes (after the table, up to the provenance footer's rule)."""
    text = text.split("\n---\n", 1)[0]
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("| "))
    last = max(i for i, line in enumerate(lines) if line.startswith("| "))
    title = next(i for i, line in enumerate(lines) if line.startswith("**"))
    return "\n".join(lines[title + 1:first]), lines[first:last + 1], "\n".join(lines[last + 1:])


@pytest.mark.parametrize("folder", [p for p in TABLES if (p / BUNDLE).is_file()], ids=lambda p: p.name)
def test_a_shipped_table_is_one_a_journal_would_print(folder):
    """Its title first (provenance in the footer), a caption of at most 130 words, legend and notes of at most
    150 words or the table's own, and no cell over 40 characters."""
    text = (folder / "table.md").read_text(encoding="utf-8")
    assert text.startswith("**"), f"{folder.name}: the title comes first"
    caption, table, notes = table_parts(text)
    cells = [c.strip() for line in table for c in re.split(r"(?<!\\)\|", line)[1:-1]]
    table_words = sum(len(c.split()) for c in cells if set(c) - set("-:"))
    assert len(caption.split()) <= CAPTION_WORDS, f"{folder.name}: caption of {len(caption.split())} words"
    assert len(notes.split()) <= max(NOTES_WORDS, table_words), f"{folder.name}: {len(notes.split())} words of notes"
    assert [c for c in cells if len(c) > CELL_CHARS] == [], folder.name

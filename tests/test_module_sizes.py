"""Issue 25: every module of the study layer reads in one sitting. A module that grows past the limit is
split along a seam of its own (as experiment/spec.py gave its models section to model_entries.py)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 400


def test_no_ablations_module_is_over_400_lines():
    sizes = {str(p.relative_to(REPO_ROOT)): len(p.read_text().splitlines())
             for p in (REPO_ROOT / "ablations").rglob("*.py")}
    assert sizes  # the tree was found
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}

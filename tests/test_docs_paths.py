"""Every repository path the README and docs/ name exists: a moved module or test file breaks this test,
not a reader following the docs. Paths are those starting at a top-level folder of the repository
(`ablations/run/pretrain.py`, `tests/e2e/`) and the targets of relative markdown links. The rendered tables
under docs/results/ are generated (their headers name the code as it was when rendered) and left out."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TOP_FOLDERS = ("ablations", "bioablate_core", "datamodules", "lightning_modules", "experiments", "notebooks", "tests",
               "benchmarks", "scripts", "docs", ".ci")
REPO_PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*\w)" % "|".join(re.escape(t) for t in TOP_FOLDERS))
LINK = re.compile(r"\]\(([^)\s]+)\)")
PLACEHOLDER = re.compile(r"[*<>{}]")  # `experiments/<name>.yaml`, `runs/*/`: patterns, not paths


def _docs() -> list[Path]:
    return [REPO_ROOT / "README.md"] + sorted(p for p in (REPO_ROOT / "docs").rglob("*.md")
                                              if "results" not in p.relative_to(REPO_ROOT / "docs").parts[:-1])


def _missing(doc: Path, root: Path = REPO_ROOT) -> list[str]:
    """`line: path` for each path `doc` names that does not exist (repository paths under `root`)."""
    missing = []
    for number, line in enumerate(doc.read_text().splitlines(), 1):
        named = [(m.group(1).rstrip("."), root / m.group(1).rstrip(".")) for m in REPO_PATH.finditer(line)]
        named += [(target, doc.parent / target.split("#")[0]) for target in LINK.findall(line)
                  if not re.match(r"[a-z]+:|#", target)]
        missing += [f"{number}: {shown}" for shown, path in named
                    if not PLACEHOLDER.search(shown) and not path.exists()]
    return missing


def test_every_path_the_docs_name_exists():
    missing = [f"{doc.relative_to(REPO_ROOT)}:{line}" for doc in _docs() for line in _missing(doc)]
    assert missing == [], "paths named in the docs that do not exist:\n" + "\n".join(missing)


def test_a_missing_path_is_found_and_a_present_one_is_not(tmp_path):
    (tmp_path / "ablations").mkdir()
    (tmp_path / "ablations" / "api.py").write_text("")
    (tmp_path / "other.md").write_text("")
    doc = tmp_path / "doc.md"
    doc.write_text("`ablations/api.py` and `ablations/gone.py`\n[here](other.md#part), [there](gone.md), "
                   "[web](https://example.org); `experiments/<name>.yaml`\n")
    assert _missing(doc, root=tmp_path) == ["1: ablations/gone.py", "2: gone.md"]

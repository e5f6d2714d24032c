"""Every relative link in the README and the docs resolves: its file exists, and a `#anchor` into a markdown
file names one of its headings (GitHub's slug: lower case, punctuation dropped, spaces as hyphens, a repeated
heading numbered). And every page of docs/ is linked from the README's docs map, so none is left unfindable.
Links inside code spans and fenced code blocks are text, not links, and are left out."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote

REPO_ROOT = Path(__file__).resolve().parents[1]
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
FENCE = re.compile(r"^\s{0,3}(```|~~~)")

# Links broken by a page that moved, each with where it should point now; each entry must stay broken (the test
# says so once it is fixed, so that the entry goes)
KNOWN_BROKEN: dict[tuple[str, str], str] = {}


def documents(root: Path = REPO_ROOT) -> list[Path]:
    """The README, the other top-level guides, every markdown file under docs/ and the measurement reports."""
    found = [root / name for name in ("README.md", "CHANGELOG.md", "CONTRIBUTING.md") if (root / name).is_file()]
    for folder in ("docs", "benchmarks/reports"):
        found += sorted((root / folder).rglob("*.md")) if (root / folder).is_dir() else []
    return found


def _prose(text: str, code_spans: bool = False) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks; code spans blanked unless `code_spans`."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line if code_spans else re.sub(r"`[^`]*`", "``", line)))
    return lines


def links(doc: Path) -> list[tuple[int, str]]:
    """(line number, target) of every inline, image and reference link in `doc`."""
    found = []
    for number, line in _prose(doc.read_text(encoding="utf-8")):
        found += [(number, m.group(1)) for m in INLINE.finditer(line)]
        found += [(number, m.group(1)) for m in [REFERENCE.match(line)] if m]
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@lru_cache(maxsize=None)
def anchors(doc: Path) -> frozenset[str]:
    """Every anchor a markdown file defines: its headings' slugs (repeats numbered -1, -2, ...) and HTML ids."""
    seen: dict[str, int] = {}
    found = set()
    text = doc.read_text(encoding="utf-8")
    for _, line in _prose(text, code_spans=True):
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    found |= set(HTML_ANCHOR.findall(text))
    return frozenset(found)


def broken(doc: Path) -> list[tuple[int, str, str]]:
    """(line, target, why) for each relative link of `doc` that does not resolve."""
    out = []
    for number, target in links(doc):
        if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # https:, mailto: ...: not this test's
            continue
        path, _, anchor = target.partition("#")
        resolved = (doc.parent / unquote(path)).resolve() if path else doc
        if not resolved.exists():
            out.append((number, target, "no such file"))
        elif anchor and resolved.suffix == ".md" and unquote(anchor) not in anchors(resolved):
            out.append((number, target, "no such heading"))
    return out


def docs_map_targets(readme: Path) -> set[Path]:
    """The files the README's "Docs map" section links to."""
    text = readme.read_text(encoding="utf-8")
    section = re.search(r"^## Docs map\s*$(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert section, "README.md has no '## Docs map' section"
    return {(readme.parent / target.partition("#")[0]).resolve()
            for _, target in links_in(section.group(1)) if not re.match(r"[a-z]+:", target)}


def links_in(text: str) -> list[tuple[int, str]]:
    return [(n, m.group(1)) for n, line in _prose(text) for m in INLINE.finditer(line)]


def test_every_relative_link_resolves():
    found = {(str(doc.relative_to(REPO_ROOT)), target): f"{doc.relative_to(REPO_ROOT)}:{line}: {target} ({why})"
             for doc in documents() for line, target, why in broken(doc)}
    unexpected = [shown for key, shown in found.items() if key not in KNOWN_BROKEN]
    assert unexpected == [], "links that do not resolve:\n" + "\n".join(unexpected)
    fixed = [f"{doc}: {target}" for doc, target in KNOWN_BROKEN if (doc, target) not in found]
    assert fixed == [], "fixed since (remove from KNOWN_BROKEN):\n" + "\n".join(fixed)


def test_every_docs_page_is_in_the_readmes_docs_map():
    mapped = docs_map_targets(REPO_ROOT / "README.md")
    missing = [p.name for p in sorted((REPO_ROOT / "docs").glob("*.md")) if p.resolve() not in mapped]
    assert missing == [], "docs pages not linked from the README's docs map: " + ", ".join(missing)


def test_a_broken_file_or_heading_is_found_and_good_links_are_not(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# A page\n\n## The `table` command (Tables 1-8)\n\n## Twice\n\n"
                                               "## Twice\n\n```\n## not a heading\n```\n")
    doc = tmp_path / "README.md"
    doc.write_text("[ok](docs/page.md) [ok](docs/page.md#the-table-command-tables-1-8) [ok](docs/page.md#twice-1)\n"
                   "![img](docs/page.md) [web](https://example.org/x) [self](#top) `[code](gone.md)`\n"
                   "[gone](docs/gone.md) [bad](docs/page.md#not-a-heading) [bad](docs/page.md#twice-2)\n"
                   "```\n[in a fence](gone.md)\n```\n# Top\n")
    assert [(line, target) for line, target, _ in broken(doc)] == [
        (3, "docs/gone.md"), (3, "docs/page.md#not-a-heading"), (3, "docs/page.md#twice-2")]


def test_a_docs_page_left_out_of_the_map_is_named(tmp_path):
    (tmp_path / "docs").mkdir()
    for name in ("a.md", "b.md"):
        (tmp_path / "docs" / name).write_text("# x\n")
    readme = tmp_path / "README.md"
    readme.write_text("# r\n\n## Docs map\n\n| [a](docs/a.md) |\n\n## Next\n\n[b](docs/b.md)\n")
    assert docs_map_targets(readme) == {(tmp_path / "docs" / "a.md").resolve()}

"""What docs/custom-datasets.md says of conlleval, checked: entity F1 equals conlleval's on IOB2 tags, and on
IOBES files only after IOB2 conversion (conlleval's `E-` is IOE's, and it knows no `S-`). conlleval's chunk
rules are written out below from conlleval.pl (startOfChunk, endOfChunk)."""

from __future__ import annotations

import re
from pathlib import Path

from datamodules.custom.tagged import tags_to_spans
from datamodules.tagging import Span

DOC = Path(__file__).resolve().parents[2] / "docs" / "custom-datasets.md"
# adjacent one-word mentions, a mention ending with E- before another, and a lone S-
IOBES = ["S-X", "S-X", "O", "B-X", "E-X", "B-X", "I-X", "E-X", "O", "S-X"]
AS_IOB2 = {"S": "B", "E": "I"}


def _parts(tag: str) -> tuple[str, str]:
    prefix, _, typ = tag.partition("-")
    return prefix, typ


def _ends(prev: str, tag: str) -> bool:
    (p, pt), (t, tt) = _parts(prev), _parts(tag)
    return (p, t) in {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"), ("E", "E"), ("E", "I"), ("E", "O")} or (
        p not in ("O", ".") and pt != tt)


def _starts(prev: str, tag: str) -> bool:
    (p, pt), (t, tt) = _parts(prev), _parts(tag)
    return (p, t) in {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"), ("E", "E"), ("E", "I"), ("O", "E")} or (
        t not in ("O", ".") and pt != tt)


def conlleval_chunks(tags: list[str]) -> set[Span]:
    chunks, start, prev = set(), None, "O"
    for i, tag in enumerate([*tags, "O"]):
        if start is not None and _ends(prev, tag):
            chunks.add(Span(start, i, _parts(prev)[1]))
            start = None
        if _starts(prev, tag):
            start = i
        prev = tag
    return chunks


def ours(tags: list[str]) -> set[Span]:
    """As a file's tags are read: IOBES' S- and E- as BIOUL's U- and L-."""
    return set(tags_to_spans([{"S": "U", "E": "L"}.get(t[0], t[0]) + t[1:] for t in tags]))


def test_conlleval_on_iob2_tags_gives_the_mentions_read_from_the_iobes_file():
    iob2 = [AS_IOB2.get(t[0], t[0]) + t[1:] for t in IOBES]
    assert conlleval_chunks(iob2) == ours(IOBES) == {Span(0, 1, "X"), Span(1, 2, "X"), Span(3, 5, "X"),
                                                       Span(5, 8, "X"), Span(9, 10, "X")}


def test_conlleval_on_the_iobes_tags_themselves_reads_other_mentions():
    assert conlleval_chunks(IOBES) != ours(IOBES)  # S-X S-X is one chunk to it, E-X B-X runs on


def test_the_docs_say_the_conversion():
    text = " ".join(DOC.read_text().split())
    assert "entity F1 equals conlleval's on the same tags. Declaring" not in text
    assert re.search(r"On IOB2 files .* entity F1 equals conlleval's on the same tags\. IOBES / BIOES and BILOU", text)
    assert "its `E-` is IOE's and it knows no `S-`" in text
    assert "entity F1 equals conlleval's after the tags are converted to IOB2" in text

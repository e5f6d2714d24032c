"""Tagging schemes for NER and PICO (paper Sec. 2.4, Table 13): gold spans -> tags, tags -> spans.

Predicted tags are decoded back to spans before scoring, so every scheme is scored alike.

- `bio`    B-X begins a mention, I-X continues it, O is outside.
- `bioul`  as BIO, plus U-X for a one-word mention and L-X for the last word of a longer one
           (the BIOES / BILOU family).
- `io`     I-X inside, O outside: it cannot separate two adjacent mentions of one type, which merge into
           one (`io_merges` counts how often that happens in gold data).

A scheme is one `SCHEMES.register` call of a `TaggingScheme` carrying all its rules. Decoding never fails:
invalid sequences are repaired by one rule per scheme; `allowed_transitions` constrains the CRF.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from bioablate_core.choices import Choice
from datamodules.instances import Span, iob_to_spans
from datamodules.task_types import TASK_TYPES

Tag = tuple[str, str]  # (prefix, type): B-Chemical is ("B", "Chemical"), O is ("O", "")


@dataclass(frozen=True)
class TaggingScheme:
    """A scheme and its rules, all of them: registering one (`SCHEMES.register`) is all a new scheme takes."""

    name: str
    prefixes: tuple[str, ...]  # tag prefixes besides O
    description: str
    # (word index, its span, whether a mention of the same type ends where this one starts) -> its prefix
    prefix: Callable[[int, Span, bool], str]
    decode_rule: Callable[[Sequence[str]], tuple[Span, ...]]  # tags -> spans, repairing invalid sequences
    # (previous tag or None at the start, this tag) -> whether a sequence `decode` needs no repair for has them
    may_follow: Callable[[Optional[Tag], Tag], bool]
    may_end: Callable[[Tag], bool] = lambda tag: True  # whether such a sequence may end on the tag
    shown: str = ""  # the scheme as a person reads it (the name, if empty)

    def tags(self, labels: Sequence[str]) -> list[str]:
        """All tags for the span labels, O first (id 0)."""
        return ["O"] + [f"{p}-{label}" for label in labels for p in self.prefixes]

    def encode(self, spans: Sequence[Span], length: int) -> list[str]:
        tags = ["O"] * length
        ends = {(span.end, span.label) for span in spans}
        for span in spans:
            after_same = (span.start, span.label) in ends
            for i in range(span.start, span.end):
                tags[i] = f"{self.prefix(i, span, after_same)}-{span.label}"
        return tags

    def decode(self, tags: Sequence[str]) -> tuple[Span, ...]:
        return self.decode_rule(tags)

    def allowed_transitions(self, tags: Sequence[str]) -> tuple[set[int], set[tuple[int, int]], set[int]]:
        """(start tags, allowed (from, to) pairs, end tags): the sequences `decode` needs no repair for."""
        parsed = [(t.partition("-")[0], t.partition("-")[2]) for t in tags]
        starts = {j for j, cur in enumerate(parsed) if self.may_follow(None, cur)}
        pairs = {(i, j) for i, prev in enumerate(parsed) for j, cur in enumerate(parsed) if self.may_follow(prev, cur)}
        ends = {i for i, tag in enumerate(parsed) if self.may_end(tag)}
        return starts, pairs, ends


def continues(prev: Optional[Tag], cur: Tag, open_after: str = "BI") -> bool:
    """`cur` continues the mention `prev` is in: the same type after one of the prefixes `open_after`."""
    return prev is not None and prev[0] in open_after and prev[1] == cur[1]


def bioul_spans(tags: Sequence[str]) -> tuple[Span, ...]:
    """BIOUL tags -> spans; an I-X / L-X that continues nothing opens a mention, as in BIO, and a mention
    still open at an O, another type or the end closes before it."""
    spans: list[Span] = []
    start, label = None, None
    for i, tag in enumerate(tags):
        prefix, _, typ = tag.partition("-")
        goes_on = prefix in ("I", "L") and start is not None and typ == label
        if start is not None and not goes_on:
            spans.append(Span(start, i, label))
            start, label = None, None
        if prefix in ("B", "I", "L", "U") and not goes_on:
            start, label = i, typ
        if prefix in ("U", "L") and start is not None:
            spans.append(Span(start, i + 1, label))
            start, label = None, None
    if start is not None:
        spans.append(Span(start, len(tags), label))
    return tuple(spans)


def _bioul_prefix(i: int, span: Span, after_same: bool) -> str:
    if span.end - span.start == 1:
        return "U"
    return "B" if i == span.start else "L" if i == span.end - 1 else "I"


TAGGED_TASK_TYPES = TASK_TYPES.names(lambda t: t.tagged)  # where the tagging choices apply
SCHEMES: Choice[TaggingScheme] = Choice("finetune.tagging", "tagging scheme (Table 13)")  # standard first
for _scheme in (
    # decoding repairs by conlleval's rule: an I-X that does not continue a mention of type X starts one
    TaggingScheme("bio", ("B", "I"), "B-X begins a mention, I-X continues it (standard)",
                  prefix=lambda i, span, after_same: "B" if i == span.start else "I", decode_rule=iob_to_spans,
                  may_follow=lambda prev, cur: cur[0] != "I" or continues(prev, cur), shown="BIO"),
    # an unfinished mention (B-X, I-X) must go on: only I-X or L-X may follow it, and nothing may end on it
    TaggingScheme("bioul", ("B", "I", "L", "U"), "IOBES (BIOES) in BILOU's letters: BIO plus L-X (last word, IOBES' "
                                               "E-X) and U-X (one-word mention, IOBES' S-X)",
                  prefix=_bioul_prefix, decode_rule=bioul_spans,
                  may_follow=lambda prev, cur: continues(prev, cur) if cur[0] in "IL" else
                  not (prev is not None and prev[0] in "BI"),
                  may_end=lambda tag: tag[0] not in "BI",
                  shown="IOBES (in BILOU's letters: L- for IOBES' E-, U- for its S-; config value `bioul`)"),
    TaggingScheme("io", ("I",), "inside/outside only; adjacent mentions of one type merge",
                  prefix=lambda i, span, after_same: "I", decode_rule=iob_to_spans,
                  may_follow=lambda prev, cur: True, shown="IO"),
):
    SCHEMES.register(_scheme.name, _scheme, task_types=TAGGED_TASK_TYPES)


def shown_name(name: str) -> str:
    """A scheme as a person reads it (config `bioul` is the IOBES of corpora and papers)."""
    return SCHEMES.get(name).shown or name if name in SCHEMES else name


# finetune.subtoken_labels: which sub-tokens of a word carry its tag (scored per word either way).
SUBTOKEN_LABELS: Choice[str] = Choice("finetune.subtoken_labels", "which sub-tokens carry a word's tag (evaluation is "
                                                           "per word either way)")
SUBTOKEN_LABELS.register("first", "each word's first sub-token (standard)", task_types=TAGGED_TASK_TYPES)
SUBTOKEN_LABELS.register("all", "every sub-token of the word", task_types=TAGGED_TASK_TYPES)


def get_scheme(name: str) -> TaggingScheme:
    return SCHEMES.get(name)


def io_merges(spans: Sequence[Span]) -> int:
    """How many gold mentions IO encoding loses: each pair of touching mentions of one type merges."""
    ordered = sorted(spans)
    return sum(1 for a, b in zip(ordered, ordered[1:]) if a.end == b.start and a.label == b.label)

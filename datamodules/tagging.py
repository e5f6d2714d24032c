"""Tagging schemes for NER and PICO (paper Sec. 2.4, Table 13): gold spans -> tags, tags -> spans.

Every scheme is scored the same way: predicted tags are decoded back to spans and compared with the gold
spans, so BIO, BIOUL and IO are on the same entity-level footing.

- `bio`    B-X begins a mention, I-X continues it, O is outside.
- `bioul`  as BIO, plus U-X for a one-word mention and L-X for the last word of a longer one
           (the BIOES / BILOU family).
- `io`     I-X inside, O outside: it cannot separate two adjacent mentions of one type, which merge into
           one (`io_merges` counts how often that happens in gold data).

Decoding never fails; invalid sequences are repaired by one documented rule per scheme (`decode`), and
`allowed_transitions` gives the valid tag bigrams that the CRF is constrained to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from bioablate_core.choices import Choice
from datamodules.instances import Span, iob_to_spans
from datamodules.task_types import TASK_TYPES


@dataclass(frozen=True)
class TaggingScheme:
    name: str
    prefixes: tuple[str, ...]  # tag prefixes besides O
    description: str

    def tags(self, labels: Sequence[str]) -> list[str]:
        """All tags for the span labels, O first (id 0)."""
        return ["O"] + [f"{p}-{label}" for label in labels for p in self.prefixes]

    def encode(self, spans: Sequence[Span], length: int) -> list[str]:
        tags = ["O"] * length
        for span in spans:
            for i in range(span.start, span.end):
                tags[i] = f"{self._prefix(i, span)}-{span.label}"
        return tags

    def _prefix(self, i: int, span: Span) -> str:
        if self.name == "io":
            return "I"
        if self.name == "bioul" and span.end - span.start == 1:
            return "U"
        if i == span.start:
            return "B"
        return "L" if self.name == "bioul" and i == span.end - 1 else "I"

    def decode(self, tags: Sequence[str]) -> tuple[Span, ...]:
        """Tags -> spans. Repair rules for invalid sequences:

        - bio, io: conlleval's rule — an I-X that does not continue a mention of type X starts one.
        - bioul: a mention opens at B-X or U-X (U-X also closes it); I-X / L-X continue an open mention of
          type X (L-X closes it); an I-X / L-X that continues nothing opens a new mention, as in BIO; a
          mention still open when an O, another type or the end arrives is closed before that word.
        """
        if self.name != "bioul":
            return iob_to_spans(tags)
        spans: list[Span] = []
        start, label = None, None
        for i, tag in enumerate(tags):
            prefix, _, typ = tag.partition("-")
            continues = prefix in ("I", "L") and start is not None and typ == label
            if start is not None and not continues:
                spans.append(Span(start, i, label))
                start, label = None, None
            if prefix in ("B", "I", "L", "U") and not continues:
                start, label = i, typ
            if prefix in ("U", "L") and start is not None:
                spans.append(Span(start, i + 1, label))
                start, label = None, None
        if start is not None:
            spans.append(Span(start, len(tags), label))
        return tuple(spans)

    def allowed_transitions(self, tags: Sequence[str]) -> tuple[set[int], set[tuple[int, int]], set[int]]:
        """(tags that may start a sequence, allowed (from, to) pairs, tags that may end one): exactly the
        sequences that `decode` needs no repair for."""
        parsed = [(t.partition("-")[0], t.partition("-")[2]) for t in tags]
        inside = {"bio": ("I",), "io": ("I",), "bioul": ("I", "L")}[self.name]
        open_after = {"bio": ("B", "I"), "io": ("I",), "bioul": ("B", "I")}[self.name]

        def may_follow(prev: tuple[str, str] | None, cur: tuple[str, str]) -> bool:
            if cur[0] not in inside or self.name == "io":
                # O, B-X, U-X may follow anything except an unfinished BIOUL mention
                return not (self.name == "bioul" and prev is not None and prev[0] in open_after)
            return prev is not None and prev[0] in open_after and prev[1] == cur[1]

        starts = {j for j, cur in enumerate(parsed) if may_follow(None, cur)}
        pairs = {(i, j) for i, prev in enumerate(parsed) for j, cur in enumerate(parsed) if may_follow(prev, cur)}
        ends = {i for i, (p, _) in enumerate(parsed) if not (self.name == "bioul" and p in open_after)}
        return starts, pairs, ends


TAGGED_TASK_TYPES = TASK_TYPES.names(lambda t: t.tagged)  # where the tagging choices apply
SCHEMES: Choice[TaggingScheme] = Choice("finetune.tagging", "tagging scheme (Table 13)")  # standard first
for _scheme in (
    TaggingScheme("bio", ("B", "I"), "B-X begins a mention, I-X continues it (standard)"),
    TaggingScheme("bioul", ("B", "I", "L", "U"), "IOBES (BIOES) in BILOU's letters: BIO plus L-X (last word, IOBES' "
                                               "E-X) and U-X (one-word mention, IOBES' S-X)"),
    TaggingScheme("io", ("I",), "inside/outside only; adjacent mentions of one type merge"),
):
    SCHEMES.register(_scheme.name, _scheme, task_types=TAGGED_TASK_TYPES)


# How users read a scheme's name: `bioul` is the config value (and in run fingerprints), IOBES what corpora and
# papers call the scheme (the same scheme, with S- and E- for U- and L-).
SHOWN = {"bio": "BIO", "io": "IO",
         "bioul": "IOBES (in BILOU's letters: L- for IOBES' E-, U- for its S-; config value `bioul`)"}


def shown_name(name: str) -> str:
    """A scheme as a person reads it."""
    return SHOWN.get(name, name)


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

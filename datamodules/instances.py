"""Typed BLURB instances: what every dataset reader returns, before any tokenization.

Four shapes cover the six BLURB task types:

- `TaggingInstance`   NER and PICO: words plus word-level spans (the tagging scheme is applied later,
                      so BIO / BIOUL / IO all start from the same gold spans).
- `RelationInstance`  relation extraction: a sentence plus the character offsets of both entities, so the
                      input transform (dummify / markers / original) can be chosen at fine-tuning time.
- `TextInstance`      document classification (HoC): one text, a tuple of labels (multi-label).
- `PairInstance`      sentence similarity (BIOSSES, float label) and QA (question, context, class label).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True, order=True)
class Span:
    """Words `start` .. `end - 1` form one mention of type `label`."""

    start: int
    end: int
    label: str


@dataclass(frozen=True)
class TaggingInstance:
    id: str
    tokens: tuple[str, ...]
    spans: tuple[Span, ...]


@dataclass(frozen=True)
class Mention:
    """Characters `start` .. `end - 1` of the instance text; `type` is e.g. CHEMICAL, GENE, DRUG."""

    start: int
    end: int
    type: str


@dataclass(frozen=True)
class RelationInstance:
    id: str
    text: str
    head: Mention
    tail: Mention
    label: str


@dataclass(frozen=True)
class TextInstance:
    id: str
    text: str
    labels: tuple[str, ...]


@dataclass(frozen=True)
class PairInstance:
    id: str
    text_a: str
    text_b: str
    label: Union[str, float]


Instance = Union[TaggingInstance, RelationInstance, TextInstance, PairInstance]


def iob_to_spans(tags: list[str] | tuple[str, ...]) -> tuple[Span, ...]:
    """Word-level IOB2 (or IO) tags to spans, conlleval-style.

    An `I-X` that does not continue a mention of type X starts a new one (so IO tags, as in EBM-PICO,
    give maximal runs of one type). Tags without a type (`B`, `I`) get the empty type.
    """
    spans: list[Span] = []
    start, label = None, None
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, typ = tag.partition("-")
        continues = prefix == "I" and start is not None and typ == label
        if start is not None and not continues:
            spans.append(Span(start, i, label))
            start, label = None, None
        if prefix in ("B", "I") and not continues:
            start, label = i, typ
    return tuple(spans)

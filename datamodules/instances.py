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
class Identified:
    """What every instance has first: its id, unique within its dataset (`<file stem>-<n>`, a PMID, a
    question's id...), by which predictions, errors and exports name it."""

    id: str


@dataclass(frozen=True)
class TaggingInstance(Identified):
    tokens: tuple[str, ...]
    spans: tuple[Span, ...]


@dataclass(frozen=True)
class Mention:
    """Characters `start` .. `end - 1` of the instance text; `type` is e.g. CHEMICAL, GENE, DRUG."""

    start: int
    end: int
    type: str


@dataclass(frozen=True)
class RelationInstance(Identified):
    text: str
    head: Mention
    tail: Mention
    label: str


@dataclass(frozen=True)
class TextInstance(Identified):
    text: str
    labels: tuple[str, ...]


@dataclass(frozen=True)
class PairInstance(Identified):
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


# ------------------------------------------------------------------------------ extractive QA

QA_QUESTION_TYPES = ("factoid", "list", "squad")


@dataclass(frozen=True, order=True)
class AnswerSpan:
    """Characters `start` .. `end - 1` of a QA context hold a gold answer (as written there)."""

    start: int
    end: int


@dataclass(frozen=True)
class QAInstance(Identified):
    """One question paired with one context: a BioASQ snippet or a SQuAD paragraph.

    A question with several snippets is several instances sharing `question_id`; predictions are merged
    per question before BioASQ scoring (SQuAD scores each instance on its own).

    - `id`: unique per (question, context), e.g. BioBERT's `<question id>_<nnn>`.
    - `answers`: every gold answer text, synonyms included (for a list question, the synonyms of all its
      items); () where the file has none (test inputs).
    - `answer_spans`: where gold answers were located in `context`, sorted by start; the first is the
      training target. () where none was found (or no answer is known).
    - `question_type`: "factoid", "list" (BioASQ) or "squad" (a SQuAD-format file: the type is not known).
    - `answer_groups`: list questions only: one tuple of synonyms per answer item (BioASQ's list measures
      count an item found when any of its synonyms is predicted); () otherwise.
    """

    question_id: str
    question: str
    context: str
    answers: tuple[str, ...]
    answer_spans: tuple[AnswerSpan, ...] = ()
    question_type: str = "squad"
    answer_groups: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self):
        if self.question_type not in QA_QUESTION_TYPES:
            raise ValueError(f"question_type {self.question_type!r} is not one of {', '.join(QA_QUESTION_TYPES)}")
        for span in self.answer_spans:
            if not 0 <= span.start < span.end <= len(self.context):
                raise ValueError(f"{self.id}: answer span {span} outside its {len(self.context)}-character context")

    @property
    def answer_starts(self) -> tuple[int, ...]:
        """Character offsets of the located answers (SQuAD's `answer_start`)."""
        return tuple(span.start for span in self.answer_spans)

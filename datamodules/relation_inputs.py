"""Relation-extraction input transforms (paper Sec. 2.4 "TransformInput", Table 14). The instance keeps
both entities' character offsets; the transform decides what text the encoder sees and where each entity
is in that text (for the `mention` and `entity-start` featurizers).

- `dummify` (standard): each mention replaced by its type tag, `@CHEMICAL$`, `@GENE$`, `@DRUG$`, ... so
  the model cannot memorise entity names.
- `markers`: `[E1] ... [/E1]` around the head mention and `[E2] ... [/E2]` around the tail, the four
  markers added to the tokenizer as special tokens (single tokens, never split or lowercased).
- `original`: the sentence as it is.

Overlapping mentions: `dummify` replaces their union with one tag (`@CHEMICAL-GENE$`, as BLUE's ChemProt
data does); `markers` nest properly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from bioablate_core.choices import Choice
from datamodules.instances import RelationInstance
from datamodules.task_types import TASK_TYPES

MARKERS = ("[E1]", "[/E1]", "[E2]", "[/E2]")


@dataclass(frozen=True)
class RelationText:
    """Transformed text, each entity's character range in it, and the offsets of `[E1]`/`[E2]` if any."""

    text: str
    head: tuple[int, int]
    tail: tuple[int, int]
    head_marker: int | None = None
    tail_marker: int | None = None


def type_tag(mention_type: str) -> str:
    return f"@{mention_type}$"


def original(instance: RelationInstance) -> RelationText:
    h, t = instance.head, instance.tail
    return RelationText(instance.text, (h.start, h.end), (t.start, t.end))


def dummify(instance: RelationInstance) -> RelationText:
    text, head, tail = instance.text, instance.head, instance.tail
    if head.start < tail.end and tail.start < head.end:
        start, end = min(head.start, tail.start), max(head.end, tail.end)
        tag = type_tag(f"{head.type}-{tail.type}")
        span = (start, start + len(tag))
        return RelationText(text[:start] + tag + text[end:], span, span)
    first, second = sorted((head, tail), key=lambda m: m.start)
    first_tag, second_tag = type_tag(first.type), type_tag(second.type)
    out = text[: first.start] + first_tag + text[first.end: second.start] + second_tag + text[second.end:]
    first_span = (first.start, first.start + len(first_tag))
    second_start = first.start + len(first_tag) + (second.start - first.end)
    second_span = (second_start, second_start + len(second_tag))
    head_span, tail_span = (first_span, second_span) if first is head else (second_span, first_span)
    return RelationText(out, head_span, tail_span)


def markers(instance: RelationInstance) -> RelationText:
    head, tail = instance.head, instance.tail
    # at one offset closings come first, and an outer mention opens before and closes after an inner one
    events = [
        (head.start, 1, -(head.end - head.start), "[E1] "), (head.end, 0, head.end - head.start, " [/E1]"),
        (tail.start, 1, -(tail.end - tail.start), "[E2] "), (tail.end, 0, tail.end - tail.start, " [/E2]"),
    ]
    pieces, positions, cursor, length = [], {}, 0, 0
    for offset, _, _, marker in sorted(events):
        chunk = instance.text[cursor:offset]
        pieces += [chunk, marker]
        length += len(chunk)
        positions[marker.strip()] = length + (1 if marker.startswith(" ") else 0)
        length += len(marker)
        cursor = offset
    pieces.append(instance.text[cursor:])
    text = "".join(pieces)
    head_span = (positions["[E1]"], positions["[/E1]"] + len("[/E1]"))
    tail_span = (positions["[E2]"], positions["[/E2]"] + len("[/E2]"))
    return RelationText(text, head_span, tail_span, positions["[E1]"], positions["[E2]"])


Transform = Callable[[RelationInstance], RelationText]
RE_INPUTS: Choice[Transform] = Choice("finetune.re_input", "relation input transform (Table 14)")  # standard first
RELATION_TASK_TYPES = TASK_TYPES.names(lambda t: t.relation)
RE_INPUTS.register("dummify", dummify, task_types=RELATION_TASK_TYPES)
RE_INPUTS.register("markers", markers, task_types=RELATION_TASK_TYPES)
RE_INPUTS.register("original", original, task_types=RELATION_TASK_TYPES)


def get_transform(name: str) -> Transform:
    return RE_INPUTS.get(name)

"""Relation-extraction input transforms (paper Sec. 2.4, "TransformInput"): the instance keeps both
entities' character offsets, and the transform decides what text the encoder sees.

`dummify` is the paper's standard: each mention is replaced by its type tag, `@CHEMICAL$`, `@GENE$`,
`@DRUG$`, `@DISEASE$`, so the model cannot memorise entity names.
"""

from __future__ import annotations

from datamodules.instances import Mention, RelationInstance


def type_tag(mention_type: str) -> str:
    return f"@{mention_type}$"


def dummify(instance: RelationInstance) -> str:
    """Replace both mentions by their type tags.

    Overlapping mentions (a chemical inside a gene name, say) cannot both be replaced; their union
    becomes one combined tag, `@CHEMICAL-GENE$`, in head-tail order (BLUE's ChemProt data does the
    same with `@CHEM-GENE$`).
    """
    text, head, tail = instance.text, instance.head, instance.tail
    if head.start < tail.end and tail.start < head.end:
        union = Mention(min(head.start, tail.start), max(head.end, tail.end), "")
        return text[: union.start] + type_tag(f"{head.type}-{tail.type}") + text[union.end:]
    for mention in sorted((head, tail), key=lambda m: m.start, reverse=True):
        text = text[: mention.start] + type_tag(mention.type) + text[mention.end:]
    return text

"""`finetune.qa_merge`: how extractive QA merges a question's answers over its snippets, declared torch-free
so a misspelt rule is answered before torch is imported; qa_spans.py registers each rule's `AnswerRule`.
"""

from __future__ import annotations

from typing import Any

from bioablate_core.choices import Choice
from datamodules.task_types import TASK_TYPES

EXTRACTIVE = TASK_TYPES.names(lambda t: t.spans)

QA_MERGES: Choice[Any] = Choice("finetune.qa_merge", "how a question's answers are merged over its snippets "
                                            "(extractive QA's BioASQ measures)",
                                implemented_in="datamodules.qa_spans")
for _name in ("best-snippet", "biobert-sum", "bioelectra-pairs"):  # the default first
    QA_MERGES.declare(_name, task_types=EXTRACTIVE)

"""`finetune.qa_merge`: how extractive QA merges a question's answers over its snippets, declared torch-free
(the names, and that they apply to extractive QA) so a misspelt rule is answered before torch or
transformers are imported (lightning_modules/choice_names.py). Each rule's entry, an `AnswerRule`, is
registered where it is implemented: datamodules/qa_spans.py.
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

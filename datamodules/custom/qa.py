"""User extractive-QA files (`task_type: qa-extractive`): a SQuAD v1.1 JSON file (`format: squad`) or a
BioASQ Task B golden file (`format: bioasq-golden`), read by the same readers as the built-in datasets
(datamodules/readers/squad.py, bioasq_golden.py).

A golden file's train split keeps only the snippets where an answer was located (and drops questions
answered in none), as BioBERT trains; dev and test keep every snippet, so an unanswerable question counts
as wrong. Which questions it reads follows the metric: `bioasq_list` reads list questions, the others
factoid ones.
"""

from __future__ import annotations

from pathlib import Path

from bioablate_core.errors import DataFormatError
from datamodules.custom.schema import Definition
from datamodules.instances import Instance
from datamodules.readers.bioasq_golden import read_golden_file
from datamodules.readers.squad import read_squad_file


def read_qa_file(definition: Definition, path: Path, split: str) -> list[Instance]:
    if definition.format == "squad":
        return read_squad_file(path)
    question_type = "list" if definition.metric == "bioasq_list" else "factoid"
    instances, counts = read_golden_file(path, (question_type,), locate_only=split == "train")
    if not counts.questions:  # else the dataset would have "no train split" though the file is there
        raise DataFormatError(path, None, f"holds no {question_type} questions (the metric {definition.metric} "
                                          f"reads those; see {definition.source})")
    return instances

"""Extractive QA in SQuAD v1.1 format: any user's file, BioBERT's BioASQ inputs, Bio-ELECTRA's BioASQ set.

Format: `{"data": [{"paragraphs": [{"context": str, "qas": [{"id": str, "question": str,
"answers": [{"text": str, "answer_start": int}, ...]}]}]}]}`. `answers` may be missing or empty (test
inputs such as BioBERT's `BioASQ-test-factoid-*.json` carry none; the gold answers are in the BioASQ
golden files). Every given answer must be found at its `answer_start`: a mismatch means the file was
re-encoded or edited, and training on the wrong span would be silent.

Question ids: BioBERT writes one paragraph per question x snippet with ids `<question id>_<nnn>`,
Bio-ELECTRA `<question id>:<n>`; such an id's question id is the part before the last separator, so that
BioASQ scoring can merge a question's snippets. Any other id is its own question.

Files (MANIFEST sections 12 and 13): `BioBERT/QA/BioASQ-test-factoid-{4b,5b,6b}-{1..5}.json` (no answers),
`BioELECTRA/bioasq/dev.json` (1 809 pairs of 214 questions, one answer each; `read_bioelectra_bioasq` returns
it as the pool that the `bioelectra-factoid` dataset deals into folds by question, datamodules/seed_papers.py).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from bioablate_core.errors import DataFormatError
from datamodules.instances import AnswerSpan, QAInstance
from datamodules.readers.jsonfile import load_json_object
from datamodules.spec import SPLITS, Splits

# Bumped whenever the instances this module's readers return change: it enters their datasets'
# fingerprints in place of the code's bytes (DatasetSpec.fingerprint).
READER_VERSION = 1

BIOBERT_TEST_FILES = tuple(f"BioBERT/QA/BioASQ-test-factoid-{year}b-{batch}.json"
                           for year in (4, 5, 6) for batch in range(1, 6))
BIOELECTRA_BIOASQ_FILE = "BioELECTRA/bioasq/dev.json"

# `<question id>_<nnn>` (BioBERT) or `<question id>:<n>` (Bio-ELECTRA): the snippet's number is digits
_PAIR_ID = re.compile(r"(?P<question>.+)[_:]\d+")


def question_id_of(pair_id: str) -> str:
    """The question a question x context id belongs to: `5a6a..25_000` -> `5a6a..25`; else the id itself."""
    match = _PAIR_ID.fullmatch(pair_id)
    return match.group("question") if match else pair_id


def read_squad_file(path: Path, question_type: str = "squad") -> list[QAInstance]:
    """Every question x paragraph of one SQuAD v1.1 file, in file order. `question_type` is recorded on
    every instance (a SQuAD file does not say whether its questions are factoid or list ones)."""
    path = Path(path)
    data = load_json_object(path, 'a SQuAD v1.1 object {"data": [{"paragraphs": [...]}]}')
    articles = data.get("data")
    if not isinstance(articles, list):
        raise DataFormatError(path, None, 'expected a SQuAD v1.1 object with a list under "data"')
    instances: list[QAInstance] = []
    seen: set[str] = set()
    for a, article in enumerate(articles):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise DataFormatError(path, None, f"data[{a}]: expected an object with a list under 'paragraphs'")
        for p, paragraph in enumerate(paragraphs):
            where = f"data[{a}].paragraphs[{p}]"
            context = _field(path, where, paragraph, "context", str)
            for q, qa in enumerate(_field(path, where, paragraph, "qas", list)):
                instance = _instance(path, f"{where}.qas[{q}]", context, qa, question_type)
                if instance.id in seen:
                    raise DataFormatError(path, None, f"{where}.qas[{q}]: id {instance.id!r} occurs twice")
                seen.add(instance.id)
                instances.append(instance)
    if not instances:
        raise DataFormatError(path, None, "holds no questions (no 'qas' under \"data\"); a SQuAD v1.1 file lists "
                                          'its questions as {"data": [{"paragraphs": [{"context": ..., '
                                          '"qas": [...]}]}]}')
    return instances


def read_squad_splits(data_dir: Path, files: Mapping[str, str | tuple[str, ...]],
                      question_type: str = "squad") -> Splits:
    """Splits from SQuAD files: `files` maps a split name to one file or several (relative to
    `data_dir`), concatenated in the given order. Splits not named are empty."""
    splits: Splits = {name: [] for name in SPLITS}
    for split, names in files.items():
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
        for name in (names,) if isinstance(names, str) else names:
            splits[split].extend(read_squad_file(Path(data_dir) / name, question_type))
    return splits


def read_bioelectra_bioasq(data_dir: Path) -> Splits:
    """Bio-ELECTRA's BioASQ 8b factoid + list test file as the "test" pool (its training file is not
    staged); the file does not say which questions are factoid and which list ones."""
    return {"test": read_squad_file(Path(data_dir) / BIOELECTRA_BIOASQ_FILE)}


def _field(path: Path, where: str, obj: Any, key: str, kind: type) -> Any:
    if not isinstance(obj, dict):
        raise DataFormatError(path, None, f"{where}: expected an object, found {type(obj).__name__}")
    if key not in obj:
        raise DataFormatError(path, None, f"{where} has no key {key!r}")
    if not isinstance(obj[key], kind) or isinstance(obj[key], bool):
        raise DataFormatError(path, None, f"{where}.{key}: expected {kind.__name__}, found {type(obj[key]).__name__}")
    return obj[key]


def _instance(path: Path, where: str, context: str, qa: Any, question_type: str) -> QAInstance:
    pair_id = _field(path, where, qa, "id", str)
    question = _field(path, where, qa, "question", str)
    answers = qa.get("answers") or []
    if not isinstance(answers, list):
        raise DataFormatError(path, None, f"{where} (id {pair_id}).answers: expected a list")
    texts, spans = [], set()
    for n, answer in enumerate(answers):
        answer_where = f"{where}.answers[{n}] (id {pair_id})"
        text = _field(path, answer_where, answer, "text", str)
        start = _field(path, answer_where, answer, "answer_start", int)
        if not text.strip():
            raise DataFormatError(path, None, f"{answer_where}: empty answer text")
        if not 0 <= start <= len(context) - len(text):
            raise DataFormatError(path, None, f"{answer_where}: answer_start {start} is outside its context "
                                              f"({len(context)} characters; answer_start is the 0-based offset of "
                                              "the answer's first character)")
        if context[start:start + len(text)] != text:
            found = context[start:start + len(text)]
            raise DataFormatError(path, None, f"{answer_where}: answer {text!r} is not at answer_start {start} "
                                              f"(the context has {found!r} there)")
        texts.append(text)
        spans.add(AnswerSpan(start, start + len(text)))
    return QAInstance(id=pair_id, question_id=question_id_of(pair_id), question=question, context=context,
                      answers=tuple(dict.fromkeys(texts)), answer_spans=tuple(sorted(spans)),
                      question_type=question_type)

"""Bio-ELECTRA's BioASQ 8b yes/no and answer-candidate ranking files (MANIFEST.md section 13).

- `yesno/{train,test}.tsv`: header `yesno_label<TAB>question<TAB>ideal_answer`, label 1 = yes. A
  question and its ideal answer make a `PairInstance` (question first, as BLURB's QA readers), label
  "yes" or "no"; ids `<split>-<row>` (0-based data row).
- `reranker/test.tsv`: header `label<TAB>question<TAB>answer_candidate`, label 1 = relevant. Each row is
  a `PairInstance(question, candidate, "1"|"0")` with id `q<question>-c<candidate>`: the question's
  number in order of first appearance and the candidate's number within it, so a ranking metric can
  group candidates by question (`question_id`). Only Bio-ELECTRA's test file is staged (its training file
  is over the staging size limit): the reader returns it as the "test" pool, and the dataset's
  protocol deals it into folds by question (`KFolds(group_by="text_a")`).
"""

from __future__ import annotations

from pathlib import Path

from bioablate_core.errors import DataFormatError
from datamodules.instances import PairInstance
from datamodules.spec import Splits
from datamodules.textfiles import decode_utf8, read_bytes

# Bumped whenever the instances this module's readers return change: it enters their datasets'
# fingerprints in place of the code's bytes (DatasetSpec.fingerprint).
READER_VERSION = 1

YESNO_FILES = {"train": "BioELECTRA/yesno/train.tsv", "test": "BioELECTRA/yesno/test.tsv"}
YESNO_HEADER = ("yesno_label", "question", "ideal_answer")
YESNO_LABELS = {"1": "yes", "0": "no"}
RERANK_FILE = "BioELECTRA/reranker/test.tsv"
RERANK_HEADER = ("label", "question", "answer_candidate")
RERANK_LABELS = ("0", "1")


def _rows(path: Path, header: tuple[str, ...]) -> list[tuple[int, list[str]]]:
    """(1-based line number, fields) of the data rows, after checking the header and column count."""
    # split on "\n" only: a stray "\r" or U+2028 inside a text is text, not a line break
    lines = [(n, line.rstrip("\r")) for n, line in enumerate(decode_utf8(path, read_bytes(path)).split("\n"), 1)
             if line.strip()]
    expected = "<TAB>".join(header)
    if not lines or tuple(lines[0][1].split("\t")) != header:
        got = repr(lines[0][1][:60]) if lines else "an empty file"
        raise DataFormatError(path, lines[0][0] if lines else None, f"expected the header '{expected}', got {got}")
    rows = []
    for line, text in lines[1:]:
        fields = text.split("\t")
        if len(fields) != len(header) or not all(f.strip() for f in fields):
            raise DataFormatError(path, line, f"expected {len(header)} non-empty TAB-separated columns "
                                              f"({', '.join(header)}), got {len(fields)}: {text[:60]!r}")
        rows.append((line, fields))
    return rows


def read_yesno_file(path: Path, split: str) -> list[PairInstance]:
    instances = []
    for row, (line, (label, question, answer)) in enumerate(_rows(path, YESNO_HEADER)):
        if label not in YESNO_LABELS:
            raise DataFormatError(path, line, f"expected yesno_label 1 (yes) or 0 (no), got {label!r}")
        instances.append(PairInstance(f"{split}-{row}", question, answer, YESNO_LABELS[label]))
    return instances


def read_bioelectra_yesno(data_dir: Path) -> Splits:
    """Train and test as staged; dev is carved from train by the dataset's protocol."""
    return {split: read_yesno_file(Path(data_dir) / rel, split) for split, rel in YESNO_FILES.items()}


def read_rerank_file(path: Path) -> list[PairInstance]:
    questions: dict[str, int] = {}
    candidates: dict[str, int] = {}
    instances = []
    for line, (label, question, candidate) in _rows(path, RERANK_HEADER):
        if label not in RERANK_LABELS:
            raise DataFormatError(path, line, f"expected label 1 (relevant) or 0, got {label!r}")
        number = questions.setdefault(question, len(questions))
        candidates[question] = candidates.get(question, -1) + 1
        instances.append(PairInstance(f"q{number}-c{candidates[question]}", question, candidate, label))
    return instances


def read_bioelectra_rerank(data_dir: Path) -> Splits:
    """The staged test file as the pool that the dataset's k-fold protocol divides."""
    return {"test": read_rerank_file(Path(data_dir) / RERANK_FILE)}


def question_id(instance_id: str) -> str:
    """`q12-c3` -> `q12`: the group a ranking metric ranks candidates within."""
    return instance_id.partition("-")[0]

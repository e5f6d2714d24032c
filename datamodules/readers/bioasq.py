"""BioASQ Task B yes/no questions: answer yes or no from the question's reference snippets.

Files (MANIFEST section 9), all `{"questions": [{id, body, type, exact_answer, snippets, ...}]}`:

- `BioASQ/golden/7B_golden.json`: the five Task 7B golden test batches merged.
- `BioASQ/golden/{4,5,6}B{1..5}_golden.json`: the Task 4b-6b golden test batches.
- `BioASQ/blurb_dev_question_ids.txt`: BLURB's 75 dev question ids, one per line.

How this differs from the paper (BLURB: 670 / 75 / 140, train and dev drawn from the Task 7b training
set, test = the 140 yes/no questions of the 7B golden batches):

- Test is the same: the 140 yes/no questions of `7B_golden.json`.
- The 7b training set is not staged. Train/dev come from the 4b-6b golden batches instead, a subset of
  it: dev = the questions whose id is one of BLURB's dev ids (only 44 of the 75 occur in those batches),
  train = the rest (349 rather than 670). Scores are therefore not directly comparable to the paper's.
- Any 4b-6b question whose id also occurs in the test set is dropped, and an id that occurs in more
  than one batch is kept once, from the first file in sorted order. `bioasq_notes` reports how many
  questions each rule dropped (none, in the staged files).

The context of a question (`text_b`) is its reference snippets joined by spaces.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bioablate_core.errors import DataFormatError
from datamodules.instances import PairInstance
from datamodules.readers.jsonfile import load_json_object
from datamodules.spec import SPLITS, Splits
from datamodules.textfiles import read_text_lines

# Bumped whenever the instances this module's readers return change: it enters their datasets'
# fingerprints in place of the code's bytes (DatasetSpec.fingerprint).
READER_VERSION = 1

TEST_FILE = "BioASQ/golden/7B_golden.json"
TRAIN_FILES = tuple(f"BioASQ/golden/{task}B{batch}_golden.json" for task in (4, 5, 6) for batch in range(1, 6))
DEV_IDS_FILE = "BioASQ/blurb_dev_question_ids.txt"

BIOASQ_LABELS = ("yes", "no")


@dataclass(frozen=True)
class BioasqCounts:
    """What `read_bioasq` dropped or could not find, for the notes shown to users."""

    duplicates_dropped: int
    test_overlap_dropped: int
    dev_ids_found: int
    dev_ids_listed: int


def read_bioasq(data_dir: Path) -> Splits:
    """Train / dev from the 4b-6b golden batches, test from 7B (see the module docstring)."""
    return _read(Path(data_dir))[0]


def bioasq_notes(data_dir: Path) -> str:
    """One paragraph on how the splits differ from the paper's, with the counts from the staged files."""
    splits, counts = _read(Path(data_dir))
    sizes = " / ".join(str(len(splits[name])) for name in SPLITS)
    return (
        f"BioASQ train/dev/test = {sizes} (paper 670 / 75 / 140). Test is BLURB's: the 140 yes/no "
        "questions of the 7B golden batches. The 7b training set is not staged, so train/dev are the "
        f"yes/no questions of the 4b-6b golden batches; dev holds the {counts.dev_ids_found} of BLURB's "
        f"{counts.dev_ids_listed} dev ids that occur there. Dropped: {counts.test_overlap_dropped} "
        f"question(s) also in the test set, {counts.duplicates_dropped} duplicate id(s) across batches."
    )


def _read(data_dir: Path) -> tuple[Splits, BioasqCounts]:
    test = _yesno_questions(data_dir / TEST_FILE)
    test_ids = {instance.id for instance in test}
    dev_ids = _read_dev_ids(data_dir / DEV_IDS_FILE)

    seen: set[str] = set()
    duplicates = overlaps = 0
    splits: Splits = {name: [] for name in SPLITS}
    for name in sorted(TRAIN_FILES):
        for instance in _yesno_questions(data_dir / name):
            if instance.id in test_ids:
                overlaps += 1
            elif instance.id in seen:
                duplicates += 1
            else:
                seen.add(instance.id)
                splits["dev" if instance.id in dev_ids else "train"].append(instance)
    splits["test"] = test
    counts = BioasqCounts(duplicates, overlaps, len(splits["dev"]), len(dev_ids))
    return splits, counts


def _read_dev_ids(path: Path) -> set[str]:
    return {line.strip() for line in read_text_lines(path) if line.strip()}


def _yesno_questions(path: Path) -> list[PairInstance]:
    """The yes/no questions of one golden file, in file order."""
    data = load_json_object(path, 'a JSON object {"questions": [...]}')
    if not isinstance(data.get("questions"), list):
        raise DataFormatError(path, None, 'expected a JSON object {"questions": [...]}')

    instances = []
    for index, question in enumerate(data["questions"]):
        if not isinstance(question, dict):
            raise DataFormatError(path, None, f"questions[{index}]: expected an object")
        qid = question.get("id", f"questions[{index}]")
        for key in ("id", "type"):
            if key not in question:
                raise DataFormatError(path, None, f"question {qid} has no key {key!r}")
        if question["type"] == "yesno":
            instances.append(_instance(path, qid, question))
    return instances


def _instance(path: Path, qid: str, question: dict[str, Any]) -> PairInstance:
    for key in ("body", "exact_answer", "snippets"):
        if key not in question:
            raise DataFormatError(path, None, f"question {qid} has no key {key!r}")
    if not isinstance(question["body"], str):
        raise DataFormatError(path, None, f"question {qid}: body must be a string")
    snippets = question["snippets"]
    if not isinstance(snippets, list):
        raise DataFormatError(path, None, f"question {qid}: snippets must be a list")
    texts = []
    for index, snippet in enumerate(snippets):
        if not isinstance(snippet, dict) or not isinstance(snippet.get("text"), str):
            raise DataFormatError(path, None, f"question {qid}: snippets[{index}] has no string key 'text'")
        texts.append(snippet["text"])
    return PairInstance(
        id=qid, text_a=question["body"], text_b=" ".join(texts), label=_yes_no(path, qid, question["exact_answer"])
    )


def _yes_no(path: Path, qid: str, answer: Any) -> str:
    """`"yes"` or `"no"`. The BioASQ schema allows the answer as a string or a one-element (nested) list,
    and casing varies between releases, so both are normalised."""
    while isinstance(answer, list) and len(answer) == 1:
        answer = answer[0]
    label = " ".join(answer.lower().split()) if isinstance(answer, str) else None
    if label not in BIOASQ_LABELS:
        raise DataFormatError(path, None, f"question {qid}: exact_answer {answer!r} is not 'yes' or 'no'")
    return label

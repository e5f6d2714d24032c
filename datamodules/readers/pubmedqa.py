"""PubMedQA (PQA-L): 1 000 expert-labelled questions, answered yes / no / maybe from an abstract.

Files (MANIFEST section 8):

- `PubMedQA/ori_pqal.json`: PMID -> {QUESTION, CONTEXTS (list of abstract sections), final_decision, ...}.
- `PubMedQA/test_ground_truth.json`: PMID -> label for the 500 official test questions.

Test is the 500 official ids. The other 500 form BLURB's train/dev: the official
`preprocess/split_dataset.py` of the pubmedqa repository cuts them into 10 label-stratified
cross-validation folds of 50 and BLURB trains on folds 1-9 (450) and develops on fold 0 (50). That
script is not staged, so `cv_folds` re-implements it from its description (random.seed(0), per-label
shuffle, 10 folds of 50). The re-implementation is deterministic, but its dev fold is not guaranteed to
hold the same 50 questions as the official one: the original's random state and iteration order cannot
be checked without the script.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

from bioablate_core.errors import DataFormatError
from datamodules.instances import PairInstance
from datamodules.readers.jsonfile import load_json_object
from datamodules.spec import SPLITS, Splits

# Bumped whenever the instances this module's readers return change: it enters their datasets'
# fingerprints in place of the code's bytes (DatasetSpec.fingerprint).
READER_VERSION = 1

QUESTIONS_FILE = "PubMedQA/ori_pqal.json"
TEST_FILE = "PubMedQA/test_ground_truth.json"

PUBMEDQA_LABELS = ("yes", "no", "maybe")
CV_SEED = 0
CV_FOLDS = 10
DEV_FOLD = 0


def read_pubmedqa(data_dir: Path) -> Splits:
    """Train 450 / dev 50 / test 500; instances keep `ori_pqal.json`'s order within each split.

    The test labels of `test_ground_truth.json` must agree with `final_decision`: if they did not, the
    two files would come from different releases and the scores would be meaningless.
    """
    questions_path = Path(data_dir) / QUESTIONS_FILE
    test_path = Path(data_dir) / TEST_FILE
    items = load_json_object(questions_path, "one object keyed by PMID")
    instances = {pmid: _instance(questions_path, pmid, item) for pmid, item in items.items()}

    test_labels = load_json_object(test_path, "one object keyed by PMID")
    for pmid, label in test_labels.items():
        if pmid not in instances:
            raise DataFormatError(test_path, None, f"test id {pmid} is not a question of {QUESTIONS_FILE}")
        if label != instances[pmid].label:
            raise DataFormatError(
                test_path,
                None,
                f"test id {pmid} is labelled {label!r} but its final_decision in {QUESTIONS_FILE} is "
                f"{instances[pmid].label!r}",
            )

    pool = {pmid: str(instance.label) for pmid, instance in instances.items() if pmid not in test_labels}
    dev_ids = set(cv_folds(pool)[DEV_FOLD])
    splits: Splits = {name: [] for name in SPLITS}
    for pmid, instance in instances.items():
        split = "test" if pmid in test_labels else "dev" if pmid in dev_ids else "train"
        splits[split].append(instance)
    return splits


def cv_folds(labels: dict[str, str], folds: int = CV_FOLDS, seed: int = CV_SEED) -> list[list[str]]:
    """Label-stratified folds of equal size, after the official `split_dataset.py`.

    Each label's ids (in input order) are shuffled, labels taken in the order of `PUBMEDQA_LABELS`, and
    cut into `folds` chunks of ceil(n / folds), the last chunk taking the rest; fold i joins chunk i of
    every label. With 276 yes / 169 no / 55 maybe this gives nine folds of 51 and one of 41, so one
    randomly chosen id of each larger fold moves to the last fold, making all ten folds 50.
    """
    rng = random.Random(seed)
    output: list[list[str]] = [[] for _ in range(folds)]
    for label in PUBMEDQA_LABELS:
        ids = [pmid for pmid, gold in labels.items() if gold == label]
        rng.shuffle(ids)
        size = math.ceil(len(ids) / folds)
        for i in range(folds):
            output[i].extend(ids[i * size : (i + 1) * size] if i < folds - 1 else ids[i * size :])
    for fold in output[:-1]:
        if len(fold) > len(output[-1]):
            output[-1].append(fold.pop(rng.randrange(len(fold))))
    return output


def _instance(path: Path, pmid: str, item: Any) -> PairInstance:
    if not isinstance(item, dict):
        raise DataFormatError(path, None, f"item {pmid}: expected an object, found {type(item).__name__}")
    for key in ("QUESTION", "CONTEXTS", "final_decision"):
        if key not in item:
            raise DataFormatError(path, None, f"item {pmid} has no key {key!r}")
    question, contexts, label = item["QUESTION"], item["CONTEXTS"], item["final_decision"]
    if not isinstance(question, str):
        raise DataFormatError(path, None, f"item {pmid}: QUESTION must be a string")
    if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
        raise DataFormatError(path, None, f"item {pmid}: CONTEXTS must be a list of strings")
    if label not in PUBMEDQA_LABELS:
        raise DataFormatError(
            path, None, f"item {pmid}: final_decision {label!r} is not one of {', '.join(PUBMEDQA_LABELS)}"
        )
    return PairInstance(id=pmid, text_a=question, text_b=" ".join(contexts), label=label)

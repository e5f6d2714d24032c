"""The evaluation protocol of a user dataset YAML: where dev comes from (`files.dev`, or `dev:`) and its
cross-validation folds (`folds:`), as the objects of datamodules/protocols.py.

    files: {train: train.tsv, test: test.tsv}     # no dev file:
    dev: {fraction: 0.1, seed: 13}                #   a seeded, label-stratified tenth of train (the default)
    dev: none                                     #   or none: train finetune.epochs epochs, test the last

    folds:                                        # cross-validation over train/test pairs (no `files:`)
      - {train: 1/train.tsv, test: 1/test.tsv}
      - {train: 2/train.tsv, test: 2/test.tsv}
    folds: {k: 10, seed: 13, file: all.tsv}       # or k seeded folds over one file

A dataset without a dev file and without `dev:` carves the default tenth (said once when registered). A
carve or a fold deal keeps together what must not be split: a relation's sentence (re: instances of equal
text), a yes/no question's candidates (qa: equal question), an extractive question's contexts.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Callable

from bioablate_core.counts import MAX_FOLDS, count_problem
from datamodules.fold_lists import ListedFolds
from datamodules.protocols import CarvedDev, KFolds

DEFAULT_FRACTION = 0.1
DEFAULT_SEED = 13
DEFAULT_K = 10
NO_DEV = "none"
POOL = "pool"  # the split a k-fold dataset's reader returns: the one file, dealt into folds
DEV_WORDS = f"`{NO_DEV}` or a mapping {{fraction: {DEFAULT_FRACTION}, seed: {DEFAULT_SEED}}}"
FOLDS_WORDS = (f"a list of {{train: FILE, test: FILE}} pairs or a mapping {{k: {DEFAULT_K}, seed: {DEFAULT_SEED}, "
               "file: FILE}")


@dataclass(frozen=True)
class Protocol:
    """What `dev:` and `folds:` (and `files:`) say, checked."""

    carve_dev: CarvedDev | None
    no_dev: bool
    folds: ListedFolds | KFolds | None
    files: tuple[str, ...]  # every file the dataset reads (DatasetSpec.files)
    train_files: tuple[str, ...]  # the files training instances come from (a k-fold dataset: its one file)
    dev_defaulted: bool  # no dev file, no `dev:`: the default carve, said once when registered
    normalized: dict[str, Any]  # "dev" / "folds" as the normalized definition holds them (absent: not there)


def _given(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def _keys(value: dict, valid: tuple[str, ...], where: str, fail: Callable[[str], Exception]) -> None:
    for key in value:
        if key not in valid:
            close = difflib.get_close_matches(str(key), valid, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise fail(f"unknown key '{where}.{key}'{hint}; valid keys under '{where}': {', '.join(valid)}")


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _file(value: Any, key: str, fail: Callable[[str], Exception]) -> str:
    if not isinstance(value, str) or not value.strip():
        raise fail(f"{key}: expected a file name (relative to path), got {_given(value)}")
    return value


def parse(files: dict[str, str | None], dev: Any, folds: Any, group_by: str | None, format: str,
          fail: Callable[[str], Exception]) -> Protocol:
    """`files` (split -> file or None), `dev` and `folds` as plain values -> Protocol, or `fail(message)`.
    `group_by`: the instance attribute whose equal values stay on one side of a carve or a fold deal (the
    task type's, datamodules/task_types.py), None: none."""
    if folds is not None:
        for split in ("train", "test", "dev"):
            if files.get(split) is not None:
                raise fail(f"files.{split}: a dataset with folds takes its files from 'folds' (dev is carved from "
                           f"each fold's train, or dev: {NO_DEV}); remove 'files'")
        parsed_folds, folds_normalized = _folds(folds, group_by, format, fail)
        if isinstance(parsed_folds, ListedFolds):
            all_files = parsed_folds.all_files()
            train_files = tuple(dict.fromkeys(train for train, _ in parsed_folds.files_by_fold))
        else:
            all_files = train_files = (folds_normalized["file"],)
    else:
        for split in ("train", "test"):
            if files.get(split) is None:
                raise fail(f"missing key 'files.{split}' (or 'folds': cross-validation folds, README, "
                           "'Your own dataset, no Python')")
        parsed_folds, folds_normalized = None, None
        all_files = tuple(files[s] for s in ("train", "dev", "test") if files.get(s) is not None)
        train_files = (files["train"],)
    known = dict(folds=parsed_folds, files=all_files, train_files=train_files)
    normalized: dict[str, Any] = {} if folds_normalized is None else {"folds": folds_normalized}
    if files.get("dev") is not None:
        if dev is not None:
            raise fail(f"dev: the files give a dev split (files.dev: {files['dev']}); remove 'dev' or 'files.dev'")
        return Protocol(None, False, **known, dev_defaulted=False, normalized=normalized)
    if isinstance(dev, str) and dev.strip().lower() == NO_DEV:
        return Protocol(None, True, **known, dev_defaulted=False, normalized={**normalized, "dev": NO_DEV})
    if dev is not None and not isinstance(dev, dict):
        raise fail(f"dev: expected {DEV_WORDS}, got {_given(dev)}")
    _keys(dev or {}, ("fraction", "seed"), "dev", fail)
    fraction, seed = (dev or {}).get("fraction", DEFAULT_FRACTION), (dev or {}).get("seed", DEFAULT_SEED)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
        raise fail(f"dev.fraction: expected a number between 0 and 1 (the share of train that becomes dev), "
                   f"got {_given(fraction)}")
    if not _whole(seed):
        raise fail(f"dev.seed: expected a whole number, got {_given(seed)}")
    carve = CarvedDev(float(fraction), seed, group_by=group_by)
    return Protocol(carve, False, **known, dev_defaulted=dev is None,
                    normalized={**normalized, "dev": {"fraction": float(fraction), "seed": seed}})


def _folds(folds: Any, group_by: str | None, format: str, fail: Callable[[str], Exception]
           ) -> tuple[ListedFolds | KFolds, Any]:
    if isinstance(folds, list):
        if len(folds) < 2:
            raise fail(f"folds: cross-validation needs at least 2 train/test pairs, got {len(folds)}")
        pairs = []
        for i, pair in enumerate(folds):
            if not isinstance(pair, dict):
                raise fail(f"folds[{i}]: expected a mapping {{train: FILE, test: FILE}}, got {_given(pair)}")
            _keys(pair, ("train", "test"), f"folds[{i}]", fail)
            for split in ("train", "test"):
                if split not in pair:
                    raise fail(f"folds[{i}]: missing key '{split}' (each fold is {{train: FILE, test: FILE}})")
            pairs.append(tuple(_file(pair[split], f"folds[{i}].{split}", fail) for split in ("train", "test")))
        for i, (train, test) in enumerate(pairs):
            if train == test:
                raise fail(f"folds[{i}]: train and test are the same file ({train})")
        return ListedFolds(tuple(pairs)), [{"train": train, "test": test} for train, test in pairs]
    if not isinstance(folds, dict):
        raise fail(f"folds: expected {FOLDS_WORDS}, got {_given(folds)}")
    _keys(folds, ("k", "seed", "file"), "folds", fail)
    if "file" not in folds:
        raise fail("folds: missing key 'file' (the one file dealt into k folds)")
    file = _file(folds["file"], "folds.file", fail)
    k, seed = folds.get("k", DEFAULT_K), folds.get("seed", DEFAULT_SEED)
    problem = count_problem(k, 2, MAX_FOLDS)  # bounded before a fold is dealt: 10**20 overflowed in numpy
    if problem is not None:
        raise fail(f"folds.k: {problem} (the number of folds)")
    if not _whole(seed):
        raise fail(f"folds.seed: expected a whole number, got {_given(seed)}")
    if format == "bioasq-golden":
        raise fail("folds: a bioasq-golden file reads its train and test questions differently (train: only "
                   "snippets with a located answer); k folds over one file do not apply, give train/test pairs")
    return KFolds(k, seed, pool=POOL, group_by=group_by), {"k": k, "seed": seed, "file": file}


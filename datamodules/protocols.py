"""Evaluation protocols as data: how a dataset's train / dev / test come about when its files do not
hold all three (BioBERT's and Bio-ELECTRA's benchmarks, MANIFEST.md sections 12 and 13).

A `DatasetSpec` (datamodules/spec.py) may declare:

- `carve_dev=CarvedDev(fraction, seed)`: the files give train and test only; dev is a seeded fraction
  of train's groups (BioBERT's GAD / EU-ADR folds, Bio-ELECTRA's yes/no set).
- `folds=FileFolds(count, templates)`: the files already hold `count` train/test pairs (BioBERT's
  `RE/GAD/{1..10}/`); every `{fold}` in a template is the fold's number, 1-based.
- `folds=KFolds(count, seed)`: one pool of instances (the reader's `pool` split) is dealt into `count`
  parts; fold k tests on part k and trains on the others (Bio-ELECTRA's reranker, of which only the
  test file is staged).

A fold is selected with `spec.fold(k)` (k = 1 .. `spec.fold_count`), a DatasetSpec of its own named
`fold_name(spec.name, k)` ("biobert-gad@fold3") with its own fingerprint. The protocol objects are
frozen dataclasses, so their repr is stable and goes into that fingerprint, with `PROTOCOL_VERSION`.

Carving and dealing keep *groups* whole (instances whose `group_by` attribute is equal: identical GAD
sentences, all candidates of one question) and are stratified by the groups' label sets when the
instances carry class labels, so every fold and every dev split sees the classes in their proportions.
This module imports no other datamodules module but `instances`, so `spec.py` can import it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Union

from datamodules.instances import Instance

# Bumped whenever the splits carving or dealing produces change: it enters every dataset's fingerprint
# that has a protocol (DatasetSpec.code_version).
PROTOCOL_VERSION = 1

FOLD_SEPARATOR = "@fold"
DEFAULT_FOLD = 1  # what a folded spec reads when no fold is chosen: BioBERT's fold 1, as BLURB's GAD


@dataclass(frozen=True)
class CarvedDev:
    """Dev = `fraction` of train's groups (instances of equal `group_by` value; None: every instance
    its own group), drawn with `random.Random(seed)`, stratified by label."""

    fraction: float
    seed: int
    group_by: str | None = None

    def __post_init__(self):
        if not 0.0 < self.fraction < 1.0:
            raise ValueError(f"dev fraction must be between 0 and 1, got {self.fraction}")


@dataclass(frozen=True)
class FileFolds:
    """`count` folds stored as files; `templates` are the spec's files with `{fold}` for the number."""

    count: int
    templates: tuple[str, ...]

    def files(self, fold: int) -> tuple[str, ...]:
        return tuple(t.format(fold=fold) for t in self.templates)

    def all_files(self) -> tuple[str, ...]:
        return tuple(f for k in range(1, self.count + 1) for f in self.files(k))


@dataclass(frozen=True)
class KFolds:
    """`count` seeded folds over the reader's `pool` split, whole groups of equal `group_by` values,
    stratified by the groups' label sets."""

    count: int
    seed: int
    pool: str = "test"
    group_by: str | None = None


Folds = Union[FileFolds, KFolds]


def fold_name(dataset: str, fold: int) -> str:
    """The documented name of fold `fold` (1-based) of `dataset`: `<dataset>@fold<k>`."""
    return f"{dataset}{FOLD_SEPARATOR}{fold}"


def split_fold_name(name: str) -> tuple[str, int | None]:
    """`biobert-gad@fold3` -> ("biobert-gad", 3); a name without a fold -> (name, None)."""
    base, sep, number = name.rpartition(FOLD_SEPARATOR)
    if sep and number.isdigit():
        return base, int(number)
    return name, None


def _label_of(instance: Instance) -> str | None:
    """The class label that stratifies, or None (tagging instances, regression scores)."""
    label = getattr(instance, "label", None)
    if isinstance(label, str):
        return label
    labels = getattr(instance, "labels", None)
    return "|".join(sorted(labels)) if isinstance(labels, tuple) else None


def _strata(instances: list[Instance], group_by: str | None) -> dict[tuple, list[list[int]]]:
    """Label set -> groups (lists of positions), in first-seen order; each group's stratum is the
    sorted set of its members' labels, so a question with a positive candidate is stratified apart
    from one without."""
    groups: dict[object, list[int]] = {}
    for position, instance in enumerate(instances):
        key = position if group_by is None else getattr(instance, group_by)
        groups.setdefault(key, []).append(position)
    strata: dict[tuple, list[list[int]]] = {}
    for members in groups.values():
        labels = {_label_of(instances[i]) for i in members} - {None}
        strata.setdefault(tuple(sorted(labels)), []).append(members)
    return strata


def deal_folds(instances: list[Instance], count: int, seed: int, group_by: str | None = None) -> list[int]:
    """The fold (0-based) of every instance: within each stratum (in sorted order), groups are shuffled
    with `random.Random(seed)` and each goes to the fold that so far has the fewest groups of that
    stratum (ties: fewer instances, then the lower fold). Folds are balanced in groups, the unit a
    grouped metric averages over (MRR over questions); ungrouped, that is instances."""
    if count < 2:
        raise ValueError(f"k-fold needs at least 2 folds, got {count}")
    rng = random.Random(seed)
    assignment = [0] * len(instances)
    for _, groups in sorted(_strata(instances, group_by).items()):
        groups = list(groups)
        rng.shuffle(groups)
        group_counts, sizes = [0] * count, [0] * count
        for members in groups:
            fold = min(range(count), key=lambda k: (group_counts[k], sizes[k], k))
            group_counts[fold] += 1
            sizes[fold] += len(members)
            for position in members:
                assignment[position] = fold
    return assignment


def carve(instances: list[Instance], dev: CarvedDev) -> tuple[list[Instance], list[Instance]]:
    """(train, dev) in file order: per stratum, the first round(fraction * groups in the stratum) of
    its groups, shuffled with `random.Random(seed)`, go to dev."""
    rng = random.Random(dev.seed)
    chosen: set[int] = set()
    for _, groups in sorted(_strata(instances, dev.group_by).items()):
        groups = list(groups)
        rng.shuffle(groups)
        for members in groups[:round(dev.fraction * len(groups))]:
            chosen.update(members)
    return ([x for i, x in enumerate(instances) if i not in chosen],
            [x for i, x in enumerate(instances) if i in chosen])


def apply_protocol(splits: dict[str, list[Instance]], folds: Folds | None, fold: int | None,
                   dev: CarvedDev | None) -> dict[str, list[Instance]]:
    """What the reader returned -> train / dev / test: fold `fold` (1-based) of a `KFolds` pool first,
    then dev carved from train. `FileFolds` need nothing here: the reader read the fold's files."""
    splits = dict(splits)
    if isinstance(folds, KFolds):
        pool = splits.pop(folds.pool)
        assignment = deal_folds(pool, folds.count, folds.seed, folds.group_by)
        test_part = (fold or DEFAULT_FOLD) - 1
        splits["train"] = [x for x, k in zip(pool, assignment) if k != test_part]
        splits["test"] = [x for x, k in zip(pool, assignment) if k == test_part]
    if dev is not None:
        splits["train"], splits["dev"] = carve(splits["train"], dev)
    return {split: splits.get(split, []) for split in ("train", "dev", "test")}

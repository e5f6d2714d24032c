"""Evaluation protocols as data: how a dataset's train / dev / test come about when its files do not
hold all three (BioBERT's and Bio-ELECTRA's benchmarks, MANIFEST.md sections 12 and 13).

- `carve_dev=CarvedDev(fraction, seed)`: dev is a seeded fraction of train's groups;
- `folds=FileFolds(count, templates)`: the files hold `count` train/test pairs (BioBERT's `RE/GAD/{1..10}/`);
- `folds=KFolds(count, seed)`: the reader's `pool` split is dealt into `count` parts.

`spec.fold(k)` is a DatasetSpec of its own ("biobert-gad@fold3"); the protocols are frozen dataclasses, so
their repr is stable and enters its fingerprint. Carving and dealing keep groups of equal `group_by`
whole and stratify by the groups' label sets, so every split sees the classes in their proportions.
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
    """`count` seeded folds over the reader's `pool` split, keeping groups of equal `group_by` whole."""

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
    """Label set -> groups (lists of positions), in first-seen order; a group's stratum is its sorted labels."""
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
    """The 0-based fold of `count` of every instance: per stratum, groups of equal `group_by`, shuffled by
    `seed`, go to the fold with the fewest groups of it so far (ties: fewer instances, then the lower fold)."""
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
    """(train, dev) in file order: per stratum, `dev.fraction` of the groups, shuffled by its seed, go to dev."""
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
    """The reader's splits -> train / dev / test: fold `fold` (1-based) of a `KFolds` pool, then dev carved
    from train by `dev`; `FileFolds` need nothing here."""
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

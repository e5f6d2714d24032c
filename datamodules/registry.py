"""The dataset registry: the names users write in YAML (`task: bc5-chem`) -> their `DatasetSpec`.
Built-in datasets register on import; users add theirs from YAML (`register_from_yaml`).
"""

from __future__ import annotations

from pathlib import Path

from bioablate_core.errors import MissingDataError
from bioablate_core.registry import Registry
from datamodules.blurb import BLURB_DATASETS
from datamodules.metrics import METRICS
from datamodules.protocols import split_fold_name
from datamodules.seed_papers import SEED_PAPER_DATASETS
from datamodules.spec import DatasetSpec
from datamodules.task_types import TASK_TYPES

DATASETS: Registry[DatasetSpec] = Registry("task")


def register(spec: DatasetSpec, *, replace: bool = False) -> DatasetSpec:
    """Add a dataset; a name already taken is a ConfigError unless `replace` (re-reading its own file)."""
    if spec.task_type not in TASK_TYPES:
        # imported only here, so naming a built-in dataset stays free of transformers
        from datamodules.task_kinds import TASK_KINDS

        if spec.task_type not in TASK_KINDS:
            raise ValueError(f"dataset {spec.name}: task type {spec.task_type!r} is neither a task type "
                             f"({', '.join(TASK_TYPES)}) nor a task kind ({', '.join(TASK_KINDS)})")
    METRICS.get(spec.metric)  # a dataset scored by an unknown metric fails here, not after training
    return DATASETS.register(spec.name, spec, replace=replace)


def get_dataset(name: str) -> DatasetSpec:
    """A registered dataset, or one fold of a dataset with folds: `euadr@fold3` is `euadr`'s `fold(3)`."""
    if name not in DATASETS:
        base, fold = split_fold_name(name)
        if fold is not None and base in DATASETS:
            return DATASETS.get(base).fold(fold)
    return DATASETS.get(name)


def dataset_names(task_type: str | None = None) -> list[str]:
    return DATASETS.names(None if task_type is None else lambda spec: spec.task_type == task_type)


def check_data_dir(data_dir: Path, names: list[str] | None = None) -> None:
    """Raise one MissingDataError listing every missing file of the given (default: all) datasets."""
    missing = {}
    for name in names or dataset_names():
        spec = get_dataset(name)
        if spec.root is None and spec.missing_files(data_dir):
            missing[name] = spec.missing_files(data_dir)
    if missing:
        raise MissingDataError(Path(data_dir), missing)


for _spec in (*BLURB_DATASETS, *SEED_PAPER_DATASETS):
    register(_spec)

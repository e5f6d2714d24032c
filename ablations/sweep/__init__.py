"""Optuna sweeps: hyperparameter searches over any config keys, each trial one fine-tuning run in MLflow
(docs/sweeps.md).

    spec.py      the sweep YAML: schema, `load_sweep`, samplers and pruners
    storage.py   the study's database: RDB storage, claim lock, SQLite single-process guard, URL redaction
    tracking.py  MLflow: the study's parent run and the trials' child runs
    worker.py    running a study: objective, pruning, the worker loop, local worker processes
    best.py      the best trial's config as a `--config` layer, and the commands printed after a sweep

The names below load their module on first use (PEP 562), so that `bioablate ui`, which needs the storage
helpers alone, does not import the training stack.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "load_sweep": "spec", "SweepSpec": "spec",
    "STORAGE_ENV": "storage", "default_storage": "storage", "study_storage": "storage", "redact": "storage",
    "sqlite_single_process": "storage",
    "run_sweep": "worker", "SweepPaths": "worker", "SweepSummary": "worker",
    "best_config": "best", "Place": "best", "best_command": "best", "ui_command": "best",
    "finetune_command": "best",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)

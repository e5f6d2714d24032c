"""Where a run's inputs and outputs live: the data directory (given, or fetched by `bioablate data fetch`),
the work directory (outputs and caches) and the MLflow tracking store, each from the config key, else its
environment variable, else the default; each checked here, so a missing or unwritable place is one
ConfigError before any run exists.
"""

from __future__ import annotations

import os
from pathlib import Path

from omegaconf import DictConfig

from bioablate_core.databases import with_driver
from bioablate_core.errors import ConfigError
from bioablate_core.files import unwritable
from datamodules.fetch import fetched_data_dir


def has_data_dir(data_dir: str | None) -> bool:
    """Whether a data directory is given (`--data-dir` / `data_dir`, $BIOABLATE_DATA) or fetched to the
    user data folder: whether `resolve_data_dir` has one to check."""
    return bool(data_dir or os.environ.get("BIOABLATE_DATA")) or fetched_data_dir() is not None


def resolve_data_dir(data_dir: str | None) -> Path:
    """`--data-dir` / the `data_dir` config key, else $BIOABLATE_DATA, else the user data folder once
    `bioablate data fetch` has completed there."""
    raw = data_dir or os.environ.get("BIOABLATE_DATA")
    if not raw:
        fetched = fetched_data_dir()
        if fetched is not None:
            return fetched
        raise ConfigError(
            "no data directory: pass --data-dir DIR, set BIOABLATE_DATA, or run `bioablate data fetch` "
            "(see docs/data.md, 'Getting the data')"
        )
    path = Path(raw).expanduser()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"data directory {path} is a file, expected the folder of staged datasets (from "
                          "--data-dir or BIOABLATE_DATA)")
    if not path.is_dir():
        raise ConfigError(f"data directory {path} does not exist (from --data-dir or BIOABLATE_DATA)")
    return path


def resolve_work_dir(cfg: DictConfig | None = None) -> Path:
    """The work directory, created if needed and checked writable (a read-only or full one is a one-line
    ConfigError here, before any run exists, not a store traceback or a run left RUNNING later)."""
    raw = (cfg.work_dir if cfg is not None else None) or os.environ.get("BIOABLATE_WORK") or "outputs"
    path = Path(raw).expanduser().resolve()
    reason = unwritable(path, probe_bytes=4096, advice=True)
    if reason is not None:
        raise ConfigError(f"work directory {path} is not usable: {reason} (from --work-dir, work_dir or "
                          "BIOABLATE_WORK)")
    return path


def resolve_tracking_uri(cfg: DictConfig | None = None, work_dir: Path | None = None) -> str:
    explicit = (cfg.tracking_uri if cfg is not None else None) or os.environ.get("MLFLOW_TRACKING_URI")
    if explicit:
        return with_driver(explicit)  # postgresql:// names the installed driver
    return f"sqlite:///{(work_dir or resolve_work_dir(cfg)) / 'mlruns.db'}"


def store_absent(tracking_uri: str) -> bool:
    """A local SQLite store whose file does not exist yet (a new work directory): it holds no run."""
    return tracking_uri.startswith("sqlite:///") and not Path(tracking_uri.removeprefix("sqlite:///")).exists()

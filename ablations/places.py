"""Where a run's inputs and outputs live: the data directory (given, or fetched by `bioablate data fetch`),
the work directory (outputs and caches) and the MLflow tracking store, each from the config key, else its
environment variable, else the default; each checked here, so a missing or unwritable place is one
ConfigError before any run exists. And a run's config as its store keeps it (`run_params`): without them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from ablations.config import flatten, under_key
from bioablate_core.databases import with_driver
from bioablate_core.errors import ConfigError
from bioablate_core.files import unwritable
from datamodules.fetch import fetched_data_dir

# Where a run's files lay on the machine that made it (and the store, whose URI may hold a password): not
# part of how it was made; shown as LOCAL in its params, config artifact and model card.
LOCAL_KEYS = ("data_dir", "work_dir", "tracking_uri", "datasets")
LOCAL = "<local>"
# Keys whose value may name a local folder or file (a model folder, a vocab.txt) rather than a name
PATH_KEYS = ("model.name_or_path", "model.vocab", "pretrain.vocab", "pretrain.init")


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


def shown_place(path: Path, root: Path, label: str | None = None) -> str:
    """`path` as a shared store shows it: relative to `root` (the data or work directory), below
    `<label>` (`<data_dir>/gad`; no label: the bare relative path, for files of this checkout); outside
    it, `<local>/` and its own name. Where the folders lay on the machine that made a run is not part
    of how it was made."""
    try:
        relative = Path(path).resolve().relative_to(Path(root).resolve())
    except ValueError:
        return f"<local>/{Path(path).name}"
    if label is None:
        return relative.as_posix()
    return f"<{label}>" if relative == Path(".") else f"<{label}>/{relative.as_posix()}"


def shown_path(value: str, cfg: DictConfig) -> str:
    """A config value as a shared store shows it: a local folder or file (`value` names one that exists,
    as a path: with a `/`, or from `~` or `.`) relative to the work or the data directory (`shown_place`);
    anything else (a named model, a Hub id, a staged vocabulary) as it is."""
    path = Path(value).expanduser()
    if not (("/" in value or value.startswith((".", "~"))) and path.exists()):
        return value
    work_dir = resolve_work_dir(cfg)
    if path.resolve().is_relative_to(work_dir):
        return shown_place(path, work_dir, "work_dir")
    data_dir = cfg.get("data_dir") or os.environ.get("BIOABLATE_DATA")
    return shown_place(path, Path(data_dir).expanduser(), "data_dir") if data_dir else f"<local>/{path.name}"


def store_absent(tracking_uri: str) -> bool:
    """A local SQLite store whose file does not exist yet (a new work directory): it holds no run."""
    return tracking_uri.startswith("sqlite:///") and not Path(tracking_uri.removeprefix("sqlite:///")).exists()


# Config keys a run of each kind never reads (besides `launcher.*`, see `run_params`)
NOT_READ = {"finetune": ("pretrain",),
            "pretrain": ("finetune", "task", "datasets", "keep_model", "model.name_or_path", "model.vocab",
                         "model.lowercase", "model.resize_embeddings")}


def run_params(cfg: DictConfig, kind: str = "finetune") -> dict[str, Any]:
    """A run's MLflow params: the flattened config keys that apply to a `kind` run ('finetune' or
    'pretrain'). Never `launcher.*`, which says where it ran, not what it computed (and may differ when a
    run started here is resumed on a cluster: MLflow params are write-once), nor the keys of the other
    kind (`NOT_READ`: no `pretrain.*` in a fine-tuning run, no `finetune.*` in a pretraining run).
    The machine-local keys (LOCAL_KEYS: where its files lay, the store with its credentials) are logged
    as `<local>`, and a local folder or file a PATH_KEYS key names relative to the work or data directory
    (`ablations.places.shown_path`): a store is shared, and says how a run was made, not where."""
    params = {k: LOCAL if k in LOCAL_KEYS else v for k, v in flatten(cfg).items()
              if not under_key(k, ("launcher", *NOT_READ[kind]))}
    for key in PATH_KEYS:
        if isinstance(params.get(key), str):
            params[key] = shown_path(params[key], cfg)
    return params

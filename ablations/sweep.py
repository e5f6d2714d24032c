"""Optuna sweeps: hyperparameter searches over any config keys, each trial one fine-tuning run in MLflow.

A sweep YAML (see `experiments/sweeps/` and docs/sweeps.md) names a task, a base config (profile and
`key=value` overrides), a search space over config keys, a sampler, a pruner and the objective: a dev
metric of the best dev epoch, averaged over seeds. A trial builds its config exactly as `bioablate
finetune` does, with the sampled values as extra overrides, and runs `run_finetune`; the pruning
callback below reports the dev metric after every epoch and stops a hopeless trial early.

Sharing a study between worker processes (on one machine with `--workers K`, or on several machines that
run the same command against one server database) must neither duplicate nor lose trials:

- claiming a trial (failing stale trials, counting, asking the sampler, sampling the parameters) happens
  under a study-wide lock held by the database (a PostgreSQL advisory lock, MySQL GET_LOCK), so two
  workers never take the last slot or the same grid point;
- a worker stops once COMPLETE + PRUNED trials reach `n_trials`. While the remaining slots are all taken
  by RUNNING trials it waits, because one of them may belong to a dead worker: its heartbeat goes stale,
  the next claim marks it FAIL and `RetryHeartbeatStaleTrialCallback` queues a copy (WAITING, same
  parameters), which the next claim runs first.

SQLite serves one process only (a lock file enforces it): several workers need a server database.
MLflow gets one parent run per study and one child run per trial, created explicitly.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import logging
import math
import os
import socket
import subprocess
import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import optuna
import pytorch_lightning as pl
import sqlalchemy
from mlflow.entities import Metric, Param, RunStatus, RunTag
from omegaconf import DictConfig, OmegaConf
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import FrozenTrial, TrialState

from ablations.config import (NON_RESULT_KEYS, REPO_ROOT, build_config, flatten, load_yaml,
                              parse_overrides, resolve_tracking_uri, resolve_work_dir)
from ablations.finetune import run_finetune
from ablations.tracking import Tracker
from core.errors import ConfigError, UnknownNameError

log = logging.getLogger("bioablate")

STORAGE_ENV = "BIOABLATE_SWEEP_STORAGE"  # the storage URL, kept out of shell history and `ps` listings
SPEC_ATTR = "bioablate.sweep"  # study user attr: what `sweep best` needs to write the winning config
RUN_IDS_ATTR = "mlflow_run_ids"  # trial user attr: the MLflow runs of the trial, one per seed
FINISHED_STATES = (TrialState.COMPLETE, TrialState.PRUNED)

TOP_KEYS = ("task", "study", "profile", "overrides", "experiment", "n_trials", "seeds", "objective",
            "sampler", "pruner", "space", "heartbeat")
OBJECTIVE_KEYS = ("metric", "direction")
HEARTBEAT_KEYS = ("interval", "grace_period", "max_retry")
DIMENSION_KEYS = {"categorical": ("type", "choices"), "int": ("type", "low", "high", "step", "log"),
                  "float": ("type", "low", "high", "step", "log")}


# ---------------------------------------------------------------------------------------------------
# The sweep YAML


@dataclass(frozen=True)
class Dimension:
    """One searched config key: categorical choices, or an int / float range (optionally log-scaled)."""

    key: str
    kind: str
    choices: tuple[Any, ...] = ()
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False

    def suggest(self, trial: optuna.Trial) -> Any:
        if self.kind == "categorical":
            return trial.suggest_categorical(self.key, list(self.choices))
        if self.kind == "int":
            return trial.suggest_int(self.key, int(self.low), int(self.high), step=int(self.step or 1),
                                     log=self.log)
        return trial.suggest_float(self.key, float(self.low), float(self.high), step=self.step, log=self.log)

    def grid_values(self, source: str) -> list[Any]:
        """Every value, for the grid sampler; a continuous range has none to enumerate."""
        if self.kind == "categorical":
            return list(self.choices)
        if self.step is None and self.kind == "float":
            raise ConfigError(f"{source}: space.{self.key}: the grid sampler needs categorical choices or a "
                              "range with a step; a continuous float range cannot be enumerated")
        step = self.step or 1
        count = int(math.floor((self.high - self.low) / step + 1e-9)) + 1
        values = [self.low + i * step for i in range(count)]
        return [int(v) for v in values] if self.kind == "int" else [round(v, 12) for v in values]

    def sample_value(self) -> Any:
        """A valid value, to check the key against the config schema before any trial runs."""
        return self.choices[0] if self.kind == "categorical" else self.low


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep YAML, plus what the command line added (task, overrides, n_trials)."""

    path: Path
    task: str
    study: str
    profile: str
    overrides: tuple[str, ...]  # the YAML's, then the command line's
    cli_overrides: tuple[str, ...]  # the command line's alone: worker processes get them again
    experiment: str
    n_trials: int
    seeds: tuple[int, ...]
    metric: str
    direction: str
    sampler: Mapping[str, Any]  # {"type": name, **options}
    pruner: Mapping[str, Any]
    space: tuple[Dimension, ...]
    heartbeat_interval: int
    grace_period: int
    max_retry: int

    def to_attr(self) -> dict[str, Any]:
        """What `sweep best` reads back from the study, wherever the YAML has gone since."""
        return {"task": self.task, "profile": self.profile, "overrides": list(self.overrides),
                "metric": self.metric, "direction": self.direction, "seeds": list(self.seeds)}


def _check_keys(value: Any, allowed: Sequence[str], where: str, source: Path) -> dict[str, Any]:
    label = f"'{where}'" if where else "the top level"
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: expected a mapping at {label}")
    for key in value:
        if key not in allowed:
            name = f"{where}.{key}" if where else key
            raise ConfigError(f"{source}: unknown key '{name}'; valid keys at {label}: {', '.join(allowed)}")
    return value


def _require(mapping: dict[str, Any], key: str, where: str, source: Path) -> Any:
    if mapping.get(key) is None:
        raise ConfigError(f"{source}: missing required key '{where}{key}'")
    return mapping[key]


def _dimension(key: str, raw: Any, source: Path) -> Dimension:
    where = f"space.{key}"
    if not isinstance(raw, dict) or "type" not in raw:
        raise ConfigError(f"{source}: {where}: expected a mapping with a 'type' "
                          f"({', '.join(DIMENSION_KEYS)})")
    kind = raw["type"]
    if kind not in DIMENSION_KEYS:
        raise ConfigError(f"{source}: {where}: unknown distribution type '{kind}'; known: "
                          f"{', '.join(DIMENSION_KEYS)} (int and float take `log: true` for a log scale)")
    _check_keys(raw, DIMENSION_KEYS[kind], where, source)
    if kind == "categorical":
        choices = _require(raw, "choices", where + ".", source)
        if not isinstance(choices, list) or not choices or any(isinstance(c, (list, dict)) for c in choices):
            raise ConfigError(f"{source}: {where}.choices: expected a non-empty list of plain values")
        return Dimension(key, kind, choices=tuple(choices))
    low, high = _require(raw, "low", where + ".", source), _require(raw, "high", where + ".", source)
    step, log_scale = raw.get("step"), bool(raw.get("log", False))
    number = int if kind == "int" else (int, float)
    for name, value in (("low", low), ("high", high), ("step", step)):
        if value is not None and (not isinstance(value, number) or isinstance(value, bool)):
            raise ConfigError(f"{source}: {where}.{name}: expected {'an int' if kind == 'int' else 'a number'}, "
                              f"got {value!r}")
    if low > high:
        raise ConfigError(f"{source}: {where}: low ({low}) is greater than high ({high})")
    if log_scale and (low <= 0 or step not in (None, 1)):
        raise ConfigError(f"{source}: {where}: a log scale needs low > 0 and no step")
    if step is not None and step <= 0:
        raise ConfigError(f"{source}: {where}.step: must be positive")
    return Dimension(key, kind, low=low, high=high, step=step, log=log_scale)


def load_sweep(path: Path | str, task: str | None = None, overrides: Sequence[str] = (),
               n_trials: int | None = None, study: str | None = None) -> SweepSpec:
    """Read and validate a sweep YAML; command-line values win over the file's. Every mistake is a
    one-line ConfigError naming the file and the key, raised before any trial starts."""
    source = Path(path)
    raw = OmegaConf.to_container(load_yaml(source), resolve=True)
    _check_keys(raw, TOP_KEYS, "", source)
    space_raw = _require(raw, "space", "", source)
    if not isinstance(space_raw, dict) or not space_raw:
        raise ConfigError(f"{source}: 'space' must map config keys to distributions, e.g. "
                          "finetune.lr: {type: categorical, choices: [1.0e-5, 3.0e-5]}")
    space = tuple(_dimension(str(key), value, source) for key, value in space_raw.items())
    objective = _check_keys(raw.get("objective") or {}, OBJECTIVE_KEYS, "objective", source)
    direction = objective.get("direction", "maximize")
    if direction not in ("maximize", "minimize"):
        raise ConfigError(f"{source}: objective.direction: expected maximize or minimize, got '{direction}'")
    heartbeat = _check_keys(raw.get("heartbeat") or {}, HEARTBEAT_KEYS, "heartbeat", source)
    for key, value in heartbeat.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < (0 if key == "max_retry" else 1):
            raise ConfigError(f"{source}: heartbeat.{key}: expected a positive whole number of "
                              f"{'retries' if key == 'max_retry' else 'seconds'}, got {value!r}")
    yaml_overrides = raw.get("overrides") or []
    if not isinstance(yaml_overrides, list):
        raise ConfigError(f"{source}: 'overrides' must be a list of key=value strings")
    seeds = raw.get("seeds") or [42]
    if not isinstance(seeds, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise ConfigError(f"{source}: 'seeds' must be a list of integers, got {seeds!r}")

    task = task or raw.get("task")
    if not task:
        raise ConfigError(f"{source}: missing required key 'task' (or pass --task)")
    sampler = _options(raw.get("sampler") or {"type": "tpe"}, "sampler", source)
    pruner = _options(raw.get("pruner") or {"type": "none"}, "pruner", source)
    spec = SweepSpec(
        path=source.resolve(), task=task, study=study or raw.get("study") or f"{source.stem}-{task}",
        profile=raw.get("profile", "micro"), overrides=tuple([*map(str, yaml_overrides), *overrides]),
        cli_overrides=tuple(overrides), experiment=raw.get("experiment", "sweeps"), n_trials=0,
        seeds=tuple(seeds), metric=objective.get("metric", "score"), direction=direction,
        sampler=sampler, pruner=pruner, space=space,
        heartbeat_interval=heartbeat.get("interval", 10), grace_period=heartbeat.get("grace_period", 60),
        max_retry=heartbeat.get("max_retry", 3))
    keys = [d.key for d in space]
    base_keys = {o.split("=", 1)[0] for o in spec.overrides}
    for key in keys:
        if key in base_keys:
            raise ConfigError(f"{source}: space.{key} is also set in 'overrides'; keep it in one place")
    # Building one config checks every searched key, override and the DDP rule before anything runs.
    sample = [f"{d.key}={d.sample_value()}" for d in space]
    try:
        sample_cfg = build_config(spec.profile, [*spec.overrides, *sample], task=task)
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
    check_single_process(sample_cfg, source)
    make_sampler(spec)  # unknown sampler names and options fail here, not in a worker
    make_pruner(spec)
    total = n_trials if n_trials is not None else raw.get("n_trials")
    grid = _grid_size(spec) if spec.sampler["type"] == "grid" else None
    if total is None:
        if grid is None:
            raise ConfigError(f"{source}: missing required key 'n_trials' (or pass --n-trials)")
        total = grid
    if not isinstance(total, int) or isinstance(total, bool) or total < 1:
        raise ConfigError(f"{source}: n_trials: expected a positive integer, got {total!r}")
    if grid is not None and total > grid:
        raise ConfigError(f"{source}: n_trials is {total} but the grid has only {grid} points")
    return dataclasses.replace(spec, n_trials=total)


def _options(raw: Any, where: str, source: Path) -> dict[str, Any]:
    if isinstance(raw, str):
        raw = {"type": raw}
    if not isinstance(raw, dict) or "type" not in raw:
        raise ConfigError(f"{source}: '{where}' must be a name or a mapping with a 'type'")
    return dict(raw)


def check_single_process(cfg: DictConfig, source: Path | str) -> None:
    """Trials are the unit of parallelism: one process, one device each. DDP inside a trial would need
    every rank to follow rank 0's Optuna trial (pruning decisions included); refusing it keeps a trial
    one process that a heartbeat can watch."""
    devices, strategy = cfg.trainer.devices, str(cfg.trainer.strategy)
    one_device = devices in (1, "1") or (OmegaConf.is_list(devices) and len(devices) == 1)
    if not one_device or cfg.trainer.num_nodes != 1 or strategy.startswith(("ddp", "fsdp", "deepspeed")):
        raise ConfigError(
            f"{source}: a sweep trial runs on one device in one process (got trainer.devices={devices}, "
            f"trainer.num_nodes={cfg.trainer.num_nodes}, trainer.strategy={strategy}); DDP inside a trial "
            "is not supported: run trials in parallel with --workers (see docs/sweeps.md)")


# ---------------------------------------------------------------------------------------------------
# Samplers and pruners, keyed by the names users write


def _grid(spec: SweepSpec) -> dict[str, list[Any]]:
    return {d.key: d.grid_values(str(spec.path)) for d in spec.space}


def _grid_size(spec: SweepSpec) -> int:
    return math.prod(len(values) for values in _grid(spec).values())


SAMPLERS: dict[str, Callable[..., optuna.samplers.BaseSampler]] = {
    "grid": lambda spec, **options: optuna.samplers.GridSampler(_grid(spec), **options),
    "tpe": lambda spec, **options: optuna.samplers.TPESampler(**options),
    "random": lambda spec, **options: optuna.samplers.RandomSampler(**options),
}
SAMPLER_OPTIONS = {"grid": ("seed",), "tpe": ("seed", "n_startup_trials", "n_ei_candidates", "multivariate",
                                              "group", "constant_liar", "consider_endpoints"),
                   "random": ("seed",)}
PRUNERS: dict[str, Callable[..., optuna.pruners.BasePruner]] = {
    "median": optuna.pruners.MedianPruner,
    "hyperband": optuna.pruners.HyperbandPruner,
    "none": optuna.pruners.NopPruner,
}
PRUNER_OPTIONS = {"median": ("n_startup_trials", "n_warmup_steps", "interval_steps", "n_min_trials"),
                  "hyperband": ("min_resource", "max_resource", "reduction_factor", "bootstrap_count"),
                  "none": ()}


def _split(options: Mapping[str, Any], kind: str, known: Mapping[str, Any], allowed: Mapping[str, tuple],
           source: Path) -> tuple[str, dict[str, Any]]:
    name = str(options["type"])
    if name not in known:
        raise ConfigError(f"{source}: {UnknownNameError(kind, name, list(known))}")
    rest = {k: v for k, v in options.items() if k != "type"}
    for key in rest:
        if key not in allowed[name]:
            raise ConfigError(f"{source}: unknown key '{kind}.{key}' for the {name} {kind}; valid keys: "
                              f"{', '.join(('type', *allowed[name]))}")
    return name, rest


def make_sampler(spec: SweepSpec, seed_offset: int = 0) -> optuna.samplers.BaseSampler:
    """`seed_offset` (the worker index) keeps workers that share a study from drawing the same random
    sequence, which a random or TPE sampler would otherwise turn into duplicated trials."""
    name, options = _split(spec.sampler, "sampler", SAMPLERS, SAMPLER_OPTIONS, spec.path)
    if options.get("seed") is not None:
        options["seed"] = int(options["seed"]) + seed_offset
    try:
        return SAMPLERS[name](spec, **options)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{spec.path}: sampler: {error}") from None


def make_pruner(spec: SweepSpec) -> optuna.pruners.BasePruner:
    name, options = _split(spec.pruner, "pruner", PRUNERS, PRUNER_OPTIONS, spec.path)
    try:
        return PRUNERS[name](**options)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{spec.path}: pruner: {error}") from None


# ---------------------------------------------------------------------------------------------------
# Pruning: the per-epoch dev metric, fed to the trial


class PruningCallback(pl.Callback):
    """Reports `monitor` (e.g. dev/score) to the trial after each validation, step = epoch, and stops the
    run with optuna.TrialPruned when the pruner says so. Written here rather than taken from the
    optional optuna-integration package; it also remembers the MLflow run id, which a pruned
    `run_finetune` never returns."""

    def __init__(self, trial: optuna.Trial, monitor: str):
        self.trial, self.monitor = trial, monitor
        self.run_id: str | None = None

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.run_id = getattr(trainer.logger, "run_id", None)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        value = trainer.callback_metrics.get(self.monitor)
        if value is None:
            known = sorted(k for k in trainer.callback_metrics if k.startswith("dev/"))
            raise ConfigError(f"objective metric '{self.monitor}' is not logged; logged: {', '.join(known)}")
        epoch = trainer.current_epoch
        self.trial.report(float(value), step=epoch)
        if self.trial.should_prune():
            raise optuna.TrialPruned(f"{self.monitor}={float(value):.4f} at epoch {epoch}")


# ---------------------------------------------------------------------------------------------------
# Storage: heartbeat, retries, and the claim lock


def default_storage(work_dir: Path) -> str:
    return f"sqlite:///{work_dir / 'optuna.db'}"


def redact(url: str) -> str:
    """The storage URL without its password, for logs and MLflow tags."""
    try:
        return sqlalchemy.engine.make_url(url).render_as_string(hide_password=True)
    except sqlalchemy.exc.ArgumentError:
        raise ConfigError(f"not a database URL: '{url}' (e.g. postgresql+psycopg2://user:pw@host/db or "
                          "sqlite:///path/optuna.db)") from None


@contextmanager
def _quiet_experimental() -> Iterator[None]:
    """Heartbeats and trial retries have been "experimental" in Optuna since 2.8; the warning on every
    call is noise in a user's terminal."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        yield


def open_storage(url: str, spec: SweepSpec | None = None) -> RDBStorage:
    """An RDB storage with heartbeats: a trial whose worker died goes stale after the grace period, is
    marked FAIL and re-queued (same parameters) up to `max_retry` times."""
    redact(url)
    with _quiet_experimental():
        heartbeat: dict[str, Any] = {}
        if spec is not None:
            heartbeat = dict(heartbeat_interval=spec.heartbeat_interval, grace_period=spec.grace_period,
                             heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(spec.max_retry))
        try:
            return RDBStorage(url, **heartbeat)
        except (ImportError, sqlalchemy.exc.SQLAlchemyError) as error:
            raise ConfigError(f"cannot open the study storage {redact(url)}: "
                              f"{str(error).splitlines()[0]}") from None


class ClaimLock:
    """A study-wide mutex held by the database, so it spans processes and machines and dies with its
    holder's connection. SQLite needs none: the process holds the database's lock file throughout."""

    def __init__(self, storage: RDBStorage, study_name: str):
        self.dialect = storage.engine.dialect.name
        if self.dialect not in ("postgresql", "mysql", "sqlite"):
            raise ConfigError(f"study storage dialect '{self.dialect}' is not supported; use postgresql, "
                              "mysql or sqlite")
        self.engine = storage.engine
        self.name = f"bioablate-sweep:{study_name}"
        self.key = int.from_bytes(hashlib.sha256(self.name.encode()).digest()[:8], "big", signed=True)
        self.connection: sqlalchemy.engine.Connection | None = None

    def acquire(self) -> None:
        if self.dialect == "sqlite" or self.connection is not None:
            return
        self.connection = self.engine.connect()
        if self.dialect == "postgresql":
            self.connection.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"), {"key": self.key})
        else:
            self.connection.execute(sqlalchemy.text("SELECT GET_LOCK(:name, -1)"), {"name": self.name})

    def release(self) -> None:
        """Idempotent: the objective releases the lock as soon as its parameters are sampled."""
        if self.connection is None:
            return
        if self.dialect == "postgresql":
            self.connection.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:key)"), {"key": self.key})
        else:
            self.connection.execute(sqlalchemy.text("SELECT RELEASE_LOCK(:name)"), {"name": self.name})
        self.connection.close()
        self.connection = None

    @contextmanager
    def held(self) -> Iterator[None]:
        self.acquire()
        try:
            yield
        finally:
            self.release()


@contextmanager
def sqlite_single_process(url: str) -> Iterator[None]:
    """SQLite cannot be shared safely between processes (a busy database fails writes at random); this
    turns a second process into a clear error instead."""
    database = sqlalchemy.engine.make_url(url).database
    if not url.startswith("sqlite") or not database or database == ":memory:":
        yield
        return
    lock_path = Path(database + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(
                f"the SQLite study storage {url} is in use by another process; SQLite serves one process: "
                "for several workers use a server database, e.g. --storage "
                "postgresql+psycopg2://user:password@host/db (see docs/sweeps.md)") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ---------------------------------------------------------------------------------------------------
# MLflow: one parent run per study, one child run per trial


class SweepTracking:
    """The study's parent run (found again by study and storage, or created) and its children."""

    def __init__(self, spec: SweepSpec, base: DictConfig, storage_url: str):
        work_dir = resolve_work_dir(base)
        self.spec = spec
        self.tracking_uri = resolve_tracking_uri(base, work_dir)
        self.tracker = Tracker(self.tracking_uri, spec.experiment, artifact_root=work_dir / "mlartifacts")
        self.client = self.tracker.client
        self.storage = redact(storage_url)
        self.parent_id = ""

    def open_parent(self) -> str:
        """Call under the claim lock: workers starting together must find one parent, not create two."""
        query = (f"tags.kind = 'sweep' and tags.`sweep.study` = '{self.spec.study}' "
                 f"and tags.`sweep.storage` = '{self.storage}'")
        found = self.client.search_runs([self.tracker.experiment_id], query, max_results=1)
        if found:
            self.parent_id = found[0].info.run_id
            self.client.update_run(self.parent_id, status="RUNNING")
            return self.parent_id
        spec = self.spec
        tags = {"kind": "sweep", "sweep.study": spec.study, "sweep.storage": self.storage,
                "sweep.direction": spec.direction, "sweep.metric": spec.metric, "task": spec.task,
                "profile": spec.profile}
        params = {"n_trials": spec.n_trials, "seeds": list(spec.seeds), "sampler": json.dumps(spec.sampler),
                  "pruner": json.dumps(spec.pruner), "overrides": list(spec.overrides),
                  **{f"space.{d.key}": json.dumps({k: v for k, v in d.__dict__.items() if k != "key"})
                     for d in spec.space}}
        self.parent_id = self.tracker.create(f"sweep-{spec.study}", tags, params)
        return self.parent_id

    def trial_tags(self, trial: optuna.Trial, seed: int) -> dict[str, str]:
        return {"mlflow.parentRunId": self.parent_id, "sweep.study": self.spec.study,
                "sweep.trial": str(trial.number), "sweep.seed": str(seed)}

    def reuse_child(self, trial: optuna.Trial, seed: int, params: Mapping[str, Any], reused_id: str) -> str:
        """An identical config already finished (in another study, or an earlier trial of this one):
        run_finetune reused its result, and this trial still gets a child run of its own pointing to it."""
        reused = self.client.get_run(reused_id)
        run = self.client.create_run(self.tracker.experiment_id, run_name=f"trial-{trial.number}-s{seed}",
                                     tags={**self.trial_tags(trial, seed), "sweep.reused_run_id": reused_id})
        metrics = [Metric(k, v, int(time.time() * 1000), 0) for k, v in reused.data.metrics.items()
                   if k.startswith(("best_dev/", "test/"))]
        self.client.log_batch(run.info.run_id, metrics=metrics,
                              params=[Param(k, str(v)) for k, v in params.items()])
        self.client.set_terminated(run.info.run_id, RunStatus.to_string(RunStatus.FINISHED))
        return run.info.run_id

    def after_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """Optuna callback: the trial's final state and value on its child runs (a run resumed from an
        earlier, killed trial is re-parented to this one), and the best value so far on the parent."""
        for run_id in trial.user_attrs.get(RUN_IDS_ATTR, []):
            tags = [RunTag("mlflow.parentRunId", self.parent_id), RunTag("sweep.study", self.spec.study),
                    RunTag("sweep.trial", str(trial.number)), RunTag("sweep.trial_state", trial.state.name)]
            with _quiet_experimental():
                retried = RetryHeartbeatStaleTrialCallback.retried_trial_number(trial)
            if retried is not None:
                tags.append(RunTag("sweep.retried_trial", str(retried)))
            metrics = ([Metric("sweep.value", float(trial.value), int(time.time() * 1000), trial.number)]
                       if trial.value is not None else [])
            self.client.log_batch(run_id, metrics=metrics, tags=tags)
        self.log_best(study)

    def log_best(self, study: optuna.Study) -> None:
        best = _best_trial(study)
        if best is None:
            return
        self.client.log_batch(self.parent_id, metrics=[
            Metric("sweep.best_value", float(best.value), int(time.time() * 1000), best.number)], tags=[
            RunTag("sweep.best_trial", str(best.number)), RunTag("sweep.best_params", json.dumps(best.params))])

    def close_parent(self, study: optuna.Study, complete: bool, interrupted: bool) -> None:
        counts = {state.name.lower(): len(study.get_trials(deepcopy=False, states=(state,)))
                  for state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)}
        self.client.log_batch(self.parent_id, metrics=[
            Metric(f"sweep.n_{name}", float(n), int(time.time() * 1000), 0) for name, n in counts.items()])
        self.log_best(study)
        status = RunStatus.FINISHED if complete else RunStatus.KILLED if interrupted else RunStatus.FAILED
        self.client.set_terminated(self.parent_id, RunStatus.to_string(status))


def _best_trial(study: optuna.Study) -> FrozenTrial | None:
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        return None
    pick = max if study.direction == optuna.study.StudyDirection.MAXIMIZE else min
    return pick(complete, key=lambda t: t.value)


# ---------------------------------------------------------------------------------------------------
# Running a study


@dataclass
class SweepPaths:
    """Where trials read and write: the same for every worker of a study."""

    data_dir: str | None = None
    work_dir: str | None = None
    tracking_uri: str | None = None


@dataclass
class SweepSummary:
    study: str
    storage: str  # redacted
    n_trials: int
    counts: dict[str, int] = field(default_factory=dict)  # trial state name -> number of trials
    best_value: float | None = None
    best_params: dict[str, Any] = field(default_factory=dict)
    parent_run_id: str = ""
    tracking_uri: str = ""
    worker_exit_codes: list[int] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.counts.get("COMPLETE", 0) + self.counts.get("PRUNED", 0) >= self.n_trials


def _base_config(spec: SweepSpec, paths: SweepPaths, extra: Sequence[str] = (), seed: int | None = None
                 ) -> DictConfig:
    return build_config(spec.profile, [*spec.overrides, *extra], task=spec.task, seed=seed,
                        data_dir=paths.data_dir, work_dir=paths.work_dir, tracking_uri=paths.tracking_uri,
                        experiment_name=spec.experiment)


class Objective:
    """One trial: sample every parameter under the claim lock, release it, then one fine-tuning run
    per seed; the value is the mean of the runs' best-dev metric. Only the first seed is pruned: the
    pruner compares a trial's learning curve with other trials' first-seed curves."""

    def __init__(self, spec: SweepSpec, paths: SweepPaths, tracking: SweepTracking, lock: ClaimLock):
        self.spec, self.paths, self.tracking, self.lock = spec, paths, tracking, lock

    def __call__(self, trial: optuna.Trial) -> float:
        params = {d.key: d.suggest(trial) for d in self.spec.space}
        self.lock.release()
        trial.set_user_attr("worker", f"{socket.gethostname()}:{os.getpid()}")
        sampled = [f"{key}={value}" for key, value in params.items()]
        values: list[float] = []
        run_ids: list[str] = []
        for index, seed in enumerate(self.spec.seeds):
            cfg = _base_config(self.spec, self.paths, sampled, seed)
            check_single_process(cfg, self.spec.path)
            pruning = [PruningCallback(trial, f"dev/{self.spec.metric}")] if index == 0 else []
            try:
                result = run_finetune(cfg, callbacks=pruning, tags=self.tracking.trial_tags(trial, seed),
                                      stop_exceptions=(optuna.TrialPruned,))
            except optuna.TrialPruned:
                trial.set_user_attr(RUN_IDS_ATTR, [*run_ids, *[p.run_id for p in pruning if p.run_id]])
                raise
            run_ids.append(self.tracking.reuse_child(trial, seed, params, result.run_id) if result.reused
                           else result.run_id)
            trial.set_user_attr(RUN_IDS_ATTR, run_ids)
            if self.spec.metric not in result.best_dev:
                raise ConfigError(f"{self.spec.path}: objective.metric '{self.spec.metric}' is not a dev "
                                  f"metric of {self.spec.task}; logged: {', '.join(sorted(result.best_dev))}")
            values.append(float(result.best_dev[self.spec.metric]))
        return sum(values) / len(values)


def _counts(study: optuna.Study) -> tuple[int, int]:
    trials = study.get_trials(deepcopy=False, states=(*FINISHED_STATES, TrialState.RUNNING))
    finished = sum(t.state in FINISHED_STATES for t in trials)
    return finished, len(trials) - finished


def work(spec: SweepSpec, study: optuna.Study, objective: Objective, lock: ClaimLock,
         tracking: SweepTracking) -> None:
    """Claim and run trials until the study has `n_trials` finished ones (see the module docstring)."""
    while True:
        with lock.held():
            with _quiet_experimental():
                optuna.storages.fail_stale_trials(study)
            finished, running = _counts(study)
            if finished >= spec.n_trials:
                return
            claim = finished + running < spec.n_trials
            if claim:  # ask (inside optimize) and sampling run under the lock; the objective releases it
                study.optimize(objective, n_trials=1, callbacks=[tracking.after_trial])
        if not claim:
            time.sleep(spec.heartbeat_interval)


def _open_study(spec: SweepSpec, storage: RDBStorage, seed_offset: int) -> optuna.Study:
    study = optuna.create_study(storage=storage, study_name=spec.study, sampler=make_sampler(spec, seed_offset),
                                pruner=make_pruner(spec), direction=spec.direction, load_if_exists=True)
    if study.direction.name.lower() != spec.direction:
        raise ConfigError(f"study '{spec.study}' in {redact(storage.url)} was created to "
                          f"{study.direction.name.lower()}, the sweep says {spec.direction}")
    return study


def run_sweep(spec: SweepSpec, storage_url: str | None = None, workers: int = 1, worker_index: int = 0,
              paths: SweepPaths | None = None, verbose: bool = False) -> SweepSummary:
    """Run (or resume) the study: `workers` local processes, or this process when 1.

    The storage is `storage_url`, else $BIOABLATE_SWEEP_STORAGE, else SQLite in the work directory.
    Rerunning the same command resumes the study: finished trials count, killed ones are retried.
    """
    paths = paths or SweepPaths()
    base = _base_config(spec, paths)
    work_dir = resolve_work_dir(base)
    paths = SweepPaths(paths.data_dir, str(work_dir), resolve_tracking_uri(base, work_dir))
    url = storage_url or os.environ.get(STORAGE_ENV) or default_storage(work_dir)
    if workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {workers}")
    if workers > 1 and url.startswith("sqlite"):
        raise ConfigError(
            f"SQLite storage ({redact(url)}) serves one process; --workers {workers} needs a server database, "
            "e.g. --storage postgresql+psycopg2://user:password@host/db (see docs/sweeps.md)")
    with sqlite_single_process(url):
        storage = open_storage(url, spec)
        study = _open_study(spec, storage, worker_index)
        study.set_user_attr(SPEC_ATTR, spec.to_attr())
        tracking = SweepTracking(spec, base, url)
        lock = ClaimLock(storage, spec.study)
        with lock.held():
            tracking.open_parent()
        log.info("study '%s' in %s: %d trials, MLflow parent run %s", spec.study, redact(url), spec.n_trials,
                 tracking.parent_id)
        exit_codes: list[int] = []
        interrupted = False
        try:
            if workers == 1:
                work(spec, study, Objective(spec, paths, tracking, lock), lock, tracking)
            else:
                exit_codes = _spawn_workers(spec, url, workers, worker_index, paths, verbose)
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            summary = summarize(spec, study, url, tracking, exit_codes)
            tracking.close_parent(study, summary.complete, interrupted)
    return summary


def _spawn_workers(spec: SweepSpec, url: str, workers: int, first_index: int, paths: SweepPaths,
                   verbose: bool) -> list[int]:
    """K copies of the same command with --workers 1: exactly what another machine would run. The
    storage URL travels in the environment, not on a command line other users can read."""
    argv = [sys.executable, "-m", "ablations.cli", *(["-v"] if verbose else []), "sweep", str(spec.path),
            "--task", spec.task, "--study", spec.study, "--n-trials", str(spec.n_trials), "--workers", "1",
            "--work-dir", str(paths.work_dir), "--tracking-uri", str(paths.tracking_uri),
            *(["--data-dir", paths.data_dir] if paths.data_dir else []), *spec.cli_overrides]
    env = {**os.environ, STORAGE_ENV: url,
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    processes = [subprocess.Popen([*argv, "--worker-index", str(first_index + i)], env=env)
                 for i in range(workers)]
    log.info("started %d workers (pids %s)", workers, ", ".join(str(p.pid) for p in processes))
    try:
        return [p.wait() for p in processes]
    except KeyboardInterrupt:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait()
        raise


def summarize(spec: SweepSpec, study: optuna.Study, url: str, tracking: SweepTracking | None = None,
              exit_codes: Sequence[int] = ()) -> SweepSummary:
    counts: dict[str, int] = {}
    for trial in study.get_trials(deepcopy=False):
        counts[trial.state.name] = counts.get(trial.state.name, 0) + 1
    best = _best_trial(study)
    return SweepSummary(spec.study, redact(url), spec.n_trials, counts,
                        best.value if best else None, dict(best.params) if best else {},
                        tracking.parent_id if tracking else "", tracking.tracking_uri if tracking else "",
                        list(exit_codes))


# ---------------------------------------------------------------------------------------------------
# The best configuration, as a YAML layer an experiment can include


def best_config(study_name: str, storage_url: str) -> tuple[str, FrozenTrial]:
    """The best trial's config keys (the sweep's overrides and the sampled values) as YAML, headed by
    a comment saying where it came from; bookkeeping keys (paths, progress bar) are left out."""
    storage = open_storage(storage_url)
    names = optuna.get_all_study_names(storage)
    if study_name not in names:
        raise ConfigError(f"no study '{study_name}' in {redact(storage_url)}; studies there: "
                          f"{', '.join(sorted(names)) or 'none'}")
    study = optuna.load_study(study_name=study_name, storage=storage)
    best = _best_trial(study)
    if best is None:
        raise ConfigError(f"study '{study_name}' has no completed trial yet")
    spec = study.user_attrs.get(SPEC_ATTR, {})
    layer = parse_overrides(list(spec.get("overrides", [])))
    for key, value in best.params.items():
        OmegaConf.update(layer, key, value, force_add=True)
    kept = {k: v for k, v in flatten(layer).items() if k not in NON_RESULT_KEYS}
    snippet = OmegaConf.create({})
    for key, value in kept.items():
        OmegaConf.update(snippet, key, value, force_add=True)
    header = (f"# best trial {best.number} of study '{study_name}' ({redact(storage_url)}): "
              f"{spec.get('metric', 'score')} = {best.value:.6g} ({spec.get('direction', 'maximize')}), "
              f"task {spec.get('task', '?')}, profile {spec.get('profile', '?')}, "
              f"seeds {spec.get('seeds', [])}\n"
              "# a config layer: merge it over a profile, or pass its keys as key=value overrides\n")
    return header + OmegaConf.to_yaml(snippet), best

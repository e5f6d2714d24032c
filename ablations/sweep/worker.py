"""Running a study: the objective (one fine-tuning run per seed), the pruning callback, the worker loop
that claims trials, and the local worker processes of `--workers K`.

A trial builds its config exactly as `bioablate finetune` does, with the sampled values as extra
overrides, and runs `run_finetune`; the pruning callback reports the dev metric after every epoch and
stops a hopeless trial early. Workers sharing a study must neither duplicate nor lose trials:

- claiming a trial (failing stale trials, counting, asking the sampler, sampling the parameters) happens
  under the study-wide `ClaimLock`, so two workers never take the last slot or the same grid point;
- a worker stops once COMPLETE + PRUNED trials reach `n_trials`. While the remaining slots are all taken
  by RUNNING trials it waits, because one of them may belong to a dead worker: its heartbeat goes stale,
  the next claim marks it FAIL and `RetryHeartbeatStaleTrialCallback` queues a copy (WAITING, same
  parameters), which the next claim runs first.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import optuna
import pytorch_lightning as pl
from omegaconf import DictConfig
from optuna.storages import RDBStorage
from optuna.trial import TrialState

from ablations.checks import check_accelerator_present
from ablations.config import REPO_ROOT, build_config
from ablations.places import resolve_tracking_uri, resolve_work_dir
from ablations.run.finetune import run_finetune
from ablations.sweep.spec import SPEC_ATTR, SweepSpec, check_single_process, make_pruner, make_sampler
from ablations.sweep.storage import (
    STORAGE_ENV,
    ClaimLock,
    open_storage,
    quiet_experimental,
    sqlite_single_process,
    study_storage,
)
from ablations.sweep.tracking import RUN_IDS_ATTR, SweepTracking, best_trial
from bioablate_core.databases import hide_passwords, redact
from bioablate_core.errors import ConfigError, UnknownNameError
from bioablate_core.interrupts import Interrupted
from datamodules.registry import get_dataset

log = logging.getLogger("bioablate")

FINISHED_STATES = (TrialState.COMPLETE, TrialState.PRUNED)


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
    work_dir: str = ""
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
            with quiet_experimental():
                optuna.storages.fail_stale_trials(study)
            finished, running = _counts(study)
            if finished >= spec.n_trials:
                return
            claim = finished + running < spec.n_trials
            if claim:  # ask (inside optimize) and sampling run under the lock; the objective releases it
                study.optimize(objective, n_trials=1, callbacks=[tracking.after_trial])
        if not claim:
            time.sleep(spec.heartbeat_interval)


def objective_name(spec: SweepSpec) -> str:
    """The study's value as Optuna's dashboard and plots label it: the dev metric (of the best dev epoch,
    mean over seeds); for `score`, the task's own metric beside it."""
    name = f"dev/{spec.metric}"
    if spec.metric != "score":
        return name
    try:
        return f"{name} ({get_dataset(spec.task).metric})"
    except UnknownNameError:  # a user dataset, registered only when a trial runs
        return name


def _open_study(spec: SweepSpec, storage: RDBStorage, seed_offset: int) -> optuna.Study:
    study = optuna.create_study(storage=storage, study_name=spec.study, sampler=make_sampler(spec, seed_offset),
                                pruner=make_pruner(spec), direction=spec.direction, load_if_exists=True)
    if study.direction.name.lower() != spec.direction:
        raise ConfigError(f"study '{spec.study}' in {redact(storage.url)} was created to "
                          f"{study.direction.name.lower()}, the sweep says {spec.direction}")
    with quiet_experimental():
        study.set_metric_names([objective_name(spec)])
    return study


def run_sweep(spec: SweepSpec, storage_url: str | None = None, workers: int = 1, worker_index: int = 0,
              paths: SweepPaths | None = None, verbose: bool = False) -> SweepSummary:
    """Run (or resume) the study: `workers` local processes, or this process when 1.

    The storage is `storage_url`, else $BIOABLATE_SWEEP_STORAGE, else SQLite in the work directory.
    Rerunning the same command resumes the study: finished trials count, killed ones are retried.
    """
    paths = paths or SweepPaths()
    base = _base_config(spec, paths)
    check_accelerator_present(base)  # before the study and its MLflow parent run exist
    work_dir = resolve_work_dir(base)
    paths = SweepPaths(paths.data_dir, str(work_dir), resolve_tracking_uri(base, work_dir))
    url = study_storage(storage_url, work_dir)
    if workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {workers}")
    if workers > 1 and url.startswith("sqlite"):
        raise ConfigError(
            f"SQLite storage ({redact(url)}) serves one process; --workers {workers} needs a server database, "
            "e.g. --storage postgresql+psycopg2://user:password@host/db (see docs/sweeps.md)")
    with sqlite_single_process(url), open_storage(url, spec) as storage:
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
        except (KeyboardInterrupt, Interrupted):  # Ctrl-C / SIGTERM (bioablate_core.interrupts)
            interrupted = True
            raise
        finally:
            summary = study_summary(spec, study, url, tracking, str(paths.work_dir), exit_codes)
            tracking.close_parent(study, summary.complete, interrupted)
    return summary


def worker_argv(spec: SweepSpec, paths: SweepPaths, worker_index: int, verbose: bool = False) -> list[str]:
    """The `bioablate` arguments of one worker: the same sweep with `--workers 1`, exactly what another
    machine (or a SLURM job) runs to share the study. The storage URL goes in $BIOABLATE_SWEEP_STORAGE, and
    a tracking URI holding a password in $MLFLOW_TRACKING_URI (`_spawn_workers`): a command line is
    readable by every user of the machine (`ps`)."""
    uri = str(paths.tracking_uri)
    tracking = ["--tracking-uri", uri] if hide_passwords(uri) == uri else []
    return [*(["-v"] if verbose else []), "sweep", str(spec.path), "--task", spec.task, "--study", spec.study,
            "--n-trials", str(spec.n_trials), "--workers", "1", "--work-dir", str(paths.work_dir),
            *tracking, *(["--data-dir", paths.data_dir] if paths.data_dir else []),
            "--worker-index", str(worker_index), *spec.cli_overrides]


def _spawn_workers(spec: SweepSpec, url: str, workers: int, first_index: int, paths: SweepPaths,
                   verbose: bool) -> list[int]:
    """K copies of the same command with --workers 1: exactly what another machine would run. The
    storage URL travels in the environment, not on a command line other users can read."""
    env = {**os.environ, STORAGE_ENV: url, "MLFLOW_TRACKING_URI": str(paths.tracking_uri),
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    processes = [subprocess.Popen([sys.executable, "-m", "ablations.cli",
                                   *worker_argv(spec, paths, first_index + i, verbose)], env=env)
                 for i in range(workers)]
    log.info("started %d workers (pids %s)", workers, ", ".join(str(p.pid) for p in processes))
    try:
        return [p.wait() for p in processes]
    except (KeyboardInterrupt, Interrupted):  # Ctrl-C / SIGTERM (bioablate_core.interrupts)
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait()
        raise


def study_summary(spec: SweepSpec, study: optuna.Study, url: str, tracking: SweepTracking,
                  work_dir: str, exit_codes: Sequence[int] = ()) -> SweepSummary:
    """Where the study stands: trial counts by state, the best value and parameters, where it is logged."""
    counts: dict[str, int] = {}
    for trial in study.get_trials(deepcopy=False):
        counts[trial.state.name] = counts.get(trial.state.name, 0) + 1
    best = best_trial(study)
    return SweepSummary(spec.study, redact(url), spec.n_trials, counts,
                        best.value if best else None, dict(best.params) if best else {},
                        tracking.parent_id, tracking.tracking_uri, work_dir, list(exit_codes))



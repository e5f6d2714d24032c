"""The lifecycle of a tracked run, one implementation for fine-tuning and pretraining.

A run is identified by its fingerprint (MLflow tag `fingerprint`); its checkpoints live in
`<work_dir>/runs/<fingerprint>/checkpoints/`.

    run = TrackedRun.open(cfg, fingerprint, force)      # find the newest run with this fingerprint
    done = run.finished()                               # FINISHED already (and not force): reuse it
    run.start(name, tags, params)                       # take an unfinished run over, or create one
    with run.tracked():                                 # FINISHED on success, FAILED (tag `error`) on an
        ... train from run.resume_from ...              # exception, KILLED on Ctrl-C; checkpoints kept
                                                        # unless it finished and not keep_checkpoints

- FINISHED (unless `force`): reused, nothing is recomputed.
- FAILED / KILLED / still RUNNING (its process died): the same MLflow run is taken over and training
  resumes from `last.ckpt`.
- Otherwise (or with `force`): a new MLflow run, and any old checkpoints are removed first.

Under DDP Lightning starts the other ranks by rerunning the command after rank 0 has decided reuse /
resume / new and removed stale checkpoints. Those worker processes (`core.distributed.is_ddp_worker`)
never touch the tracking store: they resume from a `last.ckpt` if one exists (the one rank 0 resumes
from), and every reporting method here does nothing in them.
"""

from __future__ import annotations

import logging
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from mlflow.entities import Run
from omegaconf import DictConfig
import pytorch_lightning as pl
from pytorch_lightning.loggers import Logger

from ablations.config import resolve_tracking_uri, resolve_work_dir
from ablations.tracking import Tracker, git_commit
from core.distributed import is_ddp_worker
from lightning_modules.preemption import CheckpointOnSignal, Preempted

log = logging.getLogger("bioablate")


@dataclass
class TrackedRun:
    fingerprint: str
    run_dir: Path  # <work_dir>/runs/<fingerprint>
    tracking_uri: str
    tracker: Tracker | None  # None in a DDP worker process: rank 0 owns the tracking store
    previous: Run | None  # the newest run with this fingerprint when opened (always None in a worker)
    force: bool
    keep_checkpoints: bool
    run_id: str | None = None  # set by `start` (rank 0 only)
    resuming: bool = False  # `start` took over an unfinished run

    @classmethod
    def open(cls, cfg: DictConfig, fingerprint: str, force: bool = False) -> "TrackedRun":
        work_dir = resolve_work_dir(cfg)
        tracking_uri = resolve_tracking_uri(cfg, work_dir)
        tracker = previous = None
        if not is_ddp_worker():
            tracker = Tracker(tracking_uri, cfg.experiment_name, artifact_root=work_dir / "mlartifacts")
            previous = tracker.find(fingerprint)
        return cls(fingerprint, work_dir / "runs" / fingerprint, tracking_uri, tracker, previous, force,
                   bool(cfg.keep_checkpoints))

    @property
    def checkpoint_dir(self) -> Path:
        return self.run_dir / "checkpoints"

    @property
    def last_checkpoint(self) -> Path:
        return self.checkpoint_dir / "last.ckpt"

    @property
    def is_worker(self) -> bool:
        return self.tracker is None

    def finished(self, usable: Callable[[Run], bool] = lambda run: True) -> Run | None:
        """The earlier FINISHED run to reuse instead of computing anything, or None: none, `force`, or
        not `usable` (e.g. its exported model is gone)."""
        previous = self.previous
        if previous is None or previous.info.status != "FINISHED" or self.force or not usable(previous):
            return None
        log.info("run %s already finished (MLflow run %s): reusing it", self.fingerprint, previous.info.run_id)
        return previous

    def start(self, name: str, tags: dict[str, str], params: dict[str, Any]) -> None:
        """Take over the earlier unfinished run, or create a new one named `name` with `tags` (plus
        `fingerprint` and `git_commit`) and `params`. A worker process does nothing: rank 0 decided."""
        if self.is_worker:
            return
        previous = self.previous
        self.resuming = previous is not None and previous.info.status != "FINISHED" and not self.force
        if self.resuming:
            self.run_id = previous.info.run_id
            log.info("resuming MLflow run %s (%s)", self.run_id, previous.info.status)
            return
        shutil.rmtree(self.checkpoint_dir, ignore_errors=True)  # a new run never resumes stale weights
        self.run_id = self.tracker.create(name, {"fingerprint": self.fingerprint, "git_commit": git_commit(),
                                                 **tags}, params)

    @property
    def resume_from(self) -> Path | None:
        """The checkpoint to resume training from: `last.ckpt` when taking over an unfinished run (in a
        worker: whenever it exists, as rank 0 removed it otherwise)."""
        if (self.resuming or self.is_worker) and self.last_checkpoint.exists():
            return self.last_checkpoint
        return None

    def callbacks(self) -> list[pl.Callback]:
        """Trainer callbacks every tracked run has: on the scheduler's warning signal (SLURM's SIGUSR2
        before a time limit or preemption), checkpoint to `last.ckpt` at the next step and stop."""
        return [CheckpointOnSignal(self.last_checkpoint)]

    @contextmanager
    def tracked(self, stop_exceptions: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
        """Run the body inside the MLflow run (see `Tracker.tracked_run`; `stop_exceptions` and
        `Preempted` end it as KILLED). On success the checkpoints go unless `keep_checkpoints`; on failure
        they stay for the resume."""
        if self.is_worker:
            yield
            return
        with self.tracker.tracked_run(self.run_id, (Preempted, *stop_exceptions)):
            yield
        if not self.keep_checkpoints:
            shutil.rmtree(self.checkpoint_dir, ignore_errors=True)

    # ---- reporting into the run (nothing in a DDP worker)

    def lightning_logger(self) -> Logger | bool:
        """The Trainer's `logger`: Lightning's MLflow logger bound to this run, or False in a worker."""
        return False if self.is_worker else self.tracker.lightning_logger(self.run_id)

    def set_tag(self, key: str, value: str) -> None:
        if not self.is_worker:
            self.tracker.client.set_tag(self.run_id, key, value)

    def log_metrics(self, metrics: dict[str, float]) -> None:
        if not self.is_worker:
            self.tracker.log_metrics(self.run_id, metrics)

    def log_artifacts(self, paths: list[Path]) -> None:
        if not self.is_worker:
            for path in paths:
                self.tracker.client.log_artifact(self.run_id, str(path))

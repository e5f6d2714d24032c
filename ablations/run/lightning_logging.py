"""The Lightning side of a run's tracking (ablations/run/tracking.py): the logger a run's Trainer writes its
metric points with, and the callback that stores them at the points a resumed run depends on. A module of
its own so that planning runs and reading a store import no Lightning."""

from __future__ import annotations

import logging
import re
import time
from typing import Any, Mapping

import pytorch_lightning as pl
from mlflow.entities import Metric
from pytorch_lightning.loggers import MLFlowLogger

from ablations.run.tracking import METRICS_PER_BATCH, SignalSafeClient

log = logging.getLogger("bioablate")


class RunOwnedMLFlowLogger(MLFlowLogger):
    """Lightning's MLflow logger, minus ending the run: `Tracker.tracked_run` decides the final status
    (Lightning would mark the run FINISHED after `fit`, before the test set is scored). Its store calls
    are signal-safe, as the tracker's.

    Every step's points are kept (the Trainer logs every step) and written `flush_every` steps at a time,
    in one store write (a SQLite transaction per step would cost more than a micro model's step), and
    whenever `flush` is called: before every checkpoint (`FlushPoints`: a resumed run keeps the points
    below its checkpoint's step, so they must be stored by then), after each validation, at the end.
    Lightning's `epoch` point, added to every logging call, is left out: a chart of the epoch number."""

    def __init__(self, *args: Any, flush_every: int = 1, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._mlflow_client = SignalSafeClient(self._mlflow_client)
        self.flush_every = flush_every
        self._points: list[Metric] = []
        self._steps: set[int] = set()

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        now = int(time.time() * 1000)
        for key, value in metrics.items():
            if key != "epoch" and not isinstance(value, str):
                self._points.append(Metric(re.sub(r"[^a-zA-Z0-9_/. -]+", "", key), float(value), now, step or 0))
        self._steps.add(step or 0)
        if len(self._steps) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        """Write the points kept so far, in as few store writes as MLflow allows."""
        points, self._points, self._steps = self._points, [], set()
        for start in range(0, len(points), METRICS_PER_BATCH):
            self.experiment.log_batch(run_id=self.run_id, metrics=points[start:start + METRICS_PER_BATCH])

    def finalize(self, status: str = "success") -> None:
        if status == "success":
            self.flush()
            return
        try:  # a failed or interrupted fit: keep what it logged, but never hide its own error behind ours
            self.flush()
        except Exception as error:  # noqa: BLE001
            log.warning("could not store the last metric points of MLflow run %s (%s)", self.run_id,
                        " ".join(str(error).split())[:200])


class FlushPoints(pl.Callback):
    """Stores the run's kept metric points before every checkpoint (see `RunOwnedMLFlowLogger`), after
    each validation (the dev scores show up while training goes on) and when training or testing ends."""

    @staticmethod
    def _flush(trainer: pl.Trainer) -> None:
        for logger in trainer.loggers:
            if isinstance(logger, RunOwnedMLFlowLogger):
                logger.flush()

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict) -> None:
        self._flush(trainer)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._flush(trainer)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._flush(trainer)

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._flush(trainer)

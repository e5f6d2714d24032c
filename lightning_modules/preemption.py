"""Stop cleanly when a scheduler says the job's time is up, so a requeued job resumes where this one stopped.

SLURM signals before it ends a job (`sbatch --signal=USR2@120`). The handler only raises a flag, since a
checkpoint taken inside it would catch an optimizer step half-done; the next step boundary writes the
checkpoint and raises `Preempted`, and the launcher requeues. Under DDP the ranks agree with one all-reduce
per step.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import pytorch_lightning as pl

from bioablate_core.interrupts import Preempted


class CheckpointOnSignal(pl.Callback):
    """On `signum`, save `path` at the next optimizer-step boundary and raise `Preempted`."""

    def __init__(self, path: Path, signum: int = signal.SIGUSR2):
        self.path, self.signum = Path(path), signum
        self.requested = False
        self._previous: Any = None
        self._step = -1

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._step = trainer.global_step
        if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
            self._previous = signal.signal(self.signum, self._handle)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        if trainer.global_step == self._step:  # inside gradient accumulation: no step boundary yet
            return
        self._step = trainer.global_step
        stop = self.requested
        if trainer.world_size > 1:
            stop = trainer.strategy.reduce_boolean_decision(stop, all=False)
        if stop:
            trainer.save_checkpoint(self.path)
            raise Preempted(f"stopped at step {trainer.global_step} on signal {signal.Signals(self.signum).name}; "
                            f"checkpoint {self.path}")

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if self._previous is not None:
            signal.signal(self.signum, self._previous)
            self._previous = None

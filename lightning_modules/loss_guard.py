"""A training loss that stops being a number ends the run, at that step, as a one-line error.

Otherwise NaN spreads through the weights and the run FINISHes with a chance score. The first bad step is
recorded on the device and read every `read_every` micro-batches and before every checkpoint and evaluation,
so the host does not wait at every step; nothing after a bad step is kept. Under DDP every rank stops.
"""

from __future__ import annotations

import math

import pytorch_lightning as pl
import torch

from bioablate_core.errors import BioablateError


class NonFiniteLoss(BioablateError):
    """The training loss became NaN or infinite."""

    def __init__(self, value: float, step: int, epoch: int | None, hint: str):
        self.value, self.step, self.epoch = value, step, epoch
        where = f"step {step}" if epoch is None else f"step {step} (epoch {epoch})"
        super().__init__(f"the training loss became {value} at {where}; the run is FAILED "
                         f"and keeps its checkpoints from before that step. {hint}")


class StopOnNonFiniteLoss(pl.Callback):
    """Raise `NonFiniteLoss` (with `hint`: what to change) for the first step whose loss is not finite."""

    def __init__(self, hint: str):
        self.hint = hint
        self._bad_step: torch.Tensor | None = None  # on the device: the first bad step (-1: none yet)
        self._bad_loss: torch.Tensor | None = None  # and its loss
        self._epochs: dict[int, int | None] = {}  # step -> epoch, for the steps not read yet
        self._unread = 0

    def on_before_backward(self, trainer: pl.Trainer, pl_module: pl.LightningModule, loss: torch.Tensor) -> None:
        loss = loss.detach().float()
        if self._bad_step is None:
            self._bad_step = torch.full((), -1, dtype=torch.long, device=loss.device)
            self._bad_loss = torch.zeros((), device=loss.device)
        first = ~torch.isfinite(loss).all() & (self._bad_step < 0)
        self._bad_step = torch.where(first, trainer.global_step, self._bad_step)
        self._bad_loss = torch.where(first, loss.sum(), self._bad_loss)
        # pretraining's epochs are checkpoint intervals: the step alone is named
        counts_epochs = getattr(pl_module, "counts_epochs", True)
        self._epochs[trainer.global_step] = trainer.current_epoch if counts_epochs else None
        self._unread += 1
        if self._unread >= getattr(pl_module, "read_every", 1):
            self.check(trainer)

    def check(self, trainer: pl.Trainer) -> None:
        """Read the device's record (the host waits for the device here) and raise if a step was bad."""
        if self._bad_step is None or not self._unread:
            return
        step = int(self._bad_step)
        self._unread = 0
        if trainer.strategy.reduce_boolean_decision(step >= 0, all=False):  # any rank: every rank stops here
            value = float(self._bad_loss) if step >= 0 else math.nan
            epoch = self._epochs.get(step)  # None: another rank's bad step (this rank has none)
            raise NonFiniteLoss(value, step if step >= 0 else trainer.global_step, epoch, self.hint)
        self._epochs.clear()

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args) -> None:
        if trainer.is_last_batch:
            self.check(trainer)

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.check(trainer)

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict) -> None:
        self.check(trainer)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.check(trainer)

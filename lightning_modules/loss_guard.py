"""A training loss that stops being a number ends the run, at that step, as a one-line error.

A NaN or infinite loss (a learning rate that makes training diverge, a NaN class weight, a corrupt input)
turns every weight it touches into NaN, and training goes on: the run would FINISH and log a score of
chance as a result. `StopOnNonFiniteLoss` checks the loss before its backward pass, so the NaN gradients
never reach the weights, and raises `NonFiniteLoss` naming the step and what to change: the tracked run
ends FAILED (tag `error`) with the checkpoints written before that step kept (ablations/run/lifecycle.py).
Under DDP a loss that is not finite on any rank stops every rank at the same step.
"""

from __future__ import annotations

import math

import pytorch_lightning as pl
import torch

from bioablate_core.errors import BioablateError


class NonFiniteLoss(BioablateError):
    """The training loss became NaN or infinite."""

    def __init__(self, value: float, step: int, epoch: int, hint: str):
        self.value, self.step, self.epoch = value, step, epoch
        super().__init__(f"the training loss became {value} at step {step} (epoch {epoch}); the run is FAILED "
                         f"and keeps its checkpoints from before that step. {hint}")


class StopOnNonFiniteLoss(pl.Callback):
    """Raise `NonFiniteLoss` (with `hint`: what to change) at the first step whose loss is not finite."""

    def __init__(self, hint: str):
        self.hint = hint

    def on_before_backward(self, trainer: pl.Trainer, pl_module: pl.LightningModule, loss: torch.Tensor) -> None:
        local = not bool(torch.isfinite(loss.detach()).all())
        if trainer.strategy.reduce_boolean_decision(local, all=False):  # any rank: every rank stops here
            value = float(loss.detach()) if local else math.nan
            raise NonFiniteLoss(value, trainer.global_step, trainer.current_epoch, self.hint)

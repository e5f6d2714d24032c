"""The Lightning callback that times a run's loops into its timing profile (lightning_modules/timing.py, which
imports no Lightning: the tracking code that planning uses times its store calls with it)."""

from __future__ import annotations

import pytorch_lightning as pl

from lightning_modules.timing import enter_part, leave_part


class LoopTimer(pl.Callback):
    """Times Lightning's loops from their hooks: the training loop (`train_steps`: from the first epoch's
    start to the end of training, dataloading and optimizer steps included) and dev evaluation inside it
    (`dev_eval`, every epoch). Setting the Trainer up and tearing it down is `other`."""

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        enter_part("train_steps")

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        leave_part("train_steps")

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        enter_part("dev_eval")

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        leave_part("dev_eval")

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        leave_part("dev_eval")
        leave_part("train_steps")

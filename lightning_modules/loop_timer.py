"""The Lightning callback that times a run's loops into its profile (timing.py stays free of Lightning)."""

from __future__ import annotations

import pytorch_lightning as pl

from lightning_modules.timing import enter_part, leave_part


class LoopTimer(pl.Callback):
    """Times the training loop (`train_steps`) and the dev evaluation inside it (`dev_eval`)."""

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

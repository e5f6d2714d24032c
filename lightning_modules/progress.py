"""The pretraining progress bar: optimizer steps out of `max_steps`, the loss and tokens/s.

Pretraining runs as many short epochs (one per checkpoint interval, with `max_epochs=-1`), so Lightning's
default bar restarts every epoch, reads `Epoch 2/-2` and shows the logger's `v_num`; this one counts the
whole run, resumed runs included, and shows only what the module puts on the bar.
"""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import TQDMProgressBar


class StepProgressBar(TQDMProgressBar):
    """One bar for the whole run: `pretrain: 40/1000 steps [...] loss=6.2, mask_rate=0.15, tokens/s=8312`."""

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        super().on_train_start(trainer, pl_module)
        bar = self.train_progress_bar
        bar.reset(total=trainer.max_steps)
        bar.initial = bar.n = trainer.global_step  # a resumed run starts where it stopped
        bar.unit = " steps"
        bar.set_description("pretrain")

    def on_train_epoch_start(self, trainer: pl.Trainer, *_: Any) -> None:
        """Epochs are checkpoint intervals here: the bar goes on."""

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        bar, step = self.train_progress_bar, trainer.global_step
        if bar is not None and not bar.disable and self._should_update(step, bar.total):
            bar.n = step
            bar.set_postfix(self.get_metrics(trainer, pl_module))  # refreshes the bar

    def get_metrics(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Any]:
        shown = {}
        for name, value in super().get_metrics(trainer, pl_module).items():
            if name == "v_num":  # the logger's version: says nothing about the run
                continue
            name = name.removeprefix("train/")
            shown["tokens/s" if name == "tokens_per_s" else name] = (round(value) if name == "tokens_per_s"
                                                                     else value)
        return shown

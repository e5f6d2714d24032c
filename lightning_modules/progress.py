"""Progress as a run trains: the pretraining progress bar (a terminal), and progress lines (a log file).

Pretraining's epochs are checkpoint intervals, so Lightning's bar would restart every one; `StepProgressBar`
counts the whole run. `ProgressLines` logs a line per epoch, for output without a terminal.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Optional

import pytorch_lightning as pl
from pytorch_lightning.callbacks import TQDMProgressBar

REFRESH_S = 0.25  # the least time between two redraws: each reads the logged metrics back from the device


class StepProgressBar(TQDMProgressBar):
    """One bar for the whole run, `pretrain: 40/1000 steps [...] loss=6.2`, redrawn at most every REFRESH_S."""

    _drawn = 0.0

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
        bar, step, now = self.train_progress_bar, trainer.global_step, time.monotonic()
        if bar is not None and not bar.disable and (now - self._drawn >= REFRESH_S or step == bar.total):
            self._drawn = now
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


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60:02d} s" if seconds < 3600 \
        else f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class ProgressLines(pl.Callback):
    """One line per epoch or checkpoint interval, rank 0 only:

        [ 3/9] finetune minilm/gad/linear/s1: epoch 1/2, train/loss_epoch 0.58, dev/score 0.61; 41 s

    `label` names the run in the plan; `started` (a `time.time()`), when the whole invocation started, adds
    "(experiment 3 min 10 s)"."""

    SHOWN = ("train/loss_epoch", "train/loss", "dev/score")  # the first of the two losses logged

    def __init__(self, label: str, started: Optional[float] = None, logger: str = "bioablate"):
        self.label, self.started, self.logger = label, started, logging.getLogger(logger)
        self._run_start = time.time()

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._run_start = time.time()

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        if trainer.max_epochs == -1:  # pretraining: an epoch is a checkpoint interval
            where = f"step {trainer.global_step}/{trainer.max_steps}"
        else:
            where = f"epoch {trainer.current_epoch + 1}/{trainer.max_epochs}"
        metrics = trainer.callback_metrics
        shown = [name for name in self.SHOWN if name in metrics]
        if "train/loss_epoch" in shown and "train/loss" in shown:
            shown.remove("train/loss")
        values = "".join(f", {name} {float(metrics[name]):.4g}" for name in shown)
        now = time.time()
        total = f" (experiment {_duration(now - self.started)})" if self.started is not None else ""
        self.logger.info("%s: %s%s; %s%s", self.label, where, values, _duration(now - self._run_start), total)

"""The fine-tuning step as a real run takes it (ablations.run.finetune: the module, Lightning's loop, the
run's callbacks and logger): no host-device synchronization inside a step, for a token task (NER) and a
sequence classification task (relation extraction)."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytorch_lightning as pl
from mlflow.tracking import MlflowClient

from ablations.config import build_config
from ablations.run.finetune import run_finetune
from benchmarks.step_ops import OpCount, OpCounter


class StepOps(pl.Callback):
    """Counts the operators of training step `step`: from its batch's start to the next batch's start, so
    the forward, loss, backward, optimizer and scheduler steps, every callback's and the module's batch-end
    hooks and Lightning's per-step logging are all inside. With `trainer.num_workers=1` the next batch is
    assembled in a worker process, outside the count."""

    def __init__(self, step: int):
        self.step, self.counter, self.count = step, None, None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self.counter is not None:
            self.counter.__exit__(None, None, None)
            self.count, self.counter = self.counter.count, None
        if batch_idx == self.step:
            self.counter = OpCounter()
            self.counter.__enter__()


def one_step(task: str, data_dir: Path, work_dir: Path) -> tuple[OpCount, int]:
    """The operators of the third step of a micro run (4 steps of 16 examples; the losses are read after
    the 2nd and the 4th, so the step counted follows a read and the progress bar's update), and how many
    steps the run logged a loss for."""
    cfg = build_config("micro", ["finetune.max_train_examples=64", "finetune.epochs=1", "trainer.num_workers=1",
                                 "trainer.log_every_n_steps=2", "trainer.progress_bar=true"],
                       task=task, data_dir=str(data_dir), work_dir=str(work_dir))
    counter = StepOps(step=2)
    result = run_finetune(cfg, callbacks=[counter])
    logged = MlflowClient(result.tracking_uri).get_metric_history(result.run_id, "train/loss")
    return counter.count, len(logged)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["bc5-chem", "chemprot"])  # the token kind; the classification kind
def test_a_training_step_never_makes_the_host_wait_for_the_device(task, data_dir, tmp_path):
    count, logged_steps = one_step(task, data_dir, tmp_path)
    assert count.ops > 100  # the step was counted (forward, backward, optimizer)
    assert count.syncs == 0, count.sync_ops
    assert logged_steps == 4  # and every step's loss still reaches the run, read at once

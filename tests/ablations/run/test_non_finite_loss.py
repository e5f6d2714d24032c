"""A fine-tuning run whose training loss stops being a number (lightning_modules/loss_guard.py): it ends
FAILED at that step with one line and a hint, its checkpoint from before the step kept and finite, and
the rerun with the value fixed is a new fingerprint that trains afresh and finishes. A pretraining run's
line names the step alone, the same when the rerun resumes from the checkpoint."""

from __future__ import annotations

import re

import pytest
import torch
from mlflow.tracking import MlflowClient

from tests.cli import bioablate_in_process

# One optimizer step per epoch: step 0's loss comes from the initial weights (finite), so the run has
# finished epoch 0 (and written last.ckpt) before a learning rate of 1e4 makes the loss NaN.
TINY = ["finetune.max_train_examples=8", "finetune.batch_size=8", "finetune.max_eval_examples=8",
        "finetune.max_length=32", "finetune.epochs=6", "trainer.progress_bar=false"]


def runs(work_dir):
    client = MlflowClient(f"sqlite:///{work_dir / 'mlruns.db'}")
    return client, client.search_runs([client.get_experiment_by_name("finetune").experiment_id])


@pytest.mark.slow
def test_a_nan_loss_fails_the_run_at_its_step_keeps_the_checkpoint_and_the_fixed_rerun_is_new(tmp_path, data_dir):
    args = ["finetune", "--task", "gad", "--data-dir", str(data_dir), "--work-dir", str(tmp_path), *TINY]
    diverged = bioablate_in_process(*args, "finetune.lr=1e4", cwd=tmp_path)
    [line] = diverged.stderr.strip().splitlines()[-1:]
    assert diverged.returncode == 2 and "Traceback" not in diverged.stderr, diverged.stderr
    step = int(re.fullmatch(r"bioablate: error: the training loss became (nan|inf|-inf) at step (\d+) \(epoch \d+\); "
                            r"the run is FAILED and keeps its checkpoints from before that step\. Lower the learning "
                            r"rate .*", line).group(2))
    client, [failed] = runs(tmp_path)
    assert failed.info.status == "FAILED" and f"at step {step} " in failed.data.tags["error"]
    last = tmp_path / "runs" / failed.data.tags["fingerprint"] / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(last, weights_only=True)
    assert 1 <= checkpoint["global_step"] <= step  # written before the bad step, never after it
    assert all(torch.isfinite(w).all() for w in checkpoint["state_dict"].values())

    fixed = bioablate_in_process(*args, "finetune.lr=5e-5", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    client, found = runs(tmp_path)
    [finished] = [r for r in found if r.info.run_id != failed.info.run_id]
    assert finished.info.status == "FINISHED" and "continues" not in finished.data.tags
    assert finished.data.tags["fingerprint"] != failed.data.tags["fingerprint"]
    assert client.get_run(failed.info.run_id).info.status == "FAILED" and last.exists()  # left for a look


@pytest.mark.slow
def test_a_pretraining_nan_is_the_same_line_straight_and_resumed(tmp_path, data_dir):
    """A pretraining run's Lightning epochs are checkpoint intervals (a resumed run counts them again from its
    checkpoint), so its line names the step alone: the rerun, resumed from the FAILED run's checkpoint,
    diverges at the same step and says so in the same words."""
    args = ["pretrain", "--data-dir", str(data_dir), "--work-dir", str(tmp_path), "trainer.progress_bar=false",
            "pretrain.batch_size=8", "pretrain.max_steps=6", "pretrain.checkpoint_every=1", "pretrain.max_words=4000",
            "pretrain.vocab=pubmedbert-uncased", "pretrain.warmup_ratio=0", "pretrain.lr=1e4"]
    straight = bioablate_in_process(*args, cwd=tmp_path)
    resumed = bioablate_in_process(*args, cwd=tmp_path)
    lines = [done.stderr.strip().splitlines()[-1] for done in (straight, resumed)]
    assert straight.returncode == resumed.returncode == 2 and "Traceback" not in straight.stderr + resumed.stderr
    assert re.fullmatch(r"bioablate: error: the training loss became (nan|inf|-inf) at step [1-9]\d*; the run is "
                        r"FAILED .*", lines[0]), lines[0]
    assert lines[1] == lines[0]
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlruns.db'}")
    [run] = client.search_runs([client.get_experiment_by_name("pretrain").experiment_id])  # taken over, not anew
    assert run.info.status == "FAILED"
    step = int(re.search(r"at step (\d+);", lines[0]).group(1))
    last = tmp_path / "runs" / run.data.tags["fingerprint"] / "checkpoints" / "last.ckpt"
    assert 1 <= torch.load(last, weights_only=True)["global_step"] <= step  # what the rerun resumed from

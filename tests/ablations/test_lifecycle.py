"""The tracked-run lifecycle (ablations/lifecycle.py) against a real MLflow store: reuse, resume into the
same run, force, checkpoint clean-up, and DDP workers that never touch the store."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from ablations.config import build_config
from ablations.finetune import identify, run_finetune
from ablations.lifecycle import TrackedRun

FINGERPRINT = "0123456789abcdef"


def config(work_dir: Path, keep_checkpoints: bool = False):
    return OmegaConf.create({"work_dir": str(work_dir), "tracking_uri": None, "experiment_name": "lifecycle",
                             "keep_checkpoints": keep_checkpoints})


@pytest.fixture(autouse=True)
def rank_zero(monkeypatch):
    for name in ("MLFLOW_TRACKING_URI", "LOCAL_RANK", "NODE_RANK"):
        monkeypatch.delenv(name, raising=False)


def start(work_dir: Path, force: bool = False, keep_checkpoints: bool = False) -> TrackedRun:
    run = TrackedRun.open(config(work_dir, keep_checkpoints), FINGERPRINT, force)
    assert run.finished() is None
    run.start("a-run", {"kind": "test"}, {"lr": 0.1})
    return run


def train(run: TrackedRun, crash: bool = False) -> None:
    """What a caller's body does: write the checkpoint it resumes from, then finish or crash."""
    with run.tracked():
        run.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        run.last_checkpoint.write_text("weights")
        run.log_metrics({"loss": 1.0})
        if crash:
            raise RuntimeError("simulated crash")


def test_a_failed_run_is_resumed_into_the_same_run_then_reused(tmp_path):
    first = start(tmp_path)
    assert not first.resuming and first.resume_from is None
    with pytest.raises(RuntimeError, match="simulated crash"):
        train(first, crash=True)
    client = MlflowClient(first.tracking_uri)
    failed = client.get_run(first.run_id)
    assert failed.info.status == "FAILED" and "simulated crash" in failed.data.tags["error"]
    assert failed.data.tags["fingerprint"] == FINGERPRINT and failed.data.tags["git_commit"]
    assert failed.data.tags["kind"] == "test" and failed.data.params["lr"] == "0.1"
    assert first.last_checkpoint.exists()  # kept for the resume

    second = start(tmp_path)
    assert second.run_id == first.run_id and second.resuming
    assert second.resume_from == second.last_checkpoint
    train(second)
    assert client.get_run(second.run_id).info.status == "FINISHED"
    assert not second.checkpoint_dir.exists()  # a finished run cleans up its checkpoints

    third = TrackedRun.open(config(tmp_path), FINGERPRINT)
    assert third.finished().info.run_id == first.run_id
    assert third.finished(usable=lambda run: False) is None  # e.g. its exported model is gone


def test_force_creates_a_new_run_without_the_old_checkpoints(tmp_path):
    first = start(tmp_path, keep_checkpoints=True)
    train(first)
    assert first.last_checkpoint.exists()  # keep_checkpoints

    forced = TrackedRun.open(config(tmp_path), FINGERPRINT, force=True)
    assert forced.finished() is None
    forced.start("a-run", {}, {})
    assert forced.run_id != first.run_id and not forced.resuming
    assert forced.resume_from is None and not forced.checkpoint_dir.exists()
    runs = MlflowClient(first.tracking_uri).search_runs(
        [forced.tracker.experiment_id], f"tags.fingerprint = '{FINGERPRINT}'")
    assert len(runs) == 2


def test_a_stop_exception_ends_the_run_killed(tmp_path):
    class Pruned(Exception):
        pass

    run = start(tmp_path)
    with pytest.raises(Pruned):
        with run.tracked(stop_exceptions=(Pruned,)):
            raise Pruned()
    finished = MlflowClient(run.tracking_uri).get_run(run.run_id)
    assert finished.info.status == "KILLED" and finished.data.tags["stopped"] == "Pruned"


def test_a_ddp_worker_never_touches_the_tracking_store(tmp_path, monkeypatch):
    checkpoint = tmp_path / "runs" / FINGERPRINT / "checkpoints" / "last.ckpt"
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_text("weights")  # rank 0 is resuming from it
    monkeypatch.setenv("LOCAL_RANK", "1")
    worker = TrackedRun.open(config(tmp_path), FINGERPRINT)
    assert worker.is_worker and worker.finished() is None
    worker.start("a-run", {}, {})
    assert worker.run_id is None and worker.resume_from == checkpoint
    assert worker.lightning_logger() is False
    with worker.tracked():
        worker.set_tag("x", "y")
        worker.log_metrics({"loss": 1.0})
    assert not (tmp_path / "mlruns.db").exists()
    assert checkpoint.exists()  # clean-up is rank 0's


@pytest.mark.slow
def test_finetune_force_reruns_a_finished_run_as_a_new_one(data_dir, tmp_path):
    cfg = build_config("micro", ["finetune.max_train_examples=16", "finetune.max_eval_examples=16",
                                 "finetune.epochs=1", "finetune.max_length=32", "trainer.progress_bar=false"],
                       task="biosses", data_dir=str(data_dir), work_dir=str(tmp_path))
    first = run_finetune(cfg)
    again = run_finetune(cfg)
    forced = run_finetune(cfg, force=True)
    assert not first.reused and again.reused and again.run_id == first.run_id
    assert not forced.reused and forced.run_id != first.run_id and forced.fingerprint == first.fingerprint
    client = MlflowClient(first.tracking_uri)
    assert client.get_run(forced.run_id).info.status == "FINISHED"
    assert client.get_run(first.run_id).info.status == "FINISHED"  # the old run stays as it was

    identity = identify(cfg)
    assert identity.fingerprint == identity[3] == first.fingerprint
    assert identity.spec.name == "biosses" and identity.data_dir == identity[1]

"""The tracked-run lifecycle (ablations/run/lifecycle.py) against a real MLflow store: reuse, resume into a
continued run with one point per step, force, checkpoint clean-up, claims and heartbeats, and DDP workers
that never touch the store."""

from __future__ import annotations

import inspect
import json
import os
import signal
import socket
import subprocess
import sys
import time
import types
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf
from sqlalchemy.orm.state_changes import _StateChange

from ablations.config import build_config
from ablations.run import lifecycle
from ablations.run.finetune import identify, run_finetune
from ablations.run.lifecycle import TrackedRun
from bioablate_core import interrupts
from bioablate_core.claims import ClaimHeld
from bioablate_core.interrupts import Interrupted, handling_interrupts

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


def train(run: TrackedRun, crash: bool = False, steps: range = range(1, 5), checkpoint_at: int = 2) -> None:
    """What a caller's body does: log a loss per step, write the checkpoint it resumes from after step
    `checkpoint_at` (as Lightning does: the checkpoint's `global_step` counts the steps taken, one more
    than the last logged step), then finish or crash."""
    with run.tracked():
        run.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        for step in steps:
            run.tracker.log_metrics(run.run_id, {"loss": float(step)}, step=step)
            if step == checkpoint_at:
                torch.save({"global_step": step + 1}, run.last_checkpoint)
        if crash:
            raise RuntimeError("simulated crash")


def test_a_failed_run_continues_from_its_checkpoint_with_one_point_per_step_then_is_reused(tmp_path):
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
    tag_claim(client, first.run_id, "old-host", 1, 0.0)  # a dead holder left on the failed run

    second = start(tmp_path)
    assert second.resuming and second.resume_from == second.last_checkpoint
    train(second, steps=range(3, 7), checkpoint_at=0)  # resumes after the checkpoint's step 2
    continued = client.get_run(second.run_id)
    assert continued.info.status == "FINISHED" and continued.data.tags["continues"] == first.run_id
    assert "error" not in continued.data.tags  # a successful resume carries no error of the old attempt
    assert "bioablate.claim" not in continued.data.tags  # nor its holder
    assert continued.data.tags["kind"] == "test" and continued.data.params["lr"] == "0.1"
    history = [(m.step, m.value) for m in client.get_metric_history(second.run_id, "loss")]
    assert sorted(history) == [(s, float(s)) for s in range(1, 7)]  # the killed attempt's 3, 4 are gone
    assert client.get_run(first.run_id).info.lifecycle_stage == "deleted"
    assert not second.checkpoint_dir.exists()  # a finished run cleans up its checkpoints

    third = TrackedRun.open(config(tmp_path), FINGERPRINT)
    assert third.finished().info.run_id == second.run_id
    assert third.finished(usable=lambda run: False) is None  # e.g. its exported model is gone


def test_an_unfinished_run_without_a_checkpoint_starts_over_in_a_new_run(tmp_path):
    first = start(tmp_path)
    with pytest.raises(RuntimeError):
        train(first, crash=True, checkpoint_at=0)
    second = start(tmp_path)
    assert not second.resuming and second.run_id != first.run_id
    client = MlflowClient(first.tracking_uri)
    assert client.get_run(first.run_id).info.lifecycle_stage == "deleted"
    assert client.get_metric_history(second.run_id, "loss") == []


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
        worker.set_tags({"x": "y"})
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
    assert identity.fingerprint == first.fingerprint and identity.spec.name == "biosses"
    # the planner's fingerprints, handed to the run, find the same run without computing them again
    known = run_finetune(cfg, fingerprints=(identity.fingerprint, identity.data_fingerprint))
    assert known.reused and known.run_id == forced.run_id


def test_a_live_claim_makes_another_process_skip_and_its_heartbeat_keeps_beating(tmp_path, monkeypatch):
    monkeypatch.setattr(lifecycle, "HEARTBEAT_S", 0.2)
    holder = TrackedRun.open(config(tmp_path), FINGERPRINT)
    client = MlflowClient(holder.tracking_uri)
    with holder.claimed():
        holder.start("a-run", {}, {})
        tags = client.get_run(holder.run_id).data.tags
        # one bookkeeping tag, not five beside the run's own
        assert not [key for key in tags if key.startswith("claim.")]
        claimed = json.loads(tags["bioablate.claim"])
        assert claimed["host"] == socket.gethostname() and claimed["pid"] == os.getpid()
        assert claimed["lock"] == str(holder.claim_file)
        time.sleep(1.0)
        beat = json.loads(client.get_run(holder.run_id).data.tags["bioablate.claim"])
        assert beat["heartbeat"] > claimed["heartbeat"] and beat["since"] == claimed["since"]

        other = TrackedRun.open(config(tmp_path), FINGERPRINT)  # another opener of the same fingerprint
        with pytest.raises(ClaimHeld, match=f"run {FINGERPRINT} is held by {socket.gethostname()}:{os.getpid()}"):
            with other.claimed(wait=False):
                pass


def tag_claim(client: MlflowClient, run_id: str, host: str, pid: int, heartbeat: float) -> None:
    """The claim as this version writes it: one JSON tag."""
    client.set_tag(run_id, "bioablate.claim", json.dumps({"host": host, "pid": pid, "since": 0,
                                                         "lock": "/elsewhere/claim.lock", "heartbeat": heartbeat}))


def test_a_run_claimed_through_another_work_dir_is_taken_over_only_once_its_holder_is_dead(tmp_path):
    """A store shared by machines that do not share the work directory: the lock file cannot tell, the
    heartbeat (another host) or the process table (this host) does, read from the claim tag."""
    first = start(tmp_path)
    client = MlflowClient(first.tracking_uri)
    client.update_run(first.run_id, status="RUNNING")

    tag_claim(client, first.run_id, "another-host", 1234, time.time())  # beating
    with pytest.raises(ClaimHeld, match="held by another-host:1234"):
        with TrackedRun.open(config(tmp_path), FINGERPRINT).claimed(wait=False):
            pass
    tag_claim(client, first.run_id, socket.gethostname(), os.getpid(), time.time())  # alive here
    with pytest.raises(ClaimHeld):
        with TrackedRun.open(config(tmp_path), FINGERPRINT).claimed(wait=False):
            pass

    dead = subprocess.Popen(["true"])
    dead.wait()
    tag_claim(client, first.run_id, socket.gethostname(), dead.pid, time.time())  # its process is gone
    with TrackedRun.open(config(tmp_path), FINGERPRINT).claimed(wait=False):
        pass
    tag_claim(client, first.run_id, "another-host", 1234, time.time() - lifecycle.STALE_AFTER_S - 1)  # stale
    taker = TrackedRun.open(config(tmp_path), FINGERPRINT)
    with taker.claimed(wait=False):
        taker.start("a-run", {}, {})
    assert taker.run_id != first.run_id
    assert not [key for key in client.get_run(taker.run_id).data.tags if key.startswith("claim.")]




def state_change_in_progress() -> tuple:
    """SQLAlchemy's session-state guard (`state_changes._StateChange.declare_states`, around commit,
    flush, close, ...) has marked a change in progress and not yet entered the `try` that unmarks it:
    (its code, the line). A signal raised here left the session unable to close (MLflow then raised
    "Method 'close()' can't be called here; method 'commit()' is already in progress")."""
    code = next(c for c in _StateChange.declare_states.__code__.co_consts
                if isinstance(c, types.CodeType) and c.co_name == "_go")
    lines, first = inspect.getsourcelines(code)
    marked = next(i for i, text in enumerate(lines) if "_next_state = _StateChangeStates.CHANGE_IN_PROGRESS" in text)
    return code, first + marked + 1


@contextmanager
def sigterm_at(code, event: str, inside: str, line: int | None = None):
    """Send this process SIGTERM the first time a frame running `code`, within a call of a function named
    `inside`, has the trace `event` ("return": it is done, its caller not resumed yet; "line": it is about
    to run `line`): the handler runs there, as for a signal arriving at that instant."""
    previous = sys.gettrace()

    def called_inside(frame) -> bool:
        caller = frame.f_back
        while caller is not None and caller.f_code.co_name != inside:
            caller = caller.f_back
        return caller is not None

    def fire(frame, this_event, arg):
        if this_event != event or (line is not None and frame.f_lineno != line):
            return fire
        sys.settrace(previous)
        frame.f_trace = None
        os.kill(os.getpid(), signal.SIGTERM)
        return None

    def on_call(frame, this_event, arg):
        if frame.f_code is not code or not called_inside(frame):
            return None
        frame.f_trace_lines = line is not None
        return fire

    sys.settrace(on_call)
    try:
        yield
    finally:
        sys.settrace(previous)


@pytest.fixture(scope="module")
def one_store(tmp_path_factory) -> Path:
    """A work directory whose store the signal tests share (each with its own fingerprint): creating an
    SQLite store takes seconds."""
    return tmp_path_factory.mktemp("signals")


@pytest.mark.parametrize("code, event, inside", [
    (SqlAlchemyStore.create_run.__code__, "return", "create"),  # the run exists, its id not yet with us
    (TrackedRun.start.__code__, "return", "_train"),  # between `start` and `tracked`
    (None, "line", "log_batch"),  # a store write cut in two: its params
    (None, "line", "set_tags"),  # its claim tags (one write: Tracker.set_tags)
    (None, "line", "update_run"),  # `tracked` marking it RUNNING
], ids=["run-created", "after-start", "params-write", "claim-tag-write", "marking-running-write"])
def test_a_sigterm_at_any_moment_after_the_run_exists_ends_it_killed(one_store, code, event, inside):
    """Before issue 18's fix each of these left the run RUNNING (or FAILED), with SQLAlchemy's error in
    place of the signal where a write was cut in two."""
    line = None
    if code is None:
        code, line = state_change_in_progress()
    fingerprint = f"{FINGERPRINT}-{inside}-{event}"
    run = TrackedRun.open(config(one_store), fingerprint)
    trained = []

    def _train():  # what finetune / pretrain do, holding the claim
        run.start("a-run", {"kind": "test"}, {"lr": 0.1})
        with run.tracked():
            trained.append(True)

    with pytest.raises(Interrupted):
        with handling_interrupts(), sigterm_at(code, event, inside, line):
            with run.claimed():
                _train()
    client = MlflowClient(run.tracking_uri)
    runs = client.search_runs([run.tracker.experiment_id], f"tags.fingerprint = '{fingerprint}'")
    assert [(r.info.status, r.data.tags.get("stopped")) for r in runs] == [("KILLED", "SIGTERM")]
    assert not trained


def test_an_error_raised_while_a_signal_is_pending_ends_the_run_killed_as_the_signal(one_store):
    """E.g. a library's store call that the signal cut in two: its error is the signal's doing."""
    run = TrackedRun.open(config(one_store), f"{FINGERPRINT}-pending")
    with pytest.raises(Interrupted) as raised:
        with handling_interrupts(), run.claimed():
            run.start("a-run", {}, {})
            with run.tracked(), interrupts.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                sum(range(1000))  # the handler ran and deferred the signal
                raise RuntimeError("This transaction is closed")
    assert isinstance(raised.value.__cause__, RuntimeError)
    ended = MlflowClient(run.tracking_uri).get_run(run.run_id)
    assert ended.info.status == "KILLED" and ended.data.tags["stopped"] == "SIGTERM"

"""Real `bioablate finetune` processes: killed (SIGKILL) and resumed to bitwise the uninterrupted result
with one metric point per step; interrupted (SIGINT) to exit 130 and a KILLED run; two identical
commands on one store computing one run (the second waits, or with --no-wait says who holds it). A command
that is neither signalled nor racing another (a rerun, a --no-wait refusal) runs in the test's process."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from ablations.cli import main
from ablations.config import build_config
from ablations.run.finetune_identity import identify
from ablations.run.tracking import store_creation_lock
from bioablate_core.claims import claim
from tests.experiment_runs import single_threaded

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
# 4 training batches per epoch, 3 epochs, dropout on: the kill lands between epochs and the resumed run
# must reproduce the data order and the dropout masks of the uninterrupted one.
FINETUNE = ["finetune", "--task", "biosses", "finetune.max_train_examples=64", "finetune.max_eval_examples=16",
            "finetune.epochs=3", "finetune.max_length=32", "finetune.dropout=0.1", "trainer.progress_bar=false",
            "trainer.log_every_n_steps=1", "keep_checkpoints=true"]


def bioablate(work_dir: Path, *args: str, threads: int | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ablations.cli", *args, "--work-dir", str(work_dir)],
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT),
                                 **({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
                                    if threads else {})})


def finish(process: subprocess.Popen, timeout: float = 300) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def wait_for(condition, timeout: float = 240, what: str = "") -> None:
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def runs(work_dir: Path):
    uri = f"sqlite:///{work_dir}/mlruns.db"
    with store_creation_lock(uri):  # the run under test may be creating the store's tables right now
        client = MlflowClient(uri)
        return client, client.search_runs([e.experiment_id for e in client.search_experiments()])


def last_checkpoints(work_dir: Path) -> list[Path]:
    return list(work_dir.glob("runs/*/checkpoints/last.ckpt"))


def history(client: MlflowClient, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_a_killed_finetune_resumes_to_the_uninterrupted_weights_and_scores(tmp_path, data_dir, capsys):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    # the uninterrupted run in this process and the killed one in a process of its own, on two threads
    # (bitwise equal sums need the same split of the work); the rerun starts on one and resumes on the two
    # its run started on (the tag torch_threads)
    with single_threaded():
        torch.set_num_threads(2)
        assert main(["-v", *FINETUNE, "--work-dir", str(whole)]) == 0, capsys.readouterr().err[-3000:]

    victim = bioablate(killed, *FINETUNE, threads=2)
    wait_for(lambda: last_checkpoints(killed), what="the first epoch's checkpoint")
    victim.send_signal(signal.SIGKILL)
    assert finish(victim)[0] == -signal.SIGKILL  # killed mid-run, not finished
    client, before = runs(killed)
    assert [r.info.status for r in before] == ["RUNNING"]  # SIGKILL: nobody marked it
    assert before[0].data.tags["torch_threads"] == "2"
    with single_threaded():
        assert main(["-v", *FINETUNE, "--work-dir", str(killed)]) == 0, capsys.readouterr().err[-3000:]
        assert torch.get_num_threads() == 2  # the resume computed on its run's count

    whole_client, [reference] = runs(whole)
    client, [resumed] = runs(killed)  # the killed attempt was deleted: one run
    assert resumed.data.tags["fingerprint"] == reference.data.tags["fingerprint"]
    assert resumed.data.tags["continues"] == before[0].info.run_id and resumed.info.status == "FINISHED"
    # exactly one point per step, with the uninterrupted run's values
    for key in ("dev/score", "train/loss"):
        points = history(client, resumed.info.run_id, key)
        assert len({step for step, _ in points}) == len(points), key
        assert points == history(whole_client, reference.info.run_id, key), key
    assert len(history(client, resumed.info.run_id, "dev/score")) == 3  # one per epoch
    for key in ("best_dev/score", "test/score"):
        assert resumed.data.metrics[key] == reference.data.metrics[key], key
    # the cost counts the epoch before the kill too (the checkpoint carries the counts)
    for key in ("system/compute/train_tokens", "system/compute/eval_tokens", "system/compute/flops"):
        assert resumed.data.metrics[key] == reference.data.metrics[key] > 0, key
    # bitwise the same final weights (keep_checkpoints=true keeps last.ckpt)
    [mine], [theirs] = last_checkpoints(killed), last_checkpoints(whole)
    mine, theirs = (torch.load(p, map_location="cpu", weights_only=False)["state_dict"] for p in (mine, theirs))
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)


def test_sigint_ends_the_run_killed_with_exit_130_and_a_rerun_finishes_it_clean(tmp_path, data_dir, capsys):
    victim = bioablate(tmp_path, *FINETUNE)
    wait_for(lambda: last_checkpoints(tmp_path), what="the first epoch's checkpoint")
    victim.send_signal(signal.SIGINT)
    code, _, err = finish(victim)
    assert code == 130, err
    assert "interrupted (SIGINT)" in err and "Traceback" not in err
    client, [stopped] = runs(tmp_path)
    assert stopped.info.status == "KILLED" and stopped.data.tags["stopped"] == "SIGINT"
    assert "error" not in stopped.data.tags

    # the rerun in this process: a process of its own would add only its imports
    assert main(["-v", *FINETUNE, "--work-dir", str(tmp_path)]) == 0, capsys.readouterr().err[-3000:]
    client, [done] = runs(tmp_path)
    assert done.info.status == "FINISHED" and done.data.tags["continues"] == stopped.info.run_id
    assert "stopped" not in done.data.tags and "error" not in done.data.tags
    assert len(history(client, done.info.run_id, "dev/score")) == 3


def test_identical_finetunes_on_one_store_compute_one_run(tmp_path, data_dir, capsys):
    cfg = build_config("micro", FINETUNE[3:], task="biosses", data_dir=str(data_dir), work_dir=str(tmp_path))
    fingerprint = identify(cfg).fingerprint
    with claim(tmp_path / "runs" / fingerprint / "claim.lock") as me:  # as another live process would
        # --no-wait in this process (a claim is a flock on its own open file: a second one conflicts here
        # too), -v to leave the libraries' log levels as they are for the tests after this one
        code = main(["-v", *FINETUNE, "--no-wait", "--work-dir", str(tmp_path)])
        err = capsys.readouterr().err
        assert code == 75 and f"run {fingerprint} is held by {me.host}:{me.pid} since" in err, (code, err)
        waiter = bioablate(tmp_path, *FINETUNE)
        deadline, line = time.time() + 240, ""
        while "waiting for" not in line:
            assert time.time() < deadline and waiter.poll() is None
            line = waiter.stderr.readline()
        assert f"waiting for {fingerprint} held by {me.host}:{me.pid} since" in line
        time.sleep(2)
        assert not runs(tmp_path)[1]  # nothing started while we hold it
    # another identical command, while the waiter trains: in this process (its claim is a flock of its own)
    code = main(["-v", *FINETUNE, "--work-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    results = [finish(waiter), (code, out, err)]
    assert [code for code, _, _ in results] == [0, 0], results
    assert sum("reused finished run" in out for _, out, _ in results) == 1
    client, [run] = runs(tmp_path)  # one MLflow run, one clean history
    assert run.info.status == "FINISHED"
    assert len(history(client, run.info.run_id, "dev/score")) == 3
    reported = {line.split()[-3] for _, out, _ in results for line in out.splitlines() if "fingerprint" in line}
    assert reported == {run.info.run_id}  # both report the same run


def test_a_run_that_failed_after_its_summary_metrics_were_logged_logs_each_once_when_resumed(tmp_path, data_dir,
                                                                                           capsys):
    """The fault lands between the summary metrics (best_dev/*, test/*, logged once at the end) and the
    end of the run: the artifact folder is a file, so storing the predictions fails. The rerun continues
    the FAILED run from its last checkpoint and computes the summary again: one point each, not two."""
    (tmp_path / "mlartifacts").write_text("not a folder")
    assert main([*FINETUNE, "--work-dir", str(tmp_path)]) != 0
    client, [failed] = runs(tmp_path)
    assert failed.info.status == "FAILED" and "Not a directory" in failed.data.tags["error"]
    summary = [k for k in failed.data.metrics if k.startswith(("best_dev/", "test/"))]
    assert "best_dev/score" in summary and "test/score" in summary  # the fault came after them

    (tmp_path / "mlartifacts").unlink()
    assert main([*FINETUNE, "--work-dir", str(tmp_path)]) == 0, capsys.readouterr().err[-3000:]
    client, [resumed] = runs(tmp_path)
    assert resumed.data.tags["continues"] == failed.info.run_id and resumed.info.status == "FINISHED"
    for key in summary:
        assert len(client.get_metric_history(resumed.info.run_id, key)) == 1, key
        assert resumed.data.metrics[key] == failed.data.metrics[key], key
    assert len(history(client, resumed.info.run_id, "dev/score")) == 3  # the per-epoch points, carried over


def test_run_no_wait_leaves_a_held_cell_to_its_holder_and_exits_75(tmp_path, data_dir, capsys):
    """`bioablate run --no-wait` with one of its cells held by another live process: that cell is HELD
    (not FAILED), the others are computed, the parent run FINISHED, and the exit status is 75 as for
    `finetune --no-wait`; the same command once the holder is gone computes the held cell alone."""
    from ablations.experiment import Store, load_experiment, resolve

    experiment = tmp_path / "two.yaml"
    experiment.write_text("name: two\nmodels:\n  random: {name_or_path: random-bert}\ntasks: [biosses, gad]\n"
                          "table: {rows: task, columns: model}\n")
    command = ["-v", "run", str(experiment), "--no-wait", "--work-dir", str(tmp_path / "work")]
    loaded = load_experiment(experiment, data_dir=str(data_dir), work_dir=str(tmp_path / "work"))
    held = next(c for c in resolve(loaded, Store(loaded.store()[1])).cells if c.cell.task == "gad")
    with claim(tmp_path / "work" / "runs" / held.fingerprint / "claim.lock") as me:
        code = main(command)
        out, err = capsys.readouterr()
    assert code == 75, err[-3000:]
    assert f"held     finetune random/gad/s1: run {held.fingerprint} is held by {me.host}:{me.pid}" in out
    client = MlflowClient(loaded.store()[1])
    done = client.search_runs([e.experiment_id for e in client.search_experiments()])
    parent = [r for r in done if r.data.tags.get("kind") == "experiment"]
    assert [p.info.status for p in parent] == ["FINISHED"] and parent[0].data.metrics["runs_held"] == 1
    assert sorted(r.data.tags["task"] for r in done if r.data.tags.get("kind") == "finetune") == ["biosses"]

    assert main(command) == 0
    assert "computed finetune random/gad/s1" in capsys.readouterr().out


def test_a_store_locked_past_its_timeout_is_one_line_and_the_rerun_takes_the_run_over(tmp_path, data_dir, capsys):
    """Another program holds the SQLite store's write lock for longer than MLflow waits (20 s a call):
    the fine-tune stops with one line (was: exit 1 after a 390-line SQLAlchemy traceback), the run is
    left RUNNING with its checkpoint, and the same command afterwards takes it over and finishes it."""
    import sqlite3

    command = [*FINETUNE[:5], "finetune.epochs=6", *FINETUNE[6:]]  # the lock lands after epoch 1 of 6
    MlflowClient(f"sqlite:///{tmp_path}/mlruns.db").search_experiments()  # the store exists before
    victim = bioablate(tmp_path, *command)
    wait_for(lambda: last_checkpoints(tmp_path), what="the first epoch's checkpoint")
    lock = sqlite3.connect(tmp_path / "mlruns.db", isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        code, _, err = finish(victim, timeout=240)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    # one line after the threads line every training command starts with (tests/e2e/test_run_output.py) and
    # the epoch lines a run writes where stderr is no terminal
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("bioablate: torch threads: ")
             and not re.match(r"finetune \S+: epoch \d+/\d+", line)]
    assert code == 1 and len(lines) == 1, err[-3000:]
    assert lines[0].startswith("bioablate: error: the tracking store did not answer ((sqlite3.OperationalError) "
                               "database is locked); a run in progress was left RUNNING"), lines
    client, [left] = runs(tmp_path)
    assert left.info.status == "RUNNING"

    assert main(["-v", *command, "--work-dir", str(tmp_path)]) == 0, capsys.readouterr().err[-3000:]
    client, [done] = runs(tmp_path)
    assert done.info.status == "FINISHED" and done.data.tags["continues"] == left.info.run_id

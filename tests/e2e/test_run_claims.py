"""Real `bioablate run` processes on one store: two at once (one in the test's process) compute each
pretraining stage and each cell exactly once; SIGTERM stops the whole experiment (exit 143, parent and
running cell KILLED); the parent of a SIGKILLed invocation is ended KILLED by the next one (run in the
test's process), which resumes the experiment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ablations.cli import main
from ablations.run.tracking import store_creation_lock

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = """\
name: claims-tiny
description: one pretraining stage and two fine-tuning cells
profile: micro
models:
  tiny:
    label: tiny
    pretrain: {corpus: pubmed, vocab: bert-base-uncased, masking: wwm}
tasks: [biosses, gad]
seeds: 1
table: {title: tiny, rows: task, columns: model}
"""
# no evaluation-PMID filter: finding those PMIDs parses all thirteen datasets (~10 s of CPU in each process
# that pretrains into a fresh work directory), and these tests are about claims, not corpora
SMALL = ["pretrain.max_words=5000", "pretrain.max_steps=4", "pretrain.checkpoint_every=2",
         "pretrain.exclude_eval_pmids=false",
         "finetune.max_train_examples=16", "finetune.max_eval_examples=16", "finetune.max_length=32"]


def run(tmp_path: Path, *extra: str) -> subprocess.Popen:
    experiment = tmp_path / "tiny.yaml"
    experiment.write_text(EXPERIMENT)
    return subprocess.Popen([sys.executable, "-m", "ablations.cli", "run", str(experiment), *SMALL, "--work-dir",
                             str(tmp_path / "work"), *extra], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})


def all_runs(tmp_path: Path):
    uri = "sqlite:///" + str(tmp_path / "work" / "mlruns.db")
    with store_creation_lock(uri):  # the run under test may be creating the store's tables right now
        client = MlflowClient(uri)
        return client.search_runs([e.experiment_id for e in client.search_experiments()])


def test_two_runs_of_one_experiment_compute_each_stage_and_cell_once(tmp_path, data_dir, capsys):
    first = run(tmp_path)
    deadline = time.time() + 600
    while not any(r.data.tags.get("kind") == "experiment" for r in all_runs(tmp_path)):  # it has started
        assert time.time() < deadline and first.poll() is None, first.communicate()
        time.sleep(0.05)
    # the second in this process, while the first computes (the claims are flocks, one per open file:
    # they conflict within a process as between processes)
    code = main(["-v", "run", str(tmp_path / "tiny.yaml"), *SMALL, "--work-dir", str(tmp_path / "work")])
    second = capsys.readouterr()
    results = [first.communicate(timeout=900), (second.out, second.err)]
    assert [first.returncode, code] == [0, 0], [err[-4000:] for _, err in results]
    runs = [r for r in all_runs(tmp_path) if r.data.tags.get("kind") in ("pretrain", "finetune")]
    by_kind = sorted((r.data.tags["kind"], r.data.tags.get("task", "")) for r in runs)
    assert by_kind == [("finetune", "biosses"), ("finetune", "gad"), ("pretrain", "")]  # once each
    assert all(r.info.status == "FINISHED" for r in runs)
    computed = [line for out, _ in results for line in out.splitlines() if " computed " in line]
    assert len(computed) == 3, results  # each stage and cell computed by one of the two
    assert len(list((tmp_path / "work" / "models").iterdir())) == 1


def test_sigterm_stops_the_experiment_and_a_killed_parent_is_ended_by_the_next_run(tmp_path, data_dir):
    victim = run(tmp_path)
    deadline = time.time() + 600
    while not any(r.data.tags.get("kind") == "finetune" for r in all_runs(tmp_path)):
        assert time.time() < deadline and victim.poll() is None
        time.sleep(0.05)
    victim.send_signal(signal.SIGTERM)  # while the first cell trains
    out, err = victim.communicate(timeout=300)
    assert victim.returncode == 143, (out, err)
    assert "interrupted (SIGTERM)" in err and "Traceback" not in err
    runs = {r.data.tags.get("kind"): r for r in all_runs(tmp_path)}
    assert runs["experiment"].info.status == "KILLED"
    cells = [r for r in all_runs(tmp_path) if r.data.tags.get("kind") == "finetune"]
    # the loop stopped: the second cell never started
    assert [c.info.status for c in cells] == ["KILLED"], [(c.info.status, c.data.tags, err[-3000:]) for c in cells]

    victim = run(tmp_path)  # now SIGKILL: nobody can mark its parent
    deadline = time.time() + 600
    while not [r for r in all_runs(tmp_path) if r.data.tags.get("kind") == "experiment"
               and r.info.status == "RUNNING"]:
        assert time.time() < deadline
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    # the next run, in this process (a process of its own would add only its imports)
    assert main(["-v", "run", str(tmp_path / "tiny.yaml"), *SMALL, "--work-dir", str(tmp_path / "work")]) == 0
    parents = sorted((r for r in all_runs(tmp_path) if r.data.tags.get("kind") == "experiment"),
                     key=lambda r: r.info.start_time)
    assert [p.info.status for p in parents] == ["KILLED", "KILLED", "FINISHED"]
    assert parents[1].data.tags["stopped"] == "its process died"
    assert not [p for p in parents if "bioablate.claim" in p.data.tags]  # no host name left on an ended run
    cells = [r for r in all_runs(tmp_path) if r.data.tags.get("kind") == "finetune"]
    assert sorted(c.info.status for c in cells) == ["FINISHED", "FINISHED"]


def children_of(pid: int) -> set[int]:
    """The live processes whose parent is `pid` (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process parents from /proc (Linux)")
def test_the_workers_of_a_sigkilled_run_end_their_runs_killed_and_exit(tmp_path, data_dir):
    """`run --devices 2`: SIGKILL of the invocation while its two workers train. The workers get the
    parent-death signal: each ends its run KILLED and exits; nothing is left behind (the workers, and the
    multiprocessing resource tracker once they are gone)."""
    experiment = tmp_path / "cells.yaml"
    experiment.write_text(EXPERIMENT.replace("  tiny:\n    label: tiny\n    pretrain: {corpus: pubmed, vocab: "
                                             "bert-base-uncased, masking: wwm}\n",
                                             "  random: {name_or_path: random-bert}\n").replace("seeds: 1",
                                                                                                 "seeds: 2"))
    victim = subprocess.Popen([sys.executable, "-m", "ablations.cli", "run", str(experiment), *SMALL,
                               "finetune.epochs=400", "--devices", "2", "--work-dir", str(tmp_path / "work")],
                              cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    # read what the invocation and its workers (who inherit the pipes) write, as a terminal would: a full
    # pipe would block a worker's write, and with it the worker's ending of its run
    output: list[str] = []
    readers = [threading.Thread(target=lambda stream=stream: output.extend(stream), daemon=True)
               for stream in (victim.stdout, victim.stderr)]
    for reader in readers:
        reader.start()
    deadline = time.time() + 300
    while len([r for r in all_runs(tmp_path) if r.data.tags.get("kind") == "finetune"
               and r.info.status == "RUNNING"]) < 2:
        assert time.time() < deadline and victim.poll() is None, "".join(output)[-6000:]
        time.sleep(0.1)
    left = children_of(victim.pid)
    assert len(left) >= 2  # the two workers (and the resource tracker)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    deadline = time.time() + 120
    while any(alive(pid) for pid in left) and time.time() < deadline:
        time.sleep(0.2)
    survivors = [p for p in left if alive(p)]
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    for reader in readers:
        reader.join(timeout=10)
    err = "".join(output)[-6000:]
    assert survivors == [], f"still alive after their parent was killed: {survivors}\n{err}"
    cells = [r for r in all_runs(tmp_path) if r.data.tags.get("kind") == "finetune"]
    assert sorted(c.info.status for c in cells) == ["KILLED", "KILLED"], \
        ([(c.info.status, c.data.tags) for c in cells], err)

"""What `bioablate run` says while it runs with its output in files, and what it leaves for `table` when it is
interrupted (issue 38): a progress line per fine-tuning epoch and per pretraining checkpoint naming the run,
its place in the plan and the time elapsed; no library's INFO chatter (fontTools' PDF subsetting, Lightning,
MLflow); the plan recorded when the run starts, so `table` without the data renders from it after an
interrupt. Real runs in a process of their own (output redirected to files, as `bioablate run X > log`)."""

from __future__ import annotations

import csv
import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli import bioablate_in_process

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TINY_PRETRAIN = "{corpus: pubmed, vocab: pubmedbert-uncased, max_steps: 4, checkpoint_every: 2, max_words: 4000}"
# what the libraries print when they are let through: fontTools while a PDF figure is saved (INFO), Lightning's
# banner lines, MLflow's database set-up, transformers' bars
LIBRARY_LINES = re.compile(r"fontTools|Glyph names|subsetted|subsetting|GPU available|TPU available|LitLogger|"
                           r"INFO|Creating initial MLflow|Writing model shards|Loading weights|Trainer\.fit")
ELAPSED = r"\d+ s|\d+ min \d\d s|\d+ h \d\d min"


def start_run(experiment: Path, work: Path, data_dir: Path, logs: Path) -> subprocess.Popen:
    """`bioablate run EXPERIMENT --profile micro > logs/out.txt 2> logs/err.txt`"""
    logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BIOABLATE_DATA": str(data_dir)}
    return subprocess.Popen([sys.executable, "-m", "ablations.cli", "run", str(experiment), "--profile", "micro",
                             "--work-dir", str(work)], stdout=(logs / "out.txt").open("w"),
                            stderr=(logs / "err.txt").open("w"), cwd=work.parent, env=env, start_new_session=True)


def test_run_to_a_file_says_each_epoch_and_checkpoint_and_nothing_from_the_libraries(tmp_path, data_dir):
    path = tmp_path / "progress.yaml"
    path.write_text(f"name: progress\nmodels:\n  tiny: {{pretrain: {TINY_PRETRAIN}}}\n  random: {{name_or_path: "
                    "random-bert}\ntasks: [biosses]\noverrides:\n  figures: true\n  finetune: {epochs: 2}\n"
                    "table: {rows: task, columns: model}\n")
    run = start_run(path, tmp_path / "work", data_dir, tmp_path / "logs")
    assert run.wait(timeout=1800) == 0, (tmp_path / "logs" / "err.txt").read_text()[-3000:]
    out, err = ((tmp_path / "logs" / name).read_text() for name in ("out.txt", "err.txt"))
    # the plan: the stage, then tiny's and random's cells
    assert "[1/3] running  pretrain tiny" in out and "[3/3] running  finetune random/biosses/s1" in out
    progress = [line for line in err.splitlines() if re.match(r"\[\d/3\] ", line)]
    step = rf"; ({ELAPSED}) \(experiment ({ELAPSED})\)$"
    assert [re.sub(r", train/loss \S+", "", re.sub(step, "", line)) for line in progress if "pretrain" in line] == [
        "[1/3] pretrain tiny: step 2/4", "[1/3] pretrain tiny: step 4/4"]
    # a named model other than the experiment's name for it is named too (quickstart's minilm under micro)
    for name, place in (("tiny/biosses/s1", 2), ("random/biosses/s1 (random-bert)", 3)):
        epochs = [line for line in progress if f"finetune {name}:" in line]
        assert [re.search(r"epoch \d/\d", line).group() for line in epochs] == ["epoch 1/2", "epoch 2/2"], progress
        assert all(line.startswith(f"[{place}/3] finetune {name}: epoch") and re.search(step, line) and
                   re.search(r"train/loss_epoch [-\d.e]+, dev/score [-\d.e]+;", line) for line in epochs), epochs
    assert all(re.search(step, line) for line in progress)
    noise = [line for line in err.splitlines() if LIBRARY_LINES.search(line)]
    assert not noise, noise
    # once, before the first run: the threads and OpenMP wait policy chosen, and how to choose others
    said = [n for n, line in enumerate(err.splitlines()) if line.startswith("bioablate: torch threads: ")]
    # (MKL_NUM_THREADS where the environment sets it, as the tests' xdist workers do: it is the one torch reads)
    how_to_change = re.search(r"set (OMP|MKL)_NUM_THREADS and OMP_WAIT_POLICY", err)
    assert len(said) == 1 and "OpenMP wait policy: " in err and how_to_change
    assert said[0] < err.splitlines().index(progress[0])
    assert (tmp_path / "work" / "tables" / "progress-micro" / "table.pdf").is_file()  # the figure was saved


def test_table_after_an_interrupted_run_renders_from_the_plan_recorded_when_it_started(tmp_path, data_dir):
    path = tmp_path / "cut.yaml"
    path.write_text("name: cut\nmodels:\n  random: {name_or_path: random-bert}\ntasks: [biosses]\nseeds: 20\n"
                    "table: {rows: task, columns: model}\n")
    work, logs = tmp_path / "work", tmp_path / "logs"
    run = start_run(path, work, data_dir, logs)
    deadline = time.time() + 1200
    # 20 planned runs of ~0.4 s each, polled every 50 ms: the interrupt lands long before the last one, on a
    # fast machine too (with 3 runs and a 1 s poll, a fast machine finished them all before the interrupt)
    while not re.search(r"\[ ?1/20\] computed", (logs / "out.txt").read_text()):
        assert run.poll() is None and time.time() < deadline, (logs / "err.txt").read_text()[-3000:]
        time.sleep(0.05)
    os.killpg(run.pid, signal.SIGINT)
    assert run.wait(timeout=300) == 130, (logs / "err.txt").read_text()[-3000:]
    assert "cut (profile micro)" not in (logs / "out.txt").read_text()  # it stopped before its table

    done = bioablate_in_process("table", str(path), "--work-dir", str(work), "--format", "csv", cwd=tmp_path,
                                unset=("BIOABLATE_DATA",))
    assert done.returncode == 0, done.stderr
    assert "used the plan recorded at" in done.stderr and "because no data directory was given" in done.stderr
    [row] = csv.DictReader(io.StringIO(done.stdout))
    # the interrupt lands after the first run (a quiet machine may finish another micro run or two before it does)
    assert (row["row"], row["column"], row["n_planned"]) == ("biosses", "random", "20") and 1 <= int(row["n"]) < 20, row
    assert row["mean"] and "not in the plan recorded" not in done.stdout


def test_finetune_to_a_file_says_each_epoch(tmp_path, data_dir):
    """`bioablate finetune ... 2> log`: no terminal, so no bar, and one line per epoch instead."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BIOABLATE_DATA": str(data_dir)}
    done = subprocess.run([sys.executable, "-m", "ablations.cli", "finetune", "--task", "bc5-chem", "--profile",
                           "micro", "--work-dir", str(tmp_path / "work"), "finetune.epochs=2"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    epochs = [line for line in done.stderr.splitlines() if line.startswith("finetune bc5-chem: epoch")]
    assert [re.search(r"epoch \d/\d", line).group() for line in epochs] == ["epoch 1/2", "epoch 2/2"], done.stderr
    assert all(re.search(rf"dev/score [-\d.e]+; ({ELAPSED})$", line) for line in epochs), epochs

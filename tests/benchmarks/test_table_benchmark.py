"""`python -m benchmarks.table_benchmark --profile micro --sides ours` end to end: every run of the table
carries its whole timing profile (lightning_modules/timing.py), the parts add up to the run's wall time
within 10%, that wall time agrees with clocks the profile does not own (the MLflow run's start and end,
the benchmark's own timing of the process), and the summary shows the breakdown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.table_benchmark import PARTS as BENCHMARK_PARTS
from benchmarks.table_benchmark import TASKS
from lightning_modules.timing import PARTS

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def micro_table(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("table-benchmark")
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "BIOABLATE_WORK")}
    env.update(BIOABLATE_DATA=str(data_dir), PYTHONPATH=str(REPO_ROOT), TOKENIZERS_PARALLELISM="false")
    # one seed: each run's parts are checked on their own, a second seed adds nothing but its time
    command = [sys.executable, "-m", "benchmarks.table_benchmark", "--profile", "micro", "--sides", "ours",
               "--seeds", "1", "--out", str(out)]
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {"results": json.loads((out / "results.json").read_text()), "summary": (out / "summary.md").read_text()}


def test_the_benchmark_names_every_part_the_runs_log():
    assert BENCHMARK_PARTS == PARTS


@pytest.mark.slow
def test_every_run_has_every_part_and_they_add_up_to_its_wall_time(micro_table: dict):
    (table,) = micro_table["results"]["tables"]
    runs = table["ours"]["runs"]
    assert sorted((r["task"], r["seed"]) for r in runs) == [(t, 1) for t in sorted(TASKS)]
    for run in runs:
        seconds = run["seconds"]
        assert set(seconds) == {*PARTS, "wall"}, run
        assert all(seconds[part] >= 0 for part in PARTS), run  # `other` too: no time counted twice
        assert abs(sum(seconds[part] for part in PARTS) - seconds["wall"]) <= 0.1 * seconds["wall"], run
        for part in ("model_load", "tokenization", "train_steps", "dev_eval", "test", "checkpoint_writes",
                     "mlflow_logging"):
            assert seconds[part] > 0, (part, run)  # each is timed where that work happens
        # the MLflow run exists from just after the splits are read and checked (a data error leaves no run;
        # timed as tokenization) to just after the profile is logged: the profile's wall time, less the
        # process's start and that reading, agrees with it
        in_run = seconds["wall"] - seconds["process_start_imports"]
        assert run["mlflow_s"] <= in_run + 0.5, run
        assert in_run - run["mlflow_s"] <= seconds["tokenization"] + 0.1 * in_run + 0.5, run
    # the process's start belongs to its first run only
    assert runs[0]["seconds"]["process_start_imports"] > 0
    assert all(r["seconds"]["process_start_imports"] == 0 for r in runs[1:])
    # the runs' wall times lie within the table's, timed from outside the process
    assert 0 <= table["ours"]["outside_runs_s"] < table["ours"]["wall_s"]
    assert table["ours"]["peak_rss_mb"] > 0 and table["ours"]["peak_pss_mb"] > 0  # PSS: Linux reports it


@pytest.mark.slow
def test_the_summary_shows_the_breakdown(micro_table: dict):
    summary = micro_table["summary"]
    for part in PARTS:
        assert f"| {part} |" in summary
    assert "outside runs" in summary and "Peak RSS" in summary and "PSS" in summary

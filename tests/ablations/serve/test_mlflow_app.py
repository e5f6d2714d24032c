"""`bioablate ui` as a researcher opens it (ablations/serve/ui.py, MLflow's own `mlflow server`): a real micro
fine-tuning run, the real server on loopback, and a real headless Chromium (tests/browser.py) reading the
pages after MLflow's scripts ran. One store, one server and one run for the module."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ablations.run.dashboard import runs_url
from ablations.serve.ui import server_environment
from tests.browser import open_page, page_text
from tests.cli import bioablate_in_process, stop_group

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_the_server_starts_without_starlettes_deprecation_notice(monkeypatch):
    """MLflow's app imports Starlette's deprecated WSGI middleware, and `mlflow server` prints the notice at
    every start: in the server's environment it is silenced even where the user shows every warning."""
    monkeypatch.setenv("PYTHONWARNINGS", "default")
    load = [sys.executable, "-c", "import mlflow.server.fastapi_app"]
    plain = subprocess.run(load, capture_output=True, text=True, timeout=600)
    assert plain.returncode == 0 and "starlette.middleware.wsgi" in plain.stderr, plain.stderr[-3000:]
    served = subprocess.run(load, capture_output=True, text=True, timeout=600, env=server_environment())
    assert served.returncode == 0, served.stderr[-3000:]
    assert "starlette" not in served.stderr.lower(), served.stderr[-3000:]


@pytest.fixture(scope="module")
def micro_run(tmp_path_factory, data_dir) -> tuple[Path, str, str, str]:
    """A micro fine-tuning run through the CLI, with its figures: (work dir, what it printed, experiment id, run
    id). Two training steps: fewer than trainer.log_every_n_steps (10), so its loss points come from the last
    write."""
    work = tmp_path_factory.mktemp("ui-store")
    done = bioablate_in_process("finetune", "--task", "gad", "--work-dir", str(work), "--data-dir", str(data_dir),
                                "trainer.progress_bar=false", "figures=true", cwd=work)  # micro draws none
    assert done.returncode == 0, done.stderr[-3000:]
    experiment_id, run_id = re.search(r"#/experiments/(\w+)/runs/(\w+)", done.stdout).groups()
    return work, done.stdout, experiment_id, run_id


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ui(micro_run) -> str:
    """`bioablate ui` over the micro run's work directory, as a user starts it: its base URL."""
    work = micro_run[0]
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    server = subprocess.Popen([sys.executable, "-m", "ablations.cli", "ui", "--work-dir", str(work), "--port",
                               str(port)], cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 300  # a loaded 2-core machine takes a while to import MLflow twice
        while True:
            assert server.poll() is None, server.stderr.read().decode()[-3000:]
            try:
                urllib.request.urlopen(f"{base}/health", timeout=5).close()
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.time() < deadline, "bioablate ui did not come up"
                time.sleep(0.5)
        yield base
    finally:
        stop_group(server)


def test_the_run_page_shows_the_runs_score(chromium, micro_run, ui):
    """The run page, at the path `bioablate finetune` printed: its test score in the metrics table."""
    work, printed, experiment_id, run_id = micro_run
    path = f"#/experiments/{experiment_id}/runs/{run_id}"
    assert f"then open http://127.0.0.1:5000/{path}" in printed and f"bioablate ui --work-dir {work}" in printed
    score = MlflowClient(f"sqlite:///{work / 'mlruns.db'}").get_run(run_id).data.metrics["test/score"]
    shown = f"test/score {score!r}"  # the metrics table: name, then value
    text = page_text(open_page(chromium, f"{ui}/{path}", ready=lambda text: shown in text))
    assert shown in text, text[:3000]
    assert "gad-random-bert-micro-s42" in text and "Finished" in text


def test_the_run_page_opens_on_the_runs_curves(micro_run, ui):
    """The run's description, the first thing its page shows, is the curves figure, served by the UI from
    the address the description gives relative to the page."""
    work, _, _, run_id = micro_run
    note = MlflowClient(f"sqlite:///{work / 'mlruns.db'}").get_run(run_id).data.tags["mlflow.note.content"]
    source = re.match(r"!\[[^\]]*\]\(([^)]+)\)", note).group(1)
    with urllib.request.urlopen(f"{ui}/{source}", timeout=60) as reply:
        assert reply.status == 200 and reply.read(8) == b"\x89PNG\r\n\x1a\n"


def test_the_metrics_tab_charts_the_training_loss(chromium, micro_run, ui):
    """The run's metrics tab draws a train/loss chart (two steps, both logged) beside the dev curves."""
    _, _, experiment_id, run_id = micro_run
    legends = [f"gad-random-bert-micro-s42 ({chart})" for chart in ("train/loss", "train/loss_epoch", "dev/score")]
    text = page_text(open_page(chromium, f"{ui}/#/experiments/{experiment_id}/runs/{run_id}/model-metrics",
                               ready=lambda text: all(legend in text for legend in legends), size=(1400, 2400)))
    for legend in legends:  # each chart's legend: the run's name (the metric)
        assert legend in text, (legend, text[:3000])
    assert "test/fn" not in text and "test/support" not in text  # counts are no charts


def test_the_runs_list_view_has_the_key_metrics_as_columns(chromium, micro_run, ui):
    """The experiment's saved view `bioablate`: the runs list grouped by task and profile, with the test score, the
    task and the model as columns, and the experiment's description above it."""
    _, _, experiment_id, _ = micro_run
    text = page_text(open_page(chromium, runs_url(ui, experiment_id), size=(2400, 900),
                               ready=lambda text: "gad-random-bert-micro-s42" in text))
    for column in ("test/score", "best_dev/score", "task", "model", "seed"):
        assert re.search(rf"\b{re.escape(column)}\b", text), (column, text[:3000])
    # grouped by task and profile: a micro run's numbers are never averaged with a mini run's
    assert "Group: task: gad, profile: micro" in text and "gad-random-bert-micro-s42" in text
    assert "Fine-tuning runs of bioablate" in text

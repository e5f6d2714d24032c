"""The tracking store (ablations/run/tracking.py): a URI that cannot work fails in seconds as one line, before
any run exists (a loopback port nobody listens on, a real loopback HTTP server, unknown schemes)."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from mlflow.tracking import MlflowClient

from ablations.cli import main
from ablations.run.tracking import PROBE_TIMEOUT_S, Tracker, check_tracking_uri, preserved_tracking_env
from bioablate_core.errors import ConfigError


@pytest.fixture(autouse=True)
def fresh_probe_cache():
    check_tracking_uri.cache_clear()
    yield
    check_tracking_uri.cache_clear()


def closed_port() -> int:
    with socket.socket() as s:  # bound then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nothing_listening_fails_in_seconds_not_minutes():
    uri = f"http://127.0.0.1:{closed_port()}"
    start = time.monotonic()
    with pytest.raises(ConfigError, match=rf"^tracking URI {uri}: no MLflow server answers within 3 s "):
        Tracker(uri, "probe")
    assert time.monotonic() - start < PROBE_TIMEOUT_S + 2


class _Handler(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(self.status if self.path == "/health" else 404)
        self.end_headers()
        self.wfile.write(b"OK")

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    _Handler.status = 200


def test_a_server_that_answers_health_passes(server):
    check_tracking_uri(f"http://127.0.0.1:{server.server_port}")


def test_a_server_answering_5xx_is_named(server):
    _Handler.status = 503
    uri = f"http://127.0.0.1:{server.server_port}"
    with pytest.raises(ConfigError, match=rf"tracking URI {uri}: the server answers {uri}/health with HTTP 503"):
        check_tracking_uri(uri)


@pytest.mark.parametrize("uri", ["bogus://x", "sqlite:////proc/no/such/dir/mlruns.db"])
def test_a_store_mlflow_cannot_open_is_one_error(uri):
    with pytest.raises(ConfigError, match=rf"^tracking URI {uri}: cannot open the store "):
        check_tracking_uri(uri)


def test_a_local_store_passes(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    check_tracking_uri(uri)
    assert MlflowClient(uri).search_experiments()


def test_the_command_line_reports_an_unreachable_server_in_one_line(tmp_path, data_dir, capsys):
    uri = f"http://127.0.0.1:{closed_port()}"
    code = main(["finetune", "--task", "gad", "--data-dir", str(data_dir), "--work-dir", str(tmp_path),
                 "--tracking-uri", uri])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and f"tracking URI {uri}: no MLflow server answers" in err


def test_the_lightning_logger_keeps_every_step_and_stores_them_a_few_steps_at_a_time(tmp_path):
    """Every step's points, one store write per `flush_every` steps (and at `flush` / `finalize`, as before
    a checkpoint or at the end); Lightning's `epoch` point is not kept."""
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    tracker = Tracker(uri, "logger")
    run_id = tracker.create("a-run", {}, {})
    client = MlflowClient(uri)

    def stored() -> list[tuple[int, float]]:
        return sorted((m.step, m.value) for m in client.get_metric_history(run_id, "train/loss"))

    with preserved_tracking_env():  # Lightning's logger sets $MLFLOW_TRACKING_URI for the whole process
        logger = tracker.lightning_logger(run_id, flush_every=3)
        for step in range(4):
            logger.log_metrics({"train/loss": float(step), "epoch": 0.0}, step=step)
            assert len(stored()) == (3 if step >= 2 else 0)  # written once three steps are kept
        logger.log_metrics({"dev/score": 0.5}, step=3)  # another key at a step already kept
        logger.flush()
        assert stored() == [(s, float(s)) for s in range(4)]
        assert [m.step for m in client.get_metric_history(run_id, "dev/score")] == [3]
        logger.log_metrics({"train/loss": 4.0}, step=4)
        logger.finalize("success")
    assert stored()[-1] == (4, 4.0) and client.get_metric_history(run_id, "epoch") == []

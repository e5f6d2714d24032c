"""The tracking store (ablations/run/tracking.py): a URI that cannot work fails in seconds as one line, before
any run exists (a loopback port nobody listens on, a real loopback HTTP server, unknown schemes)."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from ablations.cli import main
from ablations.run.lightning_logging import RunOwnedMLFlowLogger
from ablations.run.tracking import (
    PROBE_TIMEOUT_S,
    SQLITE_HEADER,
    StoreDamaged,
    Tracker,
    check_tracking_uri,
    preserved_tracking_env,
)
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
    authorizations: list[str | None] = []  # the Authorization header of each request, as received

    def do_GET(self):  # noqa: N802 (http.server's name)
        _Handler.authorizations.append(self.headers.get("Authorization"))
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
    _Handler.authorizations = []


def test_a_server_that_answers_health_passes(server):
    check_tracking_uri(f"http://127.0.0.1:{server.server_port}")


def test_a_server_answering_5xx_is_named(server):
    _Handler.status = 503
    uri = f"http://127.0.0.1:{server.server_port}"
    with pytest.raises(ConfigError, match=rf"tracking URI {uri}: the server answers {uri}/health with HTTP 503"):
        check_tracking_uri(uri)


def test_a_server_uri_with_a_password_reaches_the_server_and_never_shows_the_password(server):
    """`http://user:password@host:port`: the probe reaches the live server (it took `user:password@host`
    for a host name: "Name or service not known") with the credentials as HTTP basic authentication, as
    MLflow's client sends them; a message about the server shows the password masked."""
    import base64

    uri = f"http://alice:s3cretPW@127.0.0.1:{server.server_port}"
    check_tracking_uri(uri)
    assert _Handler.authorizations == ["Basic " + base64.b64encode(b"alice:s3cretPW").decode()]
    _Handler.status = 503
    with pytest.raises(ConfigError) as failed:
        check_tracking_uri(uri + "/")
    assert "s3cretPW" not in str(failed.value)
    assert str(failed.value).startswith(f"tracking URI http://alice:***@127.0.0.1:{server.server_port}/: the server "
                                        f"answers http://127.0.0.1:{server.server_port}/health with HTTP 503")


def test_a_uri_with_a_password_that_cannot_work_is_one_line_with_the_password_masked(tmp_path, data_dir, capsys):
    """SQLite takes no credentials, and a server nobody answers is named: masked, on every path to the user."""
    for uri in (f"sqlite://alice:s3cretPW@/{tmp_path / 'mlruns.db'}", f"http://alice:s3cretPW@127.0.0.1:{closed_port()}",
                f"postgresql+psycopg2://alice:s3cretPW@127.0.0.1:{closed_port()}/db"):
        code = main(["finetune", "--task", "gad", "--data-dir", str(data_dir), "--work-dir", str(tmp_path),
                     "--tracking-uri", uri])
        captured = capsys.readouterr()
        err = captured.err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and "alice:***@" in err, err
        assert "s3cretPW" not in captured.out + captured.err


@pytest.mark.parametrize("uri", ["bogus://x", "sqlite:////proc/no/such/dir/mlruns.db"])
def test_a_store_mlflow_cannot_open_is_one_error(uri):
    with pytest.raises(ConfigError, match=rf"^tracking URI {uri}: cannot open the store "):
        check_tracking_uri(uri)


@pytest.mark.parametrize("header", [b"", SQLITE_HEADER], ids=["random-bytes", "random-bytes-after-the-header"])
def test_a_damaged_store_file_is_said_so(tmp_path, header):
    """Not a permissions problem, and not the user's command: a store SQLite cannot read."""
    path = tmp_path / "mlruns.db"
    path.write_bytes(header + bytes(range(256)) * 16)
    with pytest.raises(StoreDamaged) as error:
        check_tracking_uri(f"sqlite:///{path}")
    message = str(error.value)
    assert message.startswith(f"tracking URI sqlite:///{path}: the store file {path} is damaged (") and \
        "restore it from a backup, or move it aside" in message and "writable" not in message, message


def test_a_command_on_a_damaged_store_exits_1_with_one_line(tmp_path, capsys):
    (tmp_path / "mlruns.db").write_bytes(bytes(range(256)) * 16)
    code = main(["table", "quickstart", "--work-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1 and "is damaged (not an SQLite database)" in err, (code, err)


def test_a_local_store_passes(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    check_tracking_uri(uri)
    assert MlflowClient(uri).search_experiments()


def store_schema(path) -> tuple[list, list]:
    """A SQLite store's tables with their columns, and its alembic revision."""
    import sqlite3

    with sqlite3.connect(path) as db:
        tables = [(name, db.execute(f"PRAGMA table_info('{name}')").fetchall()) for (name,) in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return tables, db.execute("SELECT version_num FROM alembic_version").fetchall()


def test_a_new_local_store_is_a_copy_of_one_migrated_once_and_the_same_as_mlflows_own(tmp_path, monkeypatch):
    """New SQLite stores start as copies of an empty store `mlflow db upgrade` made once into the user cache
    (MLflow's migrations for every new work directory otherwise); each is the store MLflow would have made:
    the same tables and revision, its own Default experiment, and runs logged in it read back. The template
    equal to MLflow's own creation is what fails where MLflow's `db upgrade` of an empty database changes."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    own = tmp_path / "own" / "mlruns.db"
    own.parent.mkdir()
    MlflowClient(f"sqlite:///{own}").search_experiments()  # MLflow's own creation, for comparison
    templates = tmp_path / "cache" / "bioablate" / "mlflow"

    stores, made = [], []
    for name in ("first", "second", "third"):
        store = tmp_path / name / "mlruns.db"
        store.parent.mkdir()
        tracker = Tracker(f"sqlite:///{store}", "probe", artifact_root=store.parent / "artifacts")
        made.append({(p.name, p.stat().st_ino, p.stat().st_mtime_ns) for p in templates.glob("*.db")})
        run_id = tracker.create("a-run", {"fingerprint": name}, {"lr": 0.1})
        tracker.log_metrics(run_id, {"dev/score": 0.5}, step=1)
        stores.append((store, run_id))
    assert len(made[0]) == 1 and made[0] == made[1] == made[2]  # the template, made once; then copies
    assert [p.name for p in templates.glob("*.db")] == [f"empty-store-{mlflow.__version__}.db"]
    template = next(templates.glob("*.db"))
    assert store_schema(template) == store_schema(own)  # what MLflow's migrations make, nothing else
    assert sqlite3_rows(template, "experiments") == 0

    for store, run_id in stores:
        assert store_schema(store) == store_schema(own)
        client = MlflowClient(f"sqlite:///{store}")
        default = client.get_experiment("0")  # MLflow added it on first opening the copy, as on creating one
        assert default.name == "Default" and default.artifact_location.endswith("/mlruns/0")
        assert default.artifact_location == MlflowClient(f"sqlite:///{own}").get_experiment("0").artifact_location
        assert client.get_run(run_id).data.metrics == {"dev/score": 0.5}
        assert client.get_run(run_id).data.params == {"lr": "0.1"}
    assert len({run_id for _, run_id in stores}) == 3


def sqlite3_rows(path, table: str) -> int:
    import sqlite3

    with sqlite3.connect(path) as db:
        return db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def test_without_a_writable_cache_mlflow_creates_the_store_and_a_damaged_template_is_made_again(
        tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.write_text("a file where the cache folder would be")  # nothing can be written under it
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    check_tracking_uri(f"sqlite:///{tmp_path / 'a.db'}")
    assert MlflowClient(f"sqlite:///{tmp_path / 'a.db'}").get_experiment("0").name == "Default"

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache2"))
    template = tmp_path / "cache2" / "bioablate" / "mlflow" / f"empty-store-{mlflow.__version__}.db"
    template.parent.mkdir(parents=True)
    template.write_bytes(b"not a database")  # damaged, or another build's: made again
    check_tracking_uri(f"sqlite:///{tmp_path / 'b.db'}")
    assert MlflowClient(f"sqlite:///{tmp_path / 'b.db'}").get_experiment("0").name == "Default"
    assert store_schema(template)[1] == store_schema(tmp_path / "b.db")[1] != []
    assert not list(tmp_path.glob(".*.part"))  # nothing half-made is left beside the stores


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
        logger = RunOwnedMLFlowLogger(tracking_uri=tracker.tracking_uri, run_id=run_id, flush_every=3)
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


def test_a_plain_mysql_uri_without_its_driver_is_told_the_driver_form_of_the_uri(tmp_path, data_dir, capsys):
    """A plain `mysql://` makes SQLAlchemy import MySQLdb (not installed here); installing PyMySQL alone would
    change nothing, so the one line gives the `mysql+pymysql://` form to write, password masked."""
    port = closed_port()
    code = main(["finetune", "--task", "gad", "--data-dir", str(data_dir), "--work-dir", str(tmp_path),
                 "--tracking-uri", f"mysql://alice:s3cretPW@127.0.0.1:{port}/db"])
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"pip install pymysql and write the URL as mysql+pymysql://alice:***@127.0.0.1:{port}/db" in err, err
    assert "s3cretPW" not in captured.out + captured.err

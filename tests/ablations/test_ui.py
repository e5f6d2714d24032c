"""ablations.ui: the environment the MLflow server runs in (the servers themselves are started in
tests/ablations/sweep/test_sweep.py and tests/ablations/launch/test_slurm.py)."""

from __future__ import annotations

from ablations.ui import server_environment


def test_the_server_runs_without_telemetry_or_mlflows_job_runner_unless_asked(monkeypatch):
    monkeypatch.delenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", raising=False)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "false")
    env = server_environment()
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"  # seven fewer processes importing MLflow
    assert env["MLFLOW_DISABLE_TELEMETRY"] == "true" and env["DO_NOT_TRACK"] == "true"
    monkeypatch.setenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "true")  # a user who wants MLflow's jobs
    assert server_environment()["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "true"


# ------------------------------------------------------------------- the servers' inputs, checked first

import socket  # noqa: E402

import pytest  # noqa: E402
import time  # noqa: E402

from tests.cli import bioablate_in_process  # noqa: E402


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ui_and_server_refuse_a_port_another_program_listens_on(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = bioablate_in_process("ui", "--port", str(port), "--work-dir", str(tmp_path), cwd=tmp_path)
        assert done.returncode == 2 and done.stdout == ""  # not even the URL: nothing will serve it
        assert done.stderr.strip().splitlines() == [
            f"bioablate: error: cannot listen on 127.0.0.1:{port} (Address already in use): another program uses "
            "the port; pick another with --port"]


def test_an_unreachable_database_is_one_line_within_seconds(tmp_path, data_dir):
    url = f"postgresql+psycopg2://someone:secret@127.0.0.1:{closed_port()}/mlflow"
    for command in (["server", "--backend-store-uri", url, "--artifacts", str(tmp_path / "artifacts")],
                    ["finetune", "--task", "biosses", "--tracking-uri", url, "--work-dir", str(tmp_path),
                     "--data-dir", str(data_dir)]):
        done = bioablate_in_process(*command, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        [line] = done.stderr.strip().splitlines()
        assert "someone:***@127.0.0.1" in line and "secret" not in line and "Connection refused" in line, line
    # the probe answers in seconds where MLflow retried for 105 s (the commands above add only imports)
    from ablations.tracking import check_tracking_uri
    from core.errors import ConfigError

    start = time.monotonic()
    with pytest.raises(ConfigError, match="cannot connect"):
        check_tracking_uri(url)
    assert time.monotonic() - start < 10


def test_a_postgresql_uri_without_a_driver_reaches_the_server(postgres_url):
    """The README's form, postgresql://user:password@host/db: the installed driver is filled in (SQLAlchemy
    2.1 alone would ask for psycopg 3), and the real server answers."""
    from core.databases import unreachable, with_driver

    plain = "postgresql://" + postgres_url.split("://", 1)[1]
    assert with_driver(plain).startswith(("postgresql+psycopg://", "postgresql+psycopg2://"))
    assert unreachable(with_driver(plain), 5) is None
    assert with_driver(postgres_url) == postgres_url  # a named driver is kept

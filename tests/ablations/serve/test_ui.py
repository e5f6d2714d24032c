"""ablations.serve.ui: the environment the MLflow server runs in (the servers themselves are started in
tests/ablations/sweep/test_sweep.py and tests/ablations/launch/test_slurm.py), the servers' inputs checked
first, and `bioablate ui --optuna`: the real Optuna dashboard beside the real MLflow UI, on loopback, both
stopping with the command; without optuna-dashboard, one line naming the `ui` extra."""

from __future__ import annotations

from ablations.serve.ui import server_environment


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
import time  # noqa: E402

import pytest  # noqa: E402

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


def test_a_taken_optuna_port_names_the_optuna_port_option(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        free = closed_port()
        done = bioablate_in_process("ui", "--optuna", "--port", str(free), "--optuna-port", str(port), "--work-dir",
                                    str(tmp_path), cwd=tmp_path)
        assert done.returncode == 2 and done.stderr.strip().splitlines() == [
            f"bioablate: error: cannot listen on 127.0.0.1:{port} (Address already in use): another program uses "
            "the port; pick another with --optuna-port"], done.stderr


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
    from ablations.run.tracking import check_tracking_uri
    from bioablate_core.errors import ConfigError

    start = time.monotonic()
    with pytest.raises(ConfigError, match="cannot connect"):
        check_tracking_uri(url)
    assert time.monotonic() - start < 10


def test_a_postgresql_uri_without_a_driver_reaches_the_server(postgres_url):
    """The README's form, postgresql://user:password@host/db: the installed driver is filled in (SQLAlchemy
    2.1 alone would ask for psycopg 3), and the real server answers."""
    from bioablate_core.databases import unreachable, with_driver

    plain = "postgresql://" + postgres_url.split("://", 1)[1]
    assert with_driver(plain).startswith(("postgresql+psycopg://", "postgresql+psycopg2://"))
    assert unreachable(with_driver(plain), 5) is None
    assert with_driver(postgres_url) == postgres_url  # a named driver is kept


# ------------------------------------------------------------------- the Optuna dashboard beside MLflow

import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import urllib.request  # noqa: E402

from ablations.config import REPO_ROOT  # noqa: E402


def test_ui_optuna_without_the_dashboard_is_one_line_naming_the_ui_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna_dashboard", None)  # as if not installed: its import fails
    done = bioablate_in_process("ui", "--optuna", "--port", str(closed_port()), "--work-dir", str(tmp_path),
                                cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "bioablate: error: bioablate ui --optuna serves the Optuna dashboard, which is not installed: pip install "
        "'bioablate[ui]' (or pip install optuna-dashboard)"]


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.read().decode()
    except OSError:
        return None


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie no one reaped yet is dead too
    except FileNotFoundError:
        return True


def _listening(port: int) -> set[str]:
    """The addresses something listens on at `port` (IPv4 and IPv6), from /proc/net/tcp*."""
    import ipaddress

    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.split(":")
                if state == "0A" and int(hex_port, 16) == port:  # LISTEN
                    raw = bytes.fromhex(address)
                    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))  # little-endian words
                    found.add(str(ipaddress.ip_address(raw)))
    return found


def _wait_for(condition, timeout_s: float = 90) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return False


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_ui_optuna_serves_the_studies_beside_mlflow_on_loopback_and_both_stop_with_it(tmp_path, stop):
    """`bioablate ui --optuna`: the MLflow UI on --port and the Optuna dashboard over the work directory's
    study storage on the next port, both on 127.0.0.1, as children of the command; SIGTERM stops both (exit
    143), and a SIGKILLed command leaves neither behind (the parent-death signal)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.create_study(study_name="ner-demo", storage=f"sqlite:///{tmp_path / 'optuna.db'}")
    port = closed_port()
    while _get(f"http://127.0.0.1:{port + 1}/") is not None:  # the next port must be free too
        port = closed_port()
    env = {k: v for k, v in os.environ.items() if k not in ("BIOABLATE_SWEEP_STORAGE", "MLFLOW_TRACKING_URI")}
    process = subprocess.Popen([sys.executable, "-m", "ablations.cli", "ui", "--optuna", "--port", str(port),
                                "--work-dir", str(tmp_path)], cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        assert _wait_for(lambda: _get(f"http://127.0.0.1:{port}/health") is not None
                         and _get(f"http://127.0.0.1:{port + 1}/api/studies") is not None), "servers did not start"
        studies = json.loads(_get(f"http://127.0.0.1:{port + 1}/api/studies"))
        assert [s["study_name"] for s in studies["study_summaries"]] == ["ner-demo"]
        children = _children(process.pid)
        assert len(children) == 2
        assert _listening(port) == _listening(port + 1) == {"127.0.0.1"}  # loopback only
        process.send_signal(stop)
        code = process.wait(60)
        assert code == (143 if stop == signal.SIGTERM else -signal.SIGKILL)
        assert _wait_for(lambda: all(_gone(child) for child in children), 30), "a server outlived the command"
        assert _get(f"http://127.0.0.1:{port}/health") is None and _get(f"http://127.0.0.1:{port + 1}/") is None
        out = process.stdout.read()
        assert f"MLflow UI for sqlite:///{tmp_path / 'mlruns.db'}: http://127.0.0.1:{port}/" in out
        assert f"Optuna dashboard for sqlite:///{tmp_path / 'optuna.db'}: http://127.0.0.1:{port + 1}/dashboard" in out
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_sqlite_store_path_that_is_a_folder_is_one_line(tmp_path, data_dir):
    """(Was: 110 s of MLflow retries, then a traceback.)"""
    folder = tmp_path / "store"
    folder.mkdir()
    done = bioablate_in_process("finetune", "--task", "biosses", "--tracking-uri", f"sqlite:///{folder}",
                                "--work-dir", str(tmp_path / "w"), "--data-dir", str(data_dir), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"bioablate: error: tracking URI sqlite:///{folder}: that path is a folder; name the database file, "
        "e.g. sqlite:///<folder>/mlruns.db"]

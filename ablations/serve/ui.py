"""`bioablate ui`: the MLflow UI over the work directory's store, on loopback unless asked otherwise.

The MLflow server has no authentication: anyone who can reach the port can read and delete runs. So it
listens on 127.0.0.1 by default and a non-loopback host needs `--allow-remote`.

MLflow 3's UI opens in its GenAI mode (traces, evaluations) unless told otherwise; the mode is
the page's `workflowType` (its URL parameter wins over the browser's remembered choice), so the printed
address asks for `machine_learning`: the classic view of experiments, runs, params and metric curves.
The server is MLflow's own `mlflow server`, run with telemetry off (`MLFLOW_DISABLE_TELEMETRY`,
`DO_NOT_TRACK`), for itself and the UI it serves, and without MLflow's job runner unless the environment sets
`MLFLOW_SERVER_ENABLE_JOB_EXECUTION`. MLflow's assistant pane stays: no MLflow setting hides it from a local
browser.
The Optuna dashboard over the sweeps' study storage is a separate program (optuna-dashboard, the `ui`
extra: `pip install 'bioablate[ui]'`): `bioablate ui --optuna` serves it beside the MLflow UI, on the next
port and the same (loopback) host, both as child processes that stop together; without `--optuna` the
command prints how to start it.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
import subprocess
import sys
import time
from pathlib import Path

from ablations.places import resolve_tracking_uri, resolve_work_dir
from ablations.sweep import storage as sweep_storage
from ablations.sweep.storage import STORAGE_ENV
from bioablate_core.databases import redact, unreachable, with_driver
from bioablate_core.errors import ConfigError

PROBE_TIMEOUT_S = 5.0  # a backend database that accepts no connection within this is unreachable
UI_EXTRA = "pip install 'bioablate[ui]'"  # optuna-dashboard (and nbconvert for the report notebook)
# the dashboard, run by this interpreter (its `optuna-dashboard` script may not be on PATH); the storage URL
# comes in the environment, as sweeps take it, not on the command line `ps` shows (it may hold a password)
DASHBOARD = ("import os, sys, optuna_dashboard; "
             f"optuna_dashboard.run_server(os.environ['{STORAGE_ENV}'], host=sys.argv[1], port=int(sys.argv[2]))")

CLASSIC_VIEW = "#/experiments?workflowType=machine_learning"
NO_TELEMETRY = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
# MLflow 3's server starts a job runner by default: seven more Python processes (huey consumers), each
# importing MLflow, for GenAI features (scorers, trace roll-ups, prompt optimization) no run here uses.
# Off unless the user's environment turns it on.
NO_JOB_RUNNER = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
# MLflow's own import of Starlette's WSGI middleware warns at every start: nothing a user can act on
QUIET = "ignore:starlette.middleware.wsgi is deprecated"
SERVER = [sys.executable, "-m", "mlflow", "server"]  # MLflow's command, run by this interpreter


def server_environment() -> dict[str, str]:
    """The environment the MLflow server runs in: ours, telemetry off, its job runner off by default, and
    Starlette's deprecation notice silenced (after the user's own PYTHONWARNINGS)."""
    warnings = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), QUIET]))
    return {**NO_JOB_RUNNER, **os.environ, **NO_TELEMETRY, "PYTHONWARNINGS": warnings}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def server_command(host: str, port: int, allow_remote: bool, work_dir: str | None,
                   tracking_uri: str | None, storage: str | None) -> tuple[list[str], str]:
    """The `mlflow server` command line, and the lines telling the user what is where."""
    if not is_loopback(host) and not allow_remote:
        raise ConfigError(f"refusing to listen on {host}: the MLflow UI has no authentication; use a "
                          "loopback host (127.0.0.1) or pass --allow-remote to expose it")
    if not 0 < port < 65536:
        raise ConfigError(f"--port must be between 1 and 65535, got {port}")
    work = resolve_work_dir() if work_dir is None else Path(work_dir).expanduser().resolve()
    work.mkdir(parents=True, exist_ok=True)
    store = with_driver(tracking_uri) if tracking_uri else resolve_tracking_uri(None, work)
    if store.startswith(("http://", "https://")):
        raise ConfigError(f"the tracking store {store} is already a server: open it in a browser")
    study_storage = sweep_storage.study_storage(storage, work)
    command = [*SERVER, "--backend-store-uri", store,
               "--artifacts-destination", str(work / "mlartifacts"), "--host", host, "--port", str(port),
               "--workers", "1"]
    needs = "" if importlib.util.find_spec("optuna_dashboard") else f" (needs {UI_EXTRA})"
    notes = (f"MLflow UI for {store}: http://{_shown(host)}:{port}/{CLASSIC_VIEW}  (Ctrl-C stops it)\n"
             f"Optuna dashboard for the studies: bioablate ui --optuna serves it on the next port{needs}, or "
             f"optuna-dashboard '{redact(study_storage)}' --host 127.0.0.1 --port 8080  (put the "
             "password back into the URL if it has one)")
    return command, notes


def _shown(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def dashboard_command(storage: str, host: str, port: int) -> tuple[list[str], dict[str, str]]:
    """The Optuna dashboard over `storage` (command line, environment): a one-line ConfigError naming the
    `ui` extra if it is not installed."""
    try:
        import optuna_dashboard  # noqa: F401 -- only whether it is installed
    except ImportError:
        raise ConfigError(f"bioablate ui --optuna serves the Optuna dashboard, which is not installed: "
                          f"{UI_EXTRA} (or pip install optuna-dashboard)") from None
    if not 0 < port < 65536:
        raise ConfigError(f"--optuna-port must be between 1 and 65535, got {port}")
    return [sys.executable, "-c", DASHBOARD, host, str(port)], {**os.environ, STORAGE_ENV: storage}


def check_port_free(host: str, port: int, option: str = "--port") -> None:
    """A one-line error where another program listens on `port` (the server would print the URL, fail to
    bind, and exit 0), naming the `option` that chose the port."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is no conflict
        try:
            probe.bind((host, port))
        except OSError as error:
            raise ConfigError(f"cannot listen on {host}:{port} ({error.strerror or error}): another program "
                              f"uses the port; pick another with {option}") from None


def serve(host: str, port: int, allow_remote: bool, work_dir: str | None, tracking_uri: str | None,
          storage: str | None, optuna: bool = False, optuna_port: int | None = None) -> int:
    """Replace this process with the MLflow server: it runs in the foreground, signals go to it. With
    `optuna`, the Optuna dashboard too (on `optuna_port`, default the next port, on the same host): both
    run as children of this process, which stops both when either stops or a signal comes."""
    command, notes = server_command(host, port, allow_remote, work_dir, tracking_uri, storage)
    if not optuna:
        check_port_free(host, port)
        print(notes, flush=True)
        os.execve(command[0], command, server_environment())
    work = resolve_work_dir() if work_dir is None else Path(work_dir).expanduser().resolve()
    study_storage = sweep_storage.study_storage(storage, work)
    optuna_port = port + 1 if optuna_port is None else optuna_port
    if optuna_port == port:
        raise ConfigError(f"--optuna-port {optuna_port} is the MLflow UI's --port; pick another")
    dashboard, dashboard_env = dashboard_command(study_storage, host, optuna_port)
    check_port_free(host, port)
    check_port_free(host, optuna_port, "--optuna-port")
    print(notes.splitlines()[0], flush=True)
    print(f"Optuna dashboard for {redact(study_storage)}: http://{_shown(host)}:{optuna_port}/dashboard", flush=True)
    return supervise([(command, server_environment()), (dashboard, dashboard_env)])


def _die_with_parent() -> None:
    """In a child, before it runs: SIGTERM to it when this process dies (Linux's parent-death signal), so a
    SIGKILLed `bioablate ui --optuna` leaves no server behind."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux
        pass


def supervise(commands: list[tuple[list[str], dict[str, str]]], poll_s: float = 0.5) -> int:
    """Run `commands` (command line, environment) as child processes until one of them ends (its exit
    status is returned) or this process is interrupted (`bioablate_core.interrupts.Interrupted` goes on); the others
    are then stopped (SIGTERM, SIGKILL after 10 s)."""
    children: list[subprocess.Popen] = []
    try:
        for command, env in commands:
            children.append(subprocess.Popen(command, env=env, preexec_fn=_die_with_parent))
        while True:
            for child in children:
                code = child.poll()
                if code is not None:
                    return code
            time.sleep(poll_s)
    finally:
        for child in children:
            if child.poll() is None:
                child.terminate()
        for child in children:
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def shared_server_command(backend_store_uri: str, artifacts: str, host: str, port: int, workers: int,
                          allow_remote: bool) -> tuple[list[str], str]:
    """`bioablate server`: the tracking server every job of an experiment logs to. A server database
    (PostgreSQL, MySQL) as the backend store, since many jobs write at once; artifacts served from a folder
    on the shared filesystem (`--artifacts-destination`), so jobs need no direct access to it."""
    if backend_store_uri.startswith("sqlite") or "://" not in backend_store_uri:
        raise ConfigError(f"--backend-store-uri {backend_store_uri}: many jobs write at once; use a server "
                          "database, e.g. postgresql://user:password@dbhost/mlflow (see docs/cluster.md)")
    if not is_loopback(host) and not allow_remote:
        raise ConfigError(f"refusing to listen on {host}: the MLflow server has no authentication; keep "
                          "127.0.0.1 and reach it through an SSH tunnel, or pass --allow-remote on a trusted "
                          "cluster network")
    if not 0 < port < 65536 or workers < 1:
        raise ConfigError(f"--port must be between 1 and 65535 and --workers at least 1 (got {port}, {workers})")
    backend_store_uri = with_driver(backend_store_uri)
    reason = unreachable(backend_store_uri, PROBE_TIMEOUT_S)
    if reason is not None:  # the server would retry for minutes, then print a long traceback
        raise ConfigError(f"--backend-store-uri {redact(backend_store_uri)}: cannot connect ({reason})")
    check_port_free(host, port)
    root = Path(artifacts).expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    command = [*SERVER, "--backend-store-uri", backend_store_uri,
               "--artifacts-destination", str(root), "--host", host, "--port", str(port),
               "--workers", str(workers)]
    shown = _shown(host)
    notes = (f"MLflow tracking server for {redact(backend_store_uri)}, artifacts in {root}\n"
             f"  jobs log with: --tracking-uri http://{shown}:{port}  (or MLFLOW_TRACKING_URI)\n"
             f"  browse: http://{shown}:{port}/{CLASSIC_VIEW}  (Ctrl-C stops it)")
    return command, notes


def serve_shared(backend_store_uri: str, artifacts: str, host: str, port: int, workers: int,
                 allow_remote: bool) -> None:
    command, notes = shared_server_command(backend_store_uri, artifacts, host, port, workers, allow_remote)
    print(notes, flush=True)
    os.execve(command[0], command, server_environment())

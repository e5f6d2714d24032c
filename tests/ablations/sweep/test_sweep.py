"""Optuna sweeps end to end on real data: micro trials, a real PostgreSQL shared by worker processes (one
of them SIGKILLed mid-trial), pruning, and the MLflow parent/child runs read back through a real server.

The PostgreSQL tests need `BIOABLATE_TEST_POSTGRES` (an SQLAlchemy URL); `.ci/run` starts a server on
127.0.0.1 and sets it.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import optuna
import pytest
import sqlalchemy
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from ablations.cli import main
from ablations.config import REPO_ROOT, build_config
from ablations.sweep import STORAGE_ENV, Place, SweepPaths, best_command, load_sweep, run_sweep, sqlite_single_process
from bioablate_core.errors import ConfigError
from bioablate_core.packaged import resolve_config
from tests.cli import bioablate_in_process, stop_group

MICRO = resolve_config("micro", "sweep")
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


@pytest.fixture(autouse=True)
def no_leaked_tracking_uri(monkeypatch):
    """Lightning's MLFlowLogger calls mlflow.set_tracking_uri, which exports MLFLOW_TRACKING_URI: without
    this, a sweep in one test would log to the store of a run in an earlier one."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def unique(prefix: str) -> str:
    """A study name no earlier test run used: the CI database outlives a test session."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def trials_of(study_name: str, storage: str) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=study_name, storage=storage).get_trials(deepcopy=False)


def params_key(trial: optuna.trial.FrozenTrial) -> tuple:
    return tuple(sorted(trial.params.items()))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- several workers on PostgreSQL ----


@pytest.mark.slow
def test_two_workers_on_postgres_finish_exactly_n_trials_without_duplicates(postgres_url, data_dir, tmp_path):
    spec = load_sweep(MICRO, study=unique("two-workers"))  # the 4-point grid: n_trials = 4
    summary = run_sweep(spec, postgres_url, workers=2, paths=SweepPaths(str(data_dir), str(tmp_path)))

    assert summary.worker_exit_codes == [0, 0]
    trials = trials_of(spec.study, postgres_url)
    assert [t.state for t in trials if t.state not in FINISHED] == []
    assert len(trials) == spec.n_trials == 4
    assert len({params_key(t) for t in trials}) == 4  # every grid point once
    assert summary.complete and summary.best_value == max(t.value for t in trials if t.value is not None)
    # The `sweep best` command printed after such a sweep names the server storage without its password:
    # pasted in another directory, without the storage variable, it finds the study, the password coming
    # from libpq's environment (PGPASSWORD; or ~/.pgpass).
    export = best_command(spec.study, Place(str(tmp_path), postgres_url, str(data_dir)))
    password = sqlalchemy.engine.make_url(postgres_url).password
    assert password and f":{password}@" not in export and "***" not in export
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    words = shlex.split(export)
    assert words[0] == "bioablate"
    done = bioablate_in_process(*words[1:], cwd=elsewhere, unset=(STORAGE_ENV,), env={"PGPASSWORD": password})
    assert done.returncode == 0 and f"of study '{spec.study}'" in done.stdout, done.stderr
    assert (tmp_path / "sweeps" / f"{spec.study}.yaml").is_file()


@pytest.mark.slow
def test_a_worker_killed_mid_trial_leaves_a_failed_trial_that_a_rerun_retries(postgres_url, data_dir,
                                                                              tmp_path):
    study = unique("killed")
    command = [sys.executable, "-m", "ablations.cli", "sweep", str(MICRO), "--study", study, "--n-trials", "3",
               "--data-dir", str(data_dir), "--work-dir", str(tmp_path)]
    env = {**os.environ, STORAGE_ENV: postgres_url,
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    worker = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # one storage for the polling: a new one per look (an engine and a schema check each) took longer than a
    # micro trial on a quiet machine, and the worker finished all three trials between two looks
    storage = optuna.storages.RDBStorage(postgres_url)
    try:
        killed = None
        for _ in range(3000):  # wait until the second trial (the first one finished) is training
            if worker.poll() is not None:
                break
            try:
                study_id = storage.get_study_id_from_name(study)
            except KeyError:  # the worker has not created it yet
                study_id = None
            if study_id is not None:
                # training: every parameter suggested (those of the finished trial 0), not caught between two
                # suggestions, where its retry would take the first and suggest the rest afresh
                trials = storage.get_all_trials(study_id, deepcopy=False)
                keys = [set(t.params) for t in trials if t.number == 0 and t.state.is_finished()]
                running = [t for t in trials if t.state == TrialState.RUNNING and t.number >= 1 and keys
                           and set(t.params) == keys[0]]
                if running:
                    killed = running[0]
                    break
            time.sleep(0.1)
        assert killed is not None, f"worker never reached trial 1 (exit code {worker.poll()})"
        os.kill(worker.pid, signal.SIGKILL)
    finally:
        worker.kill()
        worker.wait()

    # Rerunning the same command resumes: trial 0 stays done, the killed trial goes stale, is marked
    # FAIL and retried with the same parameters.
    summary = run_sweep(load_sweep(MICRO, study=study, n_trials=3), postgres_url,
                        paths=SweepPaths(str(data_dir), str(tmp_path)))
    trials = {t.number: t for t in trials_of(study, postgres_url)}
    assert trials[killed.number].state == TrialState.FAIL
    assert trials[0].state in FINISHED
    retries = [t for t in trials.values()
               if RetryHeartbeatStaleTrialCallback.retried_trial_number(t) == killed.number]
    assert len(retries) == 1 and retries[0].state in FINISHED
    assert retries[0].params == killed.params
    finished = [t for t in trials.values() if t.state in FINISHED]
    assert len(finished) == 3 and len(trials) == 4 and summary.complete
    assert len({params_key(t) for t in finished}) == 3

    client = MlflowClient(summary.tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name("sweeps").experiment_id],
                              f"tags.`sweep.study` = '{study}' and tags.`sweep.trial` = '{retries[0].number}'")
    assert len(runs) == 1 and runs[0].data.tags["sweep.retried_trial"] == str(killed.number)
    assert runs[0].data.tags["mlflow.parentRunId"] == summary.parent_run_id


# ---- pruning ----


@pytest.mark.slow
def test_a_trial_with_a_bad_learning_rate_is_pruned_before_its_last_epoch(data_dir, tmp_path):
    sweep = tmp_path / "prune.yaml"
    sweep.write_text("""
task: pubmedqa
overrides: [finetune.max_train_examples=48, finetune.max_eval_examples=40, finetune.max_length=64,
            finetune.epochs=3, trainer.progress_bar=false]
n_trials: 2
sampler: {type: random, seed: 0}
pruner: {type: median, n_startup_trials: 1, n_warmup_steps: 0}
space:
  finetune.lr: {type: categorical, choices: [5.0e-4, 1.0e-9]}
""")
    spec = load_sweep(sweep)
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    # Fixed order: the good learning rate sets the median, then the bad one is compared with it.
    study = optuna.create_study(study_name=spec.study, storage=storage, direction="maximize")
    study.enqueue_trial({"finetune.lr": 5e-4})
    study.enqueue_trial({"finetune.lr": 1e-9})
    summary = run_sweep(spec, storage, paths=SweepPaths(str(data_dir), str(tmp_path)))

    good, bad = trials_of(spec.study, storage)
    assert good.state == TrialState.COMPLETE and len(good.intermediate_values) == 3
    assert bad.params == {"finetune.lr": 1e-9} and bad.state == TrialState.PRUNED
    assert len(bad.intermediate_values) < 3
    client = MlflowClient(summary.tracking_uri)
    [bad_run] = [client.get_run(run_id) for run_id in bad.user_attrs["mlflow_run_ids"]]
    assert bad_run.info.status == "KILLED" and bad_run.data.tags["sweep.trial_state"] == "PRUNED"


# ---- one micro sweep on the default SQLite storage, read back ----


@pytest.fixture(scope="module")
def micro_sweep(data_dir, tmp_path_factory) -> tuple[Path, str]:
    work_dir = tmp_path_factory.mktemp("sweep-work")
    study = unique("micro")
    with pytest.MonkeyPatch.context() as patch:  # see no_leaked_tracking_uri
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        code = main(["sweep", str(MICRO), "--study", study, "--n-trials", "2", "--data-dir", str(data_dir),
                     "--work-dir", str(work_dir)])
    assert code == 0
    return work_dir, study


def _http(url: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"{}")


@pytest.fixture(scope="module")
def ui_server(micro_sweep) -> tuple[str, str]:
    """One `bioablate ui` over the micro sweep's work directory, shared by the UI tests (a server takes
    ~20 s to start on a loaded CI machine); returns its base URL and what it printed on start. Started
    without pytest's and CI's variables: MLflow turns telemetry off by itself when it sees them, and a test
    below checks that the server is told to keep it off."""
    work_dir, _ = micro_sweep
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_CURRENT_TEST", "CI", "GITHUB_ACTIONS",
                                                            "MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK")}
    server = subprocess.Popen([sys.executable, "-m", "ablations.cli", "ui", "--work-dir", str(work_dir),
                               "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              start_new_session=True, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):  # the server takes a few seconds to start
            assert server.poll() is None, "the MLflow server exited"
            try:
                urllib.request.urlopen(f"{base}/health", timeout=5).close()
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.5)
        # `ui` prints its notes (flushed) before it becomes the server: they are all in the pipe by now
        os.set_blocking(server.stdout.fileno(), False)
        printed = (server.stdout.read() or b"").decode()
        os.set_blocking(server.stdout.fileno(), True)
        yield base, printed
    finally:
        stop_group(server)


@pytest.mark.slow
def test_ui_serves_the_sweep_parent_and_child_runs_over_rest_on_loopback(micro_sweep, ui_server):
    _, study = micro_sweep
    base, printed = ui_server
    api = f"{base}/api/2.0/mlflow"
    experiment = _http(f"{api}/experiments/get-by-name?experiment_name=sweeps")["experiment"]
    search = {"experiment_ids": [experiment["experiment_id"]]}
    [parent] = _http(f"{api}/runs/search",
                     {**search, "filter": f"tags.kind = 'sweep' and tags.`sweep.study` = '{study}'"})["runs"]
    parent_id = parent["info"]["run_id"]
    children = _http(f"{api}/runs/search",
                     {**search, "filter": f"tags.`mlflow.parentRunId` = '{parent_id}'"})["runs"]
    tags = [{t["key"]: t["value"] for t in run["data"]["tags"]} for run in children]
    assert sorted(t["sweep.trial"] for t in tags) == ["0", "1"]
    assert [t["sweep.trial_state"] for t in tags] == ["COMPLETE", "COMPLETE"]  # median needs 2 first
    for run in children:
        metrics = {m["key"] for m in run["data"]["metrics"]}
        assert {"sweep.value", "dev/score", "best_dev/score", "test/score"} <= metrics
        query = urllib.parse.urlencode({"run_id": run["info"]["run_id"], "metric_key": "dev/score"})
        assert len(_http(f"{api}/metrics/get-history?{query}")["metrics"]) == 2  # one per epoch
    parent_metrics = {m["key"]: m["value"] for m in parent["data"]["metrics"]}
    assert parent["info"]["status"] == "FINISHED" and "sweep.best_value" in parent_metrics
    assert base in printed and "optuna-dashboard 'sqlite:///" in printed


def test_best_exports_a_config_layer_finetune_accepts(micro_sweep, capsys):
    work_dir, study = micro_sweep
    assert main(["sweep", "best", study, "--work-dir", str(work_dir)]) == 0
    printed = capsys.readouterr().out
    layer = OmegaConf.load(work_dir / "sweeps" / f"{study}.yaml")
    best = optuna.load_study(study_name=study, storage=f"sqlite:///{work_dir / 'optuna.db'}").best_trial
    assert f"# best trial {best.number} of study '{study}'" in printed
    assert layer.task == "pubmedqa" and f"bioablate finetune --config {work_dir / 'sweeps' / study}.yaml" in printed
    cfg = build_config("micro", config_files=[work_dir / "sweeps" / f"{study}.yaml"])
    assert cfg.finetune.lr == best.params["finetune.lr"] and cfg.finetune.max_train_examples == 48


def test_rerunning_a_finished_study_runs_nothing_new(micro_sweep, data_dir):
    work_dir, study = micro_sweep
    client = MlflowClient(f"sqlite:///{work_dir / 'mlruns.db'}")
    experiment = client.get_experiment_by_name("sweeps").experiment_id
    before = len(client.search_runs([experiment]))
    summary = run_sweep(load_sweep(MICRO, study=study, n_trials=2), paths=SweepPaths(str(data_dir), str(work_dir)))
    assert summary.counts.get("COMPLETE", 0) + summary.counts.get("PRUNED", 0) == 2 and len(
        trials_of(study, f"sqlite:///{work_dir / 'optuna.db'}")) == 2
    assert len(client.search_runs([experiment])) == before


# ---- SQLite is for one process ----


def test_sqlite_used_by_a_second_process_is_an_error_pointing_to_a_server_database(micro_sweep, data_dir):
    work_dir, study = micro_sweep
    storage = f"sqlite:///{work_dir / 'optuna.db'}"
    with sqlite_single_process(storage):  # as another process running the study would hold it
        with pytest.raises(ConfigError, match="in use by another process.*postgresql"):
            run_sweep(load_sweep(MICRO, study=study, n_trials=2), storage,
                      paths=SweepPaths(str(data_dir), str(work_dir)))


def test_sqlite_with_several_workers_is_refused(capsys, data_dir, tmp_path):
    code = main(["sweep", str(MICRO), "--workers", "2", "--work-dir", str(tmp_path), "--data-dir",
                 str(data_dir)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "SQLite storage" in err and "--workers 2 needs a server database" in err and "postgresql" in err


# ---- mistakes in the sweep YAML: one line naming the file and the key ----

GOOD_SPACE = "space:\n  finetune.lr: {type: categorical, choices: [1.0e-5, 3.0e-5]}\n"


@pytest.mark.parametrize("text, fragments", [
    ("task: gad\nn_trials: 2\nsamplr: {type: tpe}\n" + GOOD_SPACE, ["unknown key 'samplr'", "valid keys"]),
    ("task: gad\nn_trials: 2\nspace:\n  finetune.lr: {type: uniform, low: 0, high: 1}\n",
     ["space.finetune.lr", "unknown distribution type 'uniform'", "categorical, int, float"]),
    ("task: gad\nn_trials: 2\n", ["missing required key 'space'"]),
    ("task: gad\nn_trials: 2\nsampler: {type: cmaes}\n" + GOOD_SPACE, ["unknown sampler 'cmaes'; known: grid"]),
    ("task: gad\nn_trials: 2\npruner: median-ish\n" + GOOD_SPACE, ["unknown pruner 'median-ish'; known: hyperband"]),
    ("task: gad\nn_trials: 2\nspace:\n  finetune.lrr: {type: float, low: 1.0e-5, high: 1.0e-3, log: true}\n",
     ["key 'finetune.lrr'", "valid keys under 'finetune'"]),
    ("task: gad\nsampler: grid\nspace:\n  finetune.dropout: {type: float, low: 0.0, high: 0.3}\n",
     ["space.finetune.dropout", "grid sampler needs categorical"]),
    ("task: gad\nn_trials: 2\nspace:\n  finetune.dropout: {type: float, low: 0.0, high: 1.5}\n",  # the high end
     ["finetune.dropout = 1.5: must be >= 0 and < 1"]),
    ("task: gad\nn_trials: 2\nspace:\n  finetune.epochs: {type: categorical, choices: [2, 0, 3]}\n",
     ["finetune.epochs = 0: must be >= 1"]),
    ("task: gad\nn_trials: 2\noverrides: [trainer.devices=2]\n" + GOOD_SPACE,
     ["trainer.devices=2", "DDP inside a trial is not supported", "--workers"]),
])
def test_bad_sweep_yaml_is_a_one_line_error_naming_file_and_key(text, fragments, tmp_path, capsys):
    sweep = tmp_path / "bad.yaml"
    sweep.write_text(text)
    code = main(["sweep", str(sweep), "--work-dir", str(tmp_path)])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"bioablate: error: {sweep}")
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


@pytest.mark.slow
def test_ui_serves_the_classic_view_with_telemetry_off(ui_server):
    """The server is told to keep telemetry off (the UI asks it whether to send events), and the printed
    address opens MLflow's classic view."""
    base, printed = ui_server
    assert _http(f"{base}/ajax-api/3.0/mlflow/ui-telemetry", {"records": []}) == {"status": "disabled"}
    assert _http(f"{base}/ajax-api/3.0/mlflow/ui-telemetry")["disable_ui_telemetry"] is True
    assert f"{base}/#/experiments?workflowType=machine_learning" in printed  # not MLflow 3's default GenAI view


def test_ui_refuses_a_non_loopback_host_unless_allowed(capsys, tmp_path):
    code = main(["ui", "--host", "0.0.0.0", "--work-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "refusing to listen on 0.0.0.0" in err and "--allow-remote" in err


def test_the_readme_postgresql_form_gets_the_installed_driver_as_a_tracking_uri_does(postgres_url, tmp_path):
    """`--storage postgresql://...` (the README's form, no driver) reaches the server through psycopg2, as
    `--tracking-uri postgresql://...` does: it said "its driver is not installed (psycopg)"."""
    from sqlalchemy.engine import make_url

    from ablations.places import resolve_tracking_uri
    from ablations.sweep import study_storage

    plain = make_url(postgres_url).set(drivername="postgresql").render_as_string(hide_password=False)
    assert plain.startswith("postgresql://")
    assert study_storage(plain, tmp_path) == resolve_tracking_uri(OmegaConf.create({"tracking_uri": plain}))
    assert study_storage(plain, tmp_path).startswith("postgresql+psycopg2://")
    study = unique("readme-form")
    done = bioablate_in_process("sweep", "best", study, "--storage", plain, "--work-dir", str(tmp_path), cwd=tmp_path)
    [line] = done.stderr.strip().splitlines()
    assert done.returncode == 2 and line.startswith(f"bioablate: error: no study '{study}' in postgresql+psycopg2://")

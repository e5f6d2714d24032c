"""A password in a tracking URI or a study storage URL stays with the user: a sweep trial logged to a real
PostgreSQL through URLs with the password in them leaves it in no MLflow param, tag, dataset input or
artifact, in no file of the work directory (the `config.yaml` artifacts, the model card), in no Optuna
attribute and in nothing the command prints; a URL it shows has the password masked (`user:***@host`).

Needs `BIOABLATE_TEST_POSTGRES` (`.ci/run` starts a server on 127.0.0.1); each run gets fresh databases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import optuna
import pytest
import sqlalchemy
from mlflow.tracking import MlflowClient

from bioablate_core.packaged import resolve_config

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh_databases(postgres_url):
    """Two new databases on the test server (an MLflow store and an Optuna storage: both keep an
    `alembic_version` table), as URLs with the password in them; dropped afterwards."""
    names = [f"secrets_{uuid.uuid4().hex[:10]}" for _ in range(2)]
    admin = sqlalchemy.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        for name in names:
            connection.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    base = sqlalchemy.engine.make_url(postgres_url)
    yield [base.set(database=name).render_as_string(hide_password=False) for name in names]
    with admin.connect() as connection:
        for name in names:
            connection.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def leaks(text: str, password: str, user: str) -> bool:
    """The password is in `text` as a URL's userinfo (`:password@`) or, where it differs from the user name
    (which a masked URL shows), anywhere."""
    return f":{password}@" in text or (password != user and password in text)


def test_a_password_in_the_tracking_uri_and_the_storage_is_never_written_or_printed(fresh_databases, data_dir,
                                                                                      tmp_path):
    tracking_uri, storage = fresh_databases
    url = sqlalchemy.engine.make_url(tracking_uri)
    password, user = url.password, url.username
    assert password, "the test server's URL names no password: nothing to check"
    study = f"secrets-{uuid.uuid4().hex[:8]}"
    work = tmp_path / "work"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MLFLOW_TRACKING_URI", None)
    done = subprocess.run([sys.executable, "-m", "ablations.cli", "sweep", str(resolve_config("micro", "sweep")),
                           "--study", study, "--n-trials", "1", "--storage", storage, "--tracking-uri",
                           tracking_uri, "--work-dir", str(work), "--data-dir", str(data_dir)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    printed = done.stdout + done.stderr
    assert done.returncode == 0, printed
    assert not leaks(printed, password, user), printed
    assert f"{user}:***@" in printed  # the URLs are shown, masked

    client = MlflowClient(tracking_uri)
    runs = [run for experiment in client.search_experiments()
            for run in client.search_runs([experiment.experiment_id])]
    assert {run.data.tags.get("kind") for run in runs} >= {"sweep", "finetune"}  # the parent and its trial
    for run in runs:
        stored = json.dumps([run.data.params, run.data.tags, run.info.run_name,
                             [(d.dataset.name, d.dataset.source) for d in run.inputs.dataset_inputs]])
        assert not leaks(stored, password, user), stored

    files = [path for path in work.rglob("*") if path.is_file()]
    carded = [path for path in files if path.name == "README.md" and path.parent.name == "model"]
    configs = [path for path in files if path.name == "config.yaml"]
    assert carded and len(configs) == 2  # the trial's card, its config under runs/ and as an artifact
    for path in files:
        assert not leaks(path.read_bytes().decode("utf-8", "replace"), password, user), path

    loaded = optuna.load_study(study_name=study, storage=storage)
    attrs = [loaded.user_attrs, [(t.user_attrs, t.system_attrs) for t in loaded.get_trials(deepcopy=False)]]
    assert not leaks(json.dumps(attrs, default=str), password, user)

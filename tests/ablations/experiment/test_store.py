"""Store: runs found by (MLflow experiment, fingerprint) in a real SQLite tracking store."""

from __future__ import annotations

import time

import pytest
from mlflow.tracking import MlflowClient

from ablations.experiment.store import Store


@pytest.fixture
def uri(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'mlruns.db'}"


def add_run(client: MlflowClient, experiment: str, fingerprint: str) -> str:
    found = client.get_experiment_by_name(experiment)
    experiment_id = found.experiment_id if found else client.create_experiment(experiment)
    run_id = client.create_run(experiment_id, tags={"fingerprint": fingerprint}).info.run_id
    time.sleep(0.002)  # start times in ms: the next run is strictly newer
    return run_id


class CountingClient:
    """The store's own client, counting the runs its searches return."""

    def __init__(self, client):
        self.client, self.runs_read = client, 0

    def __getattr__(self, name):
        return getattr(self.client, name)

    def search_runs(self, *args, **kwargs):
        page = self.client.search_runs(*args, **kwargs)
        self.runs_read += len(page)
        return page


def test_the_newest_run_of_a_fingerprint_is_found_and_unknown_ones_are_none(uri):
    client = MlflowClient(uri)
    add_run(client, "finetune", "a")
    newer = add_run(client, "finetune", "a")
    other = add_run(client, "pretrain", "a")
    store = Store(uri)
    assert store.find("finetune", "a").info.run_id == newer
    assert store.find("pretrain", "a").info.run_id == other
    assert store.find("finetune", "b") is None
    assert store.find("no-such-experiment", "a") is None


def test_a_lookup_reads_only_its_run_however_large_the_store(uri):
    client = MlflowClient(uri)
    for n in range(40):
        add_run(client, "finetune", f"other{n}")
    wanted = add_run(client, "finetune", "wanted")
    store = Store(uri)
    store.client = counting = CountingClient(store.client)
    assert store.find("finetune", "wanted").info.run_id == wanted
    assert store.find("finetune", "wanted").info.run_id == wanted  # remembered: no second query
    assert counting.runs_read == 1


def test_runs_added_later_are_seen_after_forget(uri):
    client = MlflowClient(uri)
    store = Store(uri)
    assert store.find("finetune", "a") is None  # no experiment yet
    first = add_run(client, "finetune", "a")
    assert store.find("finetune", "a") is None  # remembered
    store.forget("finetune")
    assert store.find("finetune", "a").info.run_id == first
    newer = add_run(client, "finetune", "a")
    store.forget("pretrain")  # another experiment's: this one stays remembered
    assert store.find("finetune", "a").info.run_id == first
    store.forget("finetune")
    assert store.find("finetune", "a").info.run_id == newer

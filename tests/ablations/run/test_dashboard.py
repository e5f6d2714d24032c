"""ablations/run/dashboard.py against a real MLflow store: experiment descriptions and the saved runs-list view
(set once, never over the user's own), the run's details artifact, dataset inputs and where to browse a run.
What the browser shows of them: tests/ablations/serve/test_mlflow_app.py."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from types import SimpleNamespace

from mlflow.tracking import MlflowClient

from ablations.run.dashboard import (
    NOTE_TAG,
    VIEW_TAG,
    browse_lines,
    log_datasets,
    run_name,
    saved_view,
    split_digest,
    write_details,
)
from ablations.run.tracking import Tracker


def test_an_experiment_is_described_once_and_a_users_own_description_is_kept(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    tracker = Tracker(uri, "finetune", kind="finetune")
    client = MlflowClient(uri)
    tags = client.get_experiment(tracker.experiment_id).tags
    assert tags[NOTE_TAG].startswith("Fine-tuning runs of bioablate") and "test/score" in tags[NOTE_TAG]
    view = json.loads(tags[VIEW_TAG])
    assert view["name"] == "bioablate" and isinstance(view["createdAt"], int)
    assert "metrics.`test/score`" in json.loads(view["state"])["selectedColumns"]

    client.set_experiment_tag(tracker.experiment_id, NOTE_TAG, "my own notes")
    client.delete_experiment_tag(tracker.experiment_id, VIEW_TAG)
    Tracker(uri, "finetune", kind="finetune")  # the next run's tracker
    tags = client.get_experiment(tracker.experiment_id).tags
    assert tags[NOTE_TAG] == "my own notes" and VIEW_TAG in tags
    assert NOTE_TAG not in client.get_experiment(Tracker(uri, "elsewhere").experiment_id).tags  # no kind


def test_the_saved_view_names_its_columns_as_mlflows_runs_list_does():
    state = json.loads(json.loads(saved_view("pretrain", now_ms=5))["state"])
    assert state["selectedColumns"][:2] == ["tags.`corpus`", "tags.`vocab`"]
    assert "metrics.`train/loss`" in state["selectedColumns"]
    assert state["orderByKey"] == "attributes.start_time" and state["orderByAsc"] is False
    assert state["searchFilter"] == "tags.kind = 'pretrain'"  # not the parent runs they are nested under


def test_a_runs_name_says_its_varied_choices_model_profile_and_seed():
    cfg = SimpleNamespace(model=SimpleNamespace(name_or_path="general-minilm"), profile="mini", seed=1)
    gad = SimpleNamespace(name="gad")
    assert run_name(cfg, gad, {"variant": "linear"}) == "gad-linear-general-minilm-mini-s1"
    assert run_name(cfg, gad, {"variant": "bilstm"}) != run_name(cfg, gad, {"variant": "linear"})
    assert run_name(cfg, gad, {"variant": "linear", "model_key": "pubmedbert"}) == "gad-linear-pubmedbert-mini-s1"
    assert run_name(cfg, gad, {}) == "gad-general-minilm-mini-s1"  # `bioablate finetune`: nothing varied


def test_fine_tuning_runs_are_grouped_by_task_and_profile():
    """A group's mean (the runs list's group row) never mixes a micro run with a mini one."""
    state = json.loads(json.loads(saved_view("finetune", now_ms=5))["state"])
    assert [key["groupByData"] for key in state["groupBy"]["groupByKeys"]] == ["task", "profile"]


def test_details_hold_every_key_and_a_per_class_table(tmp_path):
    dev = [{"score": 0.5, "f1_PAR": 0.4, "precision_PAR": 0.5, "recall_PAR": 0.3, "support_PAR": 10.0},
           {"score": 0.6, "f1_PAR": 0.6, "precision_PAR": 0.6, "recall_PAR": 0.6, "support_PAR": 10.0}]
    test = {"score": 0.55, "f1_PAR": 0.5, "precision_PAR": 0.5, "recall_PAR": 0.5, "support_PAR": 12.0,
            "f1_INT": 0.6, "support_INT": 3.0}
    files = write_details(tmp_path / "metrics", dev, 1, test)
    assert [f.name for f in files] == ["details.json", "test_per_class.csv"]
    details = json.loads(files[0].read_text())
    assert details == {"test": test, "best_epoch": 1, "best_dev": dev[1], "dev": dev}
    rows = list(csv.reader(files[1].open()))
    assert rows == [["class", "f1", "precision", "recall", "support"], ["PAR", "0.5", "0.5", "0.5", "12.0"],
                    ["INT", "0.6", "", "", "3.0"]]
    # a metric without per-class keys: no table
    assert [f.name for f in write_details(tmp_path / "other", [], 0, {"score": 0.5, "n": 3.0})] == ["details.json"]


def test_datasets_are_the_runs_inputs_with_the_examples_they_used(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    tracker = Tracker(uri, "finetune")
    run_id = tracker.create("a-run", {}, {})
    examples = {split: [SimpleNamespace(id=f"{split}-{i}") for i in range(n)]
                for split, n in (("train", 4), ("dev", 2), ("test", 3))}
    log_datasets(tracker.client, run_id, "gad", "<data_dir>/GAD", "fp0", examples)
    inputs = MlflowClient(uri).get_run(run_id).inputs.dataset_inputs
    seen = {i.dataset.name: (json.loads(i.dataset.profile)["num_rows"], i.tags[0].value, i.dataset.digest)
            for i in inputs}
    assert {json.loads(i.dataset.source)["uri"] for i in inputs} == {"<data_dir>/GAD"}
    assert {name: rows_context for name, (*rows_context, _) in seen.items()} == {
        "gad/train": [4, "training"], "gad/dev": [2, "validation"], "gad/test": [3, "test"]}
    assert seen["gad/train"][2] == split_digest("fp0", "train", [f"train-{i}" for i in range(4)])
    # another sample of the same split, or another version of the data, is another digest
    assert split_digest("fp0", "train", ["train-0"]) != seen["gad/train"][2] != split_digest("fp1", "train", [
        f"train-{i}" for i in range(4)])


def test_where_to_browse_a_run(tmp_path):
    path = "#/experiments/3/runs/abc"
    assert browse_lines("http://cluster:5000/", "3", "abc", tmp_path) == [f"  MLflow run: http://cluster:5000/{path}"]
    local = browse_lines(f"sqlite:///{tmp_path / 'mlruns.db'}", "3", "abc", tmp_path)
    assert local[1] == f"  browse: bioablate ui --work-dir {tmp_path}  then open http://127.0.0.1:5000/{path}"
    other = browse_lines("sqlite:////elsewhere/x.db", "3", "abc", Path("/work"))
    assert other[1].startswith("  browse: bioablate ui --tracking-uri sqlite:////elsewhere/x.db  then open")

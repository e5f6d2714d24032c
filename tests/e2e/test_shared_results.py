"""What a researcher shares, a table and a tracking store, says how the runs were made, not where: an
experiment over a model folder, run under micro, leaves no absolute path (the model folder, the work, data
or checkout directory) and no host name in its rendered tables, in the table files and their artifacts,
or in any MLflow param, tag, run name or dataset input of its store. (MLflow's own artifact locations
are the local store's addresses, not results: not checked.)"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ablations.config import REPO_ROOT
from tests.cli import bioablate_in_process
from tests.hub_cache import tiny_bert

pytestmark = pytest.mark.slow


def machine_specific(text: str, places: list[Path]) -> list[str]:
    """The absolute places and the host name `text` holds."""
    found = [str(place) for place in places if str(place) in text]
    host = socket.gethostname()
    if re.search(rf"(?<![\w.-]){re.escape(host)}(?![\w-])", text):
        found.append(f"host name {host}")
    return found


def test_tables_and_store_hold_no_machine_path_or_host_name(tmp_path, data_dir):
    model = tiny_bert(tmp_path / "models" / "tinybin", data_dir / "vocab" / "bert-base-uncased" / "vocab.txt")
    experiment = tmp_path / "shared.yaml"
    experiment.write_text(f"name: shared\nprofile: micro\nmodels:\n  tiny: {{name_or_path: {model}}}\n"
                          "tasks: [gad]\nseeds: 1\ntable: {rows: task, columns: model}\n")
    work = tmp_path / "work"
    done = bioablate_in_process("run", str(experiment), "--work-dir", str(work), "--data-dir", str(data_dir),
                                cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rendered = bioablate_in_process("table", str(experiment), "--work-dir", str(work), "--data-dir", str(data_dir),
                                    cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    places = [tmp_path, data_dir.resolve(), REPO_ROOT, Path.home()]

    assert machine_specific(rendered.stdout, places) == []
    tables = work / "tables" / "shared-micro"
    assert "Runs: tinybin" in (tables / "table.md").read_text()  # the provenance footer names the model folder
    for name in ("table.md", "table.tex", "table.csv"):
        assert machine_specific((tables / name).read_text(encoding="utf-8"), places) == [], name

    client = MlflowClient(f"sqlite:///{work / 'mlruns.db'}")
    runs = [run for found in client.search_experiments()
            for run in client.search_runs([found.experiment_id])]
    assert {run.data.tags.get("kind") for run in runs} >= {"finetune", "experiment", "table"}
    for run in runs:
        stored = json.dumps([run.info.run_name, run.data.params, run.data.tags,
                             [(i.dataset.name, i.dataset.source) for i in run.inputs.dataset_inputs]])
        assert machine_specific(stored, places) == [], stored
    finetune = next(run for run in runs if run.data.tags.get("kind") == "finetune")
    assert finetune.data.params["model.name_or_path"] == "<local>/tinybin"
    assert (work / finetune.data.tags["model_dir"] / "bioablate.json").is_file()  # relative to the work dir
    for run in runs:  # the table run's files, as a reader of the store downloads them
        for artifact in client.list_artifacts(run.info.run_id):
            if artifact.path.endswith((".md", ".tex", ".csv", ".yaml", ".json")):
                text = Path(client.download_artifacts(run.info.run_id, artifact.path, str(tmp_path / "dl"))).read_text()
                assert machine_specific(text, places) == [], artifact.path

"""The study layer's functions, called as a notebook or a benchmark calls them (no argv): a real micro
fine-tuning run is computed, then reused by fingerprint; exported and used for predictions that agree
with what the run logged; an experiment is planned, run and tabled; mistakes are one-line ConfigErrors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ablations import api
from ablations.results import COMPUTED
from bioablate_core.errors import ConfigError
from datamodules.registry import get_dataset

FINETUNE = ["finetune.max_train_examples=24", "finetune.max_eval_examples=24", "finetune.epochs=1",
            "finetune.max_length=48", "trainer.progress_bar=false"]


@pytest.mark.slow
def test_finetune_is_reused_exported_and_predicts_what_the_run_logged(tmp_path: Path, data_dir: Path):
    cfg = api.config("micro", FINETUNE, task="biosses", data_dir=str(data_dir), work_dir=str(tmp_path))
    first = api.finetune(cfg)
    again = api.finetune(api.config("micro", FINETUNE, task="biosses", data_dir=str(data_dir),
                                    work_dir=str(tmp_path)))
    assert (first.reused, again.reused) == (False, True)
    assert again.run_id == first.run_id and again.test["score"] == pytest.approx(first.test["score"], rel=1e-6)

    model = tmp_path / "model"
    assert str(model) in api.export(first.fingerprint, model, work_dir=str(tmp_path))
    client = MlflowClient(first.tracking_uri)
    logged = json.loads(Path(client.download_artifacts(first.run_id, "test_predictions.jsonl", str(tmp_path))
                             ).read_text().splitlines()[0])
    instance = next(x for x in get_dataset("biosses").read(data_dir)["test"] if x.id == logged["id"])
    inputs, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inputs.write_text(json.dumps(dataclasses.asdict(instance)) + "\n")
    assert api.predict(model, inputs, output) == 1
    assert json.loads(output.read_text())["prediction"] == pytest.approx(logged["prediction"], abs=1e-5)


@pytest.mark.slow
def test_an_experiment_is_planned_run_and_tabled(tmp_path: Path, data_dir: Path):
    experiment_file = tmp_path / "two.yaml"
    experiment_file.write_text("name: api-two\ndescription: two cells\nprofile: micro\n"
                               "models:\n  random: {name_or_path: random-bert}\ntasks: [biosses]\nseeds: 1\n"
                               "vary:\n  lr: {key: finetune.lr, values: {low: 1.0e-5, high: 1.0e-4}}\n"
                               "table: {title: two, rows: task, columns: lr}\n")
    experiment = api.experiment(experiment_file, overrides=FINETUNE, data_dir=str(data_dir), work_dir=str(tmp_path))
    planned = list(api.plan(experiment))
    assert sum(line.split()[:1] == ["compute"] for line in planned) == 2, planned
    summary = api.run(experiment)
    assert summary.ok and summary.count(COMPUTED) == 2, summary.lines()
    table = api.table(experiment, "csv")
    rows = [line for line in table.text.splitlines()[1:] if line.startswith("biosses")]
    assert len(rows) == 2 and all(row.split(",")[4] for row in rows), table.text  # a mean in each cell
    assert (table.out_dir / "table.csv").read_text() == table.text


def test_run_refuses_impossible_parallelism_in_one_line(tmp_path: Path):
    with pytest.raises(ConfigError, match="--runs-per-device applies without --ddp"):
        api.run(None, devices=2, ddp=True, runs_per_device=2)
    with pytest.raises(ConfigError, match="--devices must be at least 1"):
        api.run(None, devices=0)

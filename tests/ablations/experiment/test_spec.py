"""The experiment YAML's `datasets:` list: user dataset files, relative to the experiment file, usable as
tasks and carried into every run's config; a mistake in one names the experiment file and the entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablations import results
from ablations.experiment import load_experiment
from core.errors import ConfigError
from datamodules.blurb import BLURB_DATASETS

DATASET = """name: user-sentiment
format: tsv
path: data
files: {train: train.tsv, dev: dev.tsv, test: test.tsv}
labels: [pos, neg]
"""
EXPERIMENT = """name: user-data
datasets: [datasets/sentiment.yaml]
models:
  random: {name_or_path: random-bert}
tasks: TASKS
table: {rows: task, columns: model}
"""


def write_experiment(folder: Path, tasks: str = "[user-sentiment, gad]", dataset: str = DATASET) -> Path:
    data = folder / "datasets" / "data"
    data.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        (data / f"{split}.tsv").write_text("".join(f"{word} {split} sentence {i}\t{label}\n" for i in range(6)
                                                   for word, label in (("good", "pos"), ("bad", "neg"))))
    (folder / "datasets" / "sentiment.yaml").write_text(dataset)
    path = folder / "exp.yaml"
    path.write_text(EXPERIMENT.replace("TASKS", tasks))
    return path


def test_a_user_dataset_of_the_experiment_is_a_task_of_every_run(tmp_path, data_dir):
    experiment = load_experiment(write_experiment(tmp_path), profile="micro", data_dir=str(data_dir))
    assert experiment.tasks == ["user-sentiment", "gad"]
    cell = experiment.cells()[0]
    cfg = experiment.finetune_config(cell, "random-bert")
    assert (cfg.task, list(cfg.datasets)) == ("user-sentiment", [str(tmp_path / "datasets" / "sentiment.yaml")])


def test_blurb_means_the_13_built_in_datasets_even_beside_user_ones(tmp_path, data_dir):
    experiment = load_experiment(write_experiment(tmp_path, tasks="blurb"), profile="base", data_dir=str(data_dir))
    assert experiment.tasks == [spec.name for spec in BLURB_DATASETS]


@pytest.mark.parametrize("dataset,fragments", [
    (DATASET.replace("format: tsv", "format: tssv"), ["datasets[0]:", "sentiment.yaml: unknown format 'tssv'"]),
    (None, ["datasets[0]:", "dataset file not found"]),
])
def test_a_mistake_in_a_dataset_file_names_the_experiment_and_the_entry(tmp_path, dataset, fragments):
    path = write_experiment(tmp_path, dataset=dataset or DATASET)
    if dataset is None:
        (tmp_path / "datasets" / "sentiment.yaml").unlink()
    with pytest.raises(ConfigError) as error:
        load_experiment(path, profile="micro")
    message = str(error.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


@pytest.mark.slow
def test_an_experiment_runs_on_its_user_dataset(tmp_path, data_dir):
    from ablations.runner import run_experiment

    experiment = load_experiment(write_experiment(tmp_path, tasks="[user-sentiment]"), profile="micro",
                                 data_dir=str(data_dir), work_dir=str(tmp_path / "work"))
    outcome = run_experiment(experiment, echo=lambda _: None)
    assert outcome.ok and outcome.count(results.COMPUTED) == 1

"""Issue 26 item 2, end to end on user dataset YAMLs written from the staged data, in real MLflow stores: a
train + test file fine-tunes with a dev carved from train; `dev: none` trains a fixed number of epochs
and tests the last epoch's weights; an experiment over folds (train/test pairs, k folds over one file)
runs every fold and its table shows the mean over folds; a CoNLL file without labels runs on the
entity types of its training split, logged on the run."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from mlflow.tracking import MlflowClient

from ablations.cli import main
from ablations.config import build_config
from ablations.experiment import collect, load_experiment
from ablations.results import FINISHED
from ablations.run.finetune import run_finetune
from ablations.sweep.spec import load_sweep
from ablations.tables.stats import table_data
from bioablate_core.errors import ConfigError
from tests.user_data import GAD_RE, gad_lines, two_type_conll, write

FAST = ["finetune.max_train_examples=40", "finetune.max_eval_examples=24", "finetune.epochs=2",
        "finetune.max_length=64", "trainer.progress_bar=false"]


def ner_yaml(data_dir: Path, folder: Path, name: str, extra: str) -> Path:
    """BC5CDR sentences with Chemical and Disease tags, train + test only, no labels."""
    write(folder / "data" / "train.txt", two_type_conll(data_dir, "train", 0, 120))
    write(folder / "data" / "test.txt", two_type_conll(data_dir, "test", 0, 24))
    return write(folder / f"{name}.yaml", f"name: {name}\nformat: conll\npath: data\n"
                                          f"files: {{train: train.txt, test: test.txt}}\n{extra}")


def micro(task: str, yaml: Path, work: Path, data_dir: Path, *extra: str):
    return build_config("micro", [*FAST, f"datasets=[{yaml}]", *extra], task=task, data_dir=str(data_dir),
                        work_dir=str(work))


def test_train_and_test_only_fine_tunes_on_a_carved_dev(data_dir, tmp_path):
    yaml = ner_yaml(data_dir, tmp_path, "user-carved-run", "")
    result = run_finetune(micro("user-carved-run", yaml, tmp_path / "work", data_dir))
    client = MlflowClient(result.tracking_uri)
    run = client.get_run(result.run_id)
    assert run.info.status == "FINISHED" and run.data.tags["epoch_selection"] == "best dev"
    history = [m.value for m in client.get_metric_history(result.run_id, "dev/score")]
    assert len(history) == 2 and result.best_dev["score"] == pytest.approx(max(history))
    assert run.data.tags["tested_epoch"] == run.data.tags["best_epoch"] == str(history.index(max(history)))
    inputs = {i.dataset.name: json.loads(i.dataset.profile)["num_rows"] for i in run.inputs.dataset_inputs}
    # 120 training sentences: a seeded tenth (12) is dev, 40 of the other 108 train
    assert inputs == {"user-carved-run/train": 40, "user-carved-run/dev": 12, "user-carved-run/test": 24}
    assert run.data.tags["labels"] == "Chemical, Disease" and run.data.tags["labels_from"] == "train.txt"


class Weights(pl.Callback):
    """The weights at the end of every training epoch and those the test split is scored with."""

    def __init__(self):
        self.epochs: list[dict[str, torch.Tensor]] = []
        self.tested: dict[str, torch.Tensor] = {}

    @staticmethod
    def _copy(module: pl.LightningModule) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in module.state_dict().items()}

    def on_train_epoch_end(self, trainer, pl_module):
        self.epochs.append(self._copy(pl_module))

    def on_test_start(self, trainer, pl_module):
        self.tested = self._copy(pl_module)


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_dev_none_trains_a_fixed_number_of_epochs_and_tests_the_last(data_dir, tmp_path):
    yaml = ner_yaml(data_dir, tmp_path, "user-nodev-run", "dev: none\n")
    weights = Weights()
    result = run_finetune(micro("user-nodev-run", yaml, tmp_path / "work", data_dir, "finetune.epochs=3",
                                "keep_model=true"), callbacks=[weights])
    client = MlflowClient(result.tracking_uri)
    run = client.get_run(result.run_id)
    assert run.info.status == "FINISHED" and result.best_dev == {} and result.test
    assert len(weights.epochs) == 3 and _same(weights.tested, weights.epochs[2])
    assert not _same(weights.tested, weights.epochs[1]) and not _same(weights.tested, weights.epochs[0])
    tags = run.data.tags
    assert (tags["tested_epoch"], tags["epoch_selection"]) == ("2", "last (dev: none)") and "best_epoch" not in tags
    assert not [k for k in run.data.metrics if k.startswith(("dev/", "best_dev/"))]
    assert len(client.get_metric_history(result.run_id, "train/loss_epoch")) == 3  # one mean per epoch
    assert {i.dataset.name for i in run.inputs.dataset_inputs} == {"user-nodev-run/train", "user-nodev-run/test"}
    artifacts = Path(client.download_artifacts(result.run_id, "metrics", str(tmp_path / "dl")))
    details = json.loads((artifacts / "details.json").read_text())
    assert (details["best_epoch"], details["best_dev"], details["dev"]) == (2, {}, [])
    assert details["test"]["score"] == pytest.approx(run.data.metrics["test/score"])
    # the kept model is the tested one
    from safetensors.torch import load_file
    kept = load_file(str(tmp_path / "work" / tags["model_dir"] / "model.safetensors"))  # a transformers task model:
                                                                                        # bert.*
    encoder = {k[len("encoder."):]: v for k, v in weights.tested.items() if k.startswith("encoder.")}
    shared = [k for k in kept if k.startswith("bert.") and k[len("bert."):] in encoder]
    assert len(shared) > 10 and all(torch.equal(kept[k], encoder[k[len("bert."):]]) for k in shared)
    again = run_finetune(micro("user-nodev-run", yaml, tmp_path / "work", data_dir, "finetune.epochs=3",
                               "keep_model=true"))
    assert again.reused and again.best_dev == {} and again.test["score"] == pytest.approx(result.test["score"])


def test_a_sweep_refuses_a_dataset_without_dev(data_dir, tmp_path):
    yaml = ner_yaml(data_dir, tmp_path, "user-nodev-sweep", "dev: none\n")
    sweep = write(tmp_path / "sweep.yaml", "profile: micro\nn_trials: 1\nseeds: [1]\n"
                                           f"overrides: ['datasets=[{yaml}]']\n"
                                           "space: {finetune.lr: {type: categorical, choices: [1.0e-4]}}\n")
    with pytest.raises(ConfigError) as error:
        load_sweep(sweep, task="user-nodev-sweep")
    assert str(error.value).startswith(f"{sweep}: task user-nodev-sweep has no dev split (dev: none in {yaml})")
    assert "a sweep's objective is a dev metric" in str(error.value) and "\n" not in str(error.value)


EXPERIMENT = """
name: user-folds
datasets: [pairs.yaml, kfold.yaml]
models:
  random: {name_or_path: random-bert}
tasks: [user-pairs, user-kfold]
seeds: 1
overrides: {finetune: {max_train_examples: 24, max_eval_examples: 16}}
table: {title: "User folds", rows: task, columns: model}
"""


def test_an_experiment_over_user_folds_reports_the_mean_over_folds(data_dir, tmp_path, capsys):
    for k in (1, 2):  # two train/test pairs of GAD sentences, and three folds over one file
        write(tmp_path / "data" / f"{k}" / "train.tsv", "\n".join(gad_lines(data_dir, 200 * k, 200 * k + 60)) + "\n")
        write(tmp_path / "data" / f"{k}" / "test.tsv",
              "\n".join(gad_lines(data_dir, 200 * k + 60, 200 * k + 80)) + "\n")
    write(tmp_path / "data" / "all.tsv", "\n".join(gad_lines(data_dir, 0, 60)) + "\n")
    write(tmp_path / "pairs.yaml", "name: user-pairs\npath: data\nfolds:\n  - {train: 1/train.tsv, test: 1/test.tsv}\n"
                                   "  - {train: 2/train.tsv, test: 2/test.tsv}\n" + GAD_RE)
    write(tmp_path / "kfold.yaml", "name: user-kfold\npath: data\nfolds: {k: 3, seed: 4, file: all.tsv}\ndev: none\n"
                                   + GAD_RE)
    path = write(tmp_path / "folds.yaml", EXPERIMENT)
    work = tmp_path / "work"
    assert main(["run", str(path), "--work-dir", str(work), "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    experiment = load_experiment(path, data_dir=str(data_dir), work_dir=str(work))
    assert [c.name for c in experiment.cells()] == [
        *(f"random/user-pairs/s1/fold{k}" for k in (1, 2)), *(f"random/user-kfold/s1/fold{k}" for k in (1, 2, 3))]
    _, tracking_uri = experiment.store()
    client = MlflowClient(tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name("finetune").experiment_id], "tags.kind = 'finetune'")
    assert sorted(r.data.params["task"] for r in runs) == [
        "user-kfold@fold1", "user-kfold@fold2", "user-kfold@fold3", "user-pairs@fold1", "user-pairs@fold2"]
    assert {r.data.tags["epoch_selection"] for r in runs if r.data.params["task"].startswith("user-kfold")} == \
        {"last (dev: none)"}
    cells = collect(experiment)
    assert {c.status for c in cells} == {FINISHED} and len(cells) == 5
    table = (work / "tables" / "user-folds-micro" / "table.md").read_text()
    data = table_data(experiment.layout, cells)
    for task, folds in (("user-pairs", 2), ("user-kfold", 3)):
        scores = [100 * r.data.metrics["test/score"] for r in sorted(runs, key=lambda r: r.data.tags["fold"])
                  if r.data.params["task"].startswith(task + "@")]
        cell = data.cell(task, "random")
        assert cell.n == folds and cell.mean == pytest.approx(statistics.fmean(scores))
        assert cell.std == pytest.approx(statistics.stdev(scores))
        # mean ± sd to one decimal, the floor mark where it did not learn (a random BERT under micro), the count
        assert re.search(rf"\| {task} \| {cell.mean:.1f} ± {cell.std:.1f}⊥? \| {folds} \|", table), table
        assert f"Task '{task}' is cross-validated: each seed runs {folds} folds" in table
    assert "User folds" in out

"""Experiment's configs (ablations/experiment/definition.py): each built once and served as a fresh copy."""

from __future__ import annotations

from ablations.config import REPO_ROOT
from ablations.experiment import load_experiment


def quickstart(data_dir, **kwargs):
    return load_experiment(REPO_ROOT / "experiments" / "quickstart.yaml", profile="micro", data_dir=str(data_dir),
                           **kwargs)


def test_a_cells_config_built_again_is_equal_and_its_own_copy(data_dir):
    experiment = quickstart(data_dir)
    cell = experiment.cells()[0]
    first = experiment.finetune_config(cell, "random-bert")
    first.finetune.lr = 123.0  # a caller changing its config changes nobody else's
    again = experiment.finetune_config(cell, "random-bert")
    assert again is not first and again.finetune.lr != 123.0
    assert again == quickstart(data_dir).finetune_config(cell, "random-bert")  # what a fresh build gives
    assert again.seed == cell.seed and again.task == cell.run_task


def test_a_config_follows_what_changed_since_it_was_built(data_dir):
    """The memo is keyed by everything a build reads: a seed, a model path, the command line."""
    experiment = quickstart(data_dir)
    one, two = [c for c in experiment.cells() if c.seed in (1, 2)][:2]
    assert experiment.finetune_config(one, "random-bert").seed != experiment.finetune_config(two, "random-bert").seed
    assert experiment.finetune_config(one, "elsewhere").model.name_or_path == "elsewhere"
    experiment.cli_overrides = ["finetune.lr=0.5"]
    assert experiment.finetune_config(one, "random-bert").finetune.lr == 0.5

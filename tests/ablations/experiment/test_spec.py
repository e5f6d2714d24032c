"""Loading an experiment (ablations/experiment/spec.py) checks every cell's resolved config, ranges
included, so `--dry-run` refuses what every cell would fail on; names are safe folder names."""

from __future__ import annotations

import pytest

from ablations.cli import main
from ablations.experiment import load_experiment
from core.errors import ConfigError

EXPERIMENT = """
name: {name}
models:
  random: {{name_or_path: random-bert}}
tasks: [gad]
vary:
  dropout: {{key: finetune.dropout, values: [0.1, {dropout}]}}
overrides: {{finetune: {{epochs: {epochs}}}}}
table: {{rows: task, columns: dropout}}
"""


def write(tmp_path, name="ranges", dropout=0.2, epochs=1):
    path = tmp_path / "exp.yaml"
    path.write_text(EXPERIMENT.format(name=name, dropout=dropout, epochs=epochs))
    return path


def test_a_valid_experiment_loads(tmp_path, data_dir):
    experiment = load_experiment(write(tmp_path), data_dir=str(data_dir), work_dir=str(tmp_path / "w"))
    assert len(experiment.cells()) == 2


@pytest.mark.parametrize("kwargs,cli,message", [
    ({"epochs": 0}, [], "exp.yaml: overrides: finetune.epochs = 0: must be >= 1"),
    ({"dropout": 2}, [], "exp.yaml: vary: finetune.dropout = 2.0: must be >= 0 and < 1"),
    ({}, ["finetune.batch_size=0"], "command-line overrides: finetune.batch_size = 0: must be >= 1"),
    ({}, ["finetune.max_length=100000"], "above the maximum input length of model 'random-bert' (512"),
], ids=["yaml-overrides", "vary-value", "command-line", "max-length"])
def test_a_bad_value_in_any_layer_fails_at_load(tmp_path, data_dir, kwargs, cli, message):
    with pytest.raises(ConfigError) as error:
        load_experiment(write(tmp_path, **kwargs), overrides=cli, data_dir=str(data_dir),
                        work_dir=str(tmp_path / "w"))
    assert message in str(error.value)


def test_dry_run_refuses_a_bad_override_with_one_line(tmp_path, data_dir, capsys):
    code = main(["run", str(write(tmp_path)), "finetune.lr=-1", "--dry-run", "--data-dir", str(data_dir),
                 "--work-dir", str(tmp_path / "w")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "finetune.lr = -1.0: must be > 0" in err


@pytest.mark.parametrize("name", ["../../../../x", "a/b", ".hidden", "", "x y", "..", "a\\b"])
def test_an_unsafe_experiment_name_is_refused(tmp_path, data_dir, name):
    with pytest.raises(ConfigError, match="name: .* is not a safe folder name"):
        load_experiment(write(tmp_path, name=f"'{name}'"), data_dir=str(data_dir), work_dir=str(tmp_path / "w"))
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("name", ["table13_tagging", "v1.2-mini", "A_b-3"])
def test_safe_names_load(tmp_path, data_dir, name):
    assert load_experiment(write(tmp_path, name=name), data_dir=str(data_dir)).name == name

"""The sweep YAML's shapes (ablations/sweep/spec.py): a list where the schema takes a mapping, or the
reverse, for every key of the file, of a distribution and of every sampler's and pruner's options, is one
line naming the file and the key. The cases are generated from the schema dataclasses (tests/shapes.py),
so a new key (or an option a new Optuna adds) is covered by construction."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from ablations.sweep.spec import (
    DISTRIBUTIONS,
    PRUNERS,
    SAMPLERS,
    CategoricalSchema,
    RangeSchema,
    SweepSchema,
    load_sweep,
)
from bioablate_core.errors import ConfigError, UnknownNameError
from tests import shapes
from tests.cli import bioablate_in_process

RANGE = {"type": "float", "low": 1.0e-5, "high": 1.0e-4}
VALID = {"task": "gad", "n_trials": 2, "space": {"finetune.lr": RANGE}}


def _not_type(schema: type) -> list[shapes.Case]:
    """`type` picks the schema (a distribution, a sampler): a wrong one is an unknown name, not a shape."""
    return [c for c in shapes.cases(schema) if c.path[0] != "type"]


FILE_CASES = list(shapes.cases(SweepSchema))
# (where the entry sits, its valid content, the message's source after the file name, a case in it)
ENTRY_CASES = [
    *[(("space", "finetune.lr"), RANGE, "space.finetune.lr", c) for c in _not_type(RangeSchema)],
    *[(("space", "finetune.head"), {"type": "categorical", "choices": ["linear", "crf"]}, "space.finetune.head", c)
      for c in _not_type(CategoricalSchema)],
    *[(("sampler",), {"type": name}, f"sampler {name}", c) for name in SAMPLERS.names()
      for c in _not_type(SAMPLERS.get(name).options)],
    *[(("pruner",), {"type": name}, f"pruner {name}", c) for name in PRUNERS.names()
      for c in _not_type(PRUNERS.get(name).options)],
]


def write(tmp_path: Path, content: dict) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(content))
    return path


def test_every_distribution_and_method_schema_has_cases():
    assert set(DISTRIBUTIONS.names()) == {"categorical", "int", "float"}
    places = {source.split(" ")[0] for _, _, source, _ in ENTRY_CASES}
    assert places == {"space.finetune.lr", "space.finetune.head", "sampler", "pruner"}
    assert all(dataclasses.is_dataclass(SAMPLERS.get(name).options) for name in SAMPLERS.names())


@pytest.mark.parametrize("case", FILE_CASES, ids=[c.id for c in FILE_CASES])
def test_a_wrong_container_in_a_sweep_file_is_one_line(tmp_path, case):
    path = write(tmp_path, shapes.put(VALID, case.path, case.value))
    with pytest.raises(ConfigError) as error:
        load_sweep(path)
    assert str(error.value).startswith(f"{path}: {case.key}: expected ") and "\n" not in str(error.value)
    assert str(error.value).endswith(f", got {case.got}")


@pytest.mark.parametrize("where,entry,source,case", ENTRY_CASES,
                         ids=[f"{source}:{case.id}" for _, _, source, case in ENTRY_CASES])
def test_a_wrong_container_in_a_distribution_or_method_is_one_line(tmp_path, where, entry, source, case):
    content = shapes.put(VALID, where, shapes.put(entry, case.path, case.value))
    if where[0] == "space" and where[1] != "finetune.lr":
        content["space"].pop("finetune.lr")
    path = write(tmp_path, content)
    with pytest.raises(ConfigError) as error:
        load_sweep(path)
    assert str(error.value).startswith(f"{path}: {source}: {case.key}: expected ") and "\n" not in str(error.value)
    assert str(error.value).endswith(f", got {case.got}")


@pytest.mark.parametrize("change,message", [
    ({"space": ["finetune.lr", "finetune.epochs"]}, "space: expected a mapping, got a list"),
    ({"overrides": {"finetune.epochs": 3}}, "overrides: expected a list of strings, got a mapping"),
    ({"seeds": {"a": 1}}, "seeds: expected a list of whole numbers, got a mapping"),
], ids=["space-list", "overrides-mapping", "seeds-mapping"])
def test_the_command_line_refuses_a_wrong_container_before_any_trial(tmp_path, change, message):
    path = write(tmp_path, {**VALID, **change})
    out = bioablate_in_process("sweep", str(path), "--work-dir", str(tmp_path / "work"), cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip() == f"bioablate: error: {path}: {message}"
    assert not (tmp_path / "work" / "mlruns.db").exists() and not (tmp_path / "work" / "optuna.db").exists()


def test_datasets_registers_a_user_dataset_for_every_trial(tmp_path, data_dir: Path):
    """`sweep --datasets YAML`: the sweep's task may be a user dataset, and its YAML travels to every trial
    and worker as the `datasets` override; without it the task is unknown."""
    from tests.user_data import two_type_conll, write

    for split, name in (("train", "train"), ("devel", "dev"), ("test", "test")):
        write(tmp_path / "data" / f"{name}.tsv", two_type_conll(data_dir, split, 0, 40))
    dataset = write(tmp_path / "sweep-ner.yaml", "name: sweep-ner\nformat: conll\npath: data\n"
                    "files: {train: train.tsv, dev: dev.tsv, test: test.tsv}\n")
    with pytest.raises(UnknownNameError, match="unknown task 'sweep-ner'"):
        load_sweep("ner", task="sweep-ner")
    spec = load_sweep("ner", task="sweep-ner", datasets=[str(dataset)])
    assert spec.cli_overrides[-1] == f'datasets=["{dataset}"]' and spec.overrides[-1] == spec.cli_overrides[-1]

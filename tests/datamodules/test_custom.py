"""User datasets from YAML: the file is checked against its schema (one line naming the file and key), a
built-in or another file's name cannot be taken, and registering the same file again replaces it."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import ConfigError, DataFormatError
from datamodules.custom import register_from_yaml
from datamodules.registry import DATASETS, dataset_names, get_dataset

@pytest.fixture(autouse=True)
def forget_user_datasets():
    """Unregister what a test registers: other tests in this process read every registered dataset
    (e.g. pretraining's evaluation_pmids), and some of these are broken on purpose."""
    before = set(DATASETS)
    yield
    for name in set(DATASETS) - before:
        DATASETS.unregister(name)


GOOD = "format: tsv\npath: data\nfiles: {train: train.tsv, dev: dev.tsv, test: test.tsv}\nlabels: [pos, neg]\n"


def write_dataset(folder: Path, name: str, body: str = GOOD, file: str | None = None) -> Path:
    (folder / "data").mkdir(exist_ok=True)
    for split in ("train", "dev", "test"):
        (folder / "data" / f"{split}.tsv").write_text(f"a {split} sentence\tpos\nanother one\tneg\n")
    path = folder / (file or f"{name}.yaml")
    path.write_text(f"name: {name}\n{body}")
    return path


def test_a_tsv_file_becomes_a_classification_task(tmp_path):
    spec = register_from_yaml(write_dataset(tmp_path, "custom-tsv"))
    assert get_dataset("custom-tsv") is spec and "custom-tsv" in dataset_names("classification")
    assert (spec.task_type, spec.metric, spec.labels, spec.max_length) == ("classification", "accuracy",
                                                                          ("pos", "neg"), 512)
    assert [x.labels for x in spec.read(None)["dev"]] == [("pos",), ("neg",)]


@pytest.mark.parametrize("body,fragments", [
    (GOOD.replace("labels:", "label:"), ["unknown key 'label'", "did you mean 'labels'", "valid keys"]),
    (GOOD.replace("dev: dev.tsv, ", ""), ["missing key 'files.dev'"]),
    (GOOD.replace("test: test.tsv", "test: test.tsv, validation: v.tsv"),
     ["unknown key 'files.validation'", "valid keys under 'files': train, dev, test"]),
    (GOOD.replace("format: tsv", "format: tssv"), ["unknown format 'tssv'", "known: conll, tsv"]),
    (GOOD + "max_length: long\n", ["bad value for 'max_length'"]),
])
def test_schema_mistakes_are_one_line_naming_the_file(tmp_path, body, fragments):
    path = write_dataset(tmp_path, "custom-bad", body)
    with pytest.raises(ConfigError) as error:
        register_from_yaml(path)
    message = str(error.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_a_built_in_name_cannot_be_taken(tmp_path):
    builtin = get_dataset("bc5-chem")
    path = write_dataset(tmp_path, "bc5-chem")
    with pytest.raises(ConfigError, match=r"bc5-chem\.yaml: task 'bc5-chem' is already defined"):
        register_from_yaml(path)
    assert get_dataset("bc5-chem") is builtin


def test_the_same_file_again_replaces_its_entry_another_file_may_not(tmp_path):
    first = register_from_yaml(write_dataset(tmp_path, "custom-twice"))
    second = register_from_yaml(tmp_path / "custom-twice.yaml")  # e.g. every run of an experiment
    assert get_dataset("custom-twice") is second is not first
    (tmp_path / "other").mkdir()
    other = write_dataset(tmp_path / "other", "custom-twice")
    with pytest.raises(ConfigError, match="already defined"):
        register_from_yaml(other)
    assert get_dataset("custom-twice") is second


def test_a_label_outside_labels_names_the_data_file(tmp_path):
    spec = register_from_yaml(write_dataset(tmp_path, "custom-labels", GOOD.replace("[pos, neg]", "[pos]")))
    with pytest.raises(DataFormatError, match=r"train\.tsv: label\(s\) \['neg'\] not in labels"):
        spec.read(None)

"""Datasets as they ship (datamodules/custom/layouts.py): BioBERT's relation-extraction folds, a headerless
`sentence<TAB>label` train.tsv beside a test.tsv with an `index<TAB>sentence<TAB>label` header, load from a
dataset YAML alone with every line of every file counted (against `wc -l`); the header is said, never read
as an example, and a header or an example in the wrong place is one line naming the file, the line and
the fix."""

from __future__ import annotations

import json
import logging
import subprocess
from pathlib import Path

import pytest

from bioablate_core.errors import ConfigError, DataFormatError
from datamodules.custom import register_from_yaml
from datamodules.custom.schema import load_definition
from datamodules.registry import get_dataset
from tests.user_data import write

RE = "format: tsv\ntask_type: re\nlabels: ['0', '1']\npositive_label: '1'\nentity_types: [GENE, DISEASE]\n"
TEST_LAYOUT = "{path: %s/test.tsv, header: true, columns: {text: 1, label: 2}}"


def shipped(folder: Path, name: str, corpus: Path) -> Path:
    """A YAML for BioBERT's 10 folds of `corpus` as staged: each test file with its own header and columns."""
    folds = "".join(f"  - {{train: {k}/train.tsv, test: {TEST_LAYOUT % k}}}\n" for k in range(1, 11))
    return write(folder / f"{name}.yaml", f"name: {name}\npath: {corpus}\n{RE}dev: none\nfolds:\n{folds}")


def lines(path: Path) -> int:
    return int(subprocess.run(["wc", "-l", str(path)], capture_output=True, text=True, check=True).stdout.split()[0])


@pytest.mark.parametrize("corpus", ["GAD", "euadr"])
def test_biobert_re_folds_as_staged_load_from_a_yaml_with_every_line_counted(corpus, data_dir, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="bioablate")
    root = data_dir / "BioBERT" / "RE" / corpus
    name = f"shipped-{corpus.lower()}"
    spec = register_from_yaml(shipped(tmp_path, name, root))
    assert spec.fold_count == 10 and spec.no_dev
    for k in range(1, 11):
        splits = get_dataset(f"{name}@fold{k}").read(None)
        assert len(splits["train"]) == lines(root / str(k) / "train.tsv")  # no header: every line an example
        assert len(splits["test"]) == lines(root / str(k) / "test.tsv") - 1  # all but the header
        first = (root / str(k) / "train.tsv").read_text().split("\n", 1)[0].split("\t")
        assert (splits["train"][0].text, splits["train"][0].label) == (first[0], first[1])
        assert splits["test"][0].text == (root / str(k) / "test.tsv").read_text().split("\n")[1].split("\t")[1]
    said = [r.getMessage() for r in caplog.records if "header" in r.getMessage()]
    assert said == [f"{name}: line 1 of {root / '1' / 'test.tsv'} is its header (index | sentence | label), not an "
                    "example (header: true)"]  # said once, for the ten files with that header


def test_a_header_read_as_an_example_and_an_example_read_as_a_header_are_one_line_each(data_dir, tmp_path):
    root = data_dir / "BioBERT" / "RE" / "GAD" / "1"
    as_data = register_from_yaml(write(tmp_path / "as-data.yaml", f"name: as-data\npath: {root}\n{RE}dev: none\n"
                                       "files: {train: train.tsv, test: {path: test.tsv, "
                                       "columns: {text: 1, label: 2}}}\n"))
    with pytest.raises(DataFormatError) as error:
        as_data.read(None)
    message = str(error.value)
    assert message.startswith(f"{root / 'test.tsv'}:1: label 'label' (column 2) is not in labels ['0', '1']: if "
                              "this first line is a header, set header: true for the file") and "\n" not in message
    as_header = register_from_yaml(write(tmp_path / "as-header.yaml", f"name: as-header\npath: {root}\n{RE}"
                                         "dev: none\nheader: true\nfiles: {train: train.tsv, test: test.tsv}\n"))
    with pytest.raises(DataFormatError) as error:  # GAD's first training line would be dropped in silence
        as_header.read(None)
    message = str(error.value)
    assert message.startswith(f"{root / 'train.tsv'}:1: header: true reads this line as the header, but it looks "
                              "like an example (label '1'); if the file has no header, set header: false for it")
    assert "\n" not in message


@pytest.mark.parametrize("files,fragment", [
    ("{train: {path: a.tsv, heder: true}, test: b.tsv}", "unknown key 'files.train.heder'; a file given as a "
                                                          "mapping has keys path, header, columns"),
    ("{train: {header: true}, test: b.tsv}", "files.train.path: expected a file name"),
    ("{train: a.tsv, test: {path: b.tsv, header: yes please}}", "files.test.header: expected true or false"),
    ("{train: a.tsv, test: {path: b.tsv, columns: {sentence: 1}}}", "unknown key 'b.tsv: columns.sentence'"),
])
def test_a_mistake_in_a_files_own_layout_is_one_line_naming_the_key(files, fragment, tmp_path):
    path = write(tmp_path / "bad.yaml", f"name: bad-layout\npath: .\n{RE}files: {files}\n")
    with pytest.raises(ConfigError) as error:
        load_definition(path)
    assert str(error.value).startswith(str(path)) and fragment in str(error.value) and "\n" not in str(error.value)


def test_a_files_own_layout_is_part_of_the_fingerprint_and_plain_names_normalize_as_before(tmp_path):
    plain = load_definition(write(tmp_path / "plain.yaml", f"name: p\npath: .\n{RE}files: {{train: a.tsv, "
                                                           "test: b.tsv}\n"))
    assert json.loads(plain.normalized)["files"] == {"train": "a.tsv", "test": "b.tsv"}
    one = load_definition(write(tmp_path / "one.yaml", f"name: p\npath: .\n{RE}files: {{train: a.tsv, "
                                                       "test: {path: b.tsv, header: true}}\n"))
    other = load_definition(write(tmp_path / "other.yaml", f"name: p\npath: .\n{RE}files: {{train: a.tsv, "
                                                           "test: {path: b.tsv, header: false}}\n"))
    assert len({plain.normalized, one.normalized, other.normalized}) == 3
    assert one.files == {"train": "a.tsv", "test": "b.tsv"} and one.layout("b.tsv").header
    assert not one.layout("a.tsv").header and one.layout("a.tsv").columns == one.columns

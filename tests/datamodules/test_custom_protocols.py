"""A user dataset YAML's evaluation protocol (datamodules/custom/protocol.py) and omitted `labels`, on
files written from the staged data: train + test with a carved dev (by default or as `dev:` says), no dev
at all (`dev: none`), folds over train/test pairs or k folds over one file; a tagged dataset without
`labels` takes its training split's entity types; every mistake is one line naming the file and the key;
the dataset fingerprint covers the new keys and is unchanged for a file that gives its three splits."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from bioablate_core.errors import ConfigError, DataFormatError, MissingDataError
from datamodules.custom import register_from_yaml
from datamodules.custom.schema import load_definition
from datamodules.fold_lists import ListedFolds
from datamodules.protocols import CarvedDev, KFolds
from datamodules.registry import get_dataset
from tests.user_data import GAD_RE, gad_lines, two_type_conll, write

NER = "format: conll\npath: data\n"


@pytest.fixture
def ner(data_dir, tmp_path) -> Path:
    """BC5CDR sentences with Chemical and Disease tags: train 0-200, test 0-60."""
    write(tmp_path / "data" / "train.txt", two_type_conll(data_dir, "train", 0, 200))
    write(tmp_path / "data" / "test.txt", two_type_conll(data_dir, "test", 0, 60))
    return tmp_path


def dataset(folder: Path, name: str, body: str) -> Path:
    return write(folder / f"{name}.yaml", f"name: {name}\n{body}")


def ids(instances) -> list[str]:
    return [x.id for x in instances]


# ------------------------------------------------------------------------------------------ dev

def test_train_and_test_only_carve_a_tenth_of_train_said_once(ner, caplog):
    caplog.set_level(logging.INFO, logger="bioablate")
    path = dataset(ner, "user-carved", NER + "files: {train: train.txt, test: test.txt}\nlabels: [Chemical, Disease]\n")
    spec = register_from_yaml(path)
    register_from_yaml(path)  # an experiment registers it once per run: the note is shown once
    assert spec.carve_dev == CarvedDev(0.1, 13) and not spec.no_dev and spec.files == ("train.txt", "test.txt")
    notes = [r.getMessage() for r in caplog.records if "no dev file" in r.getMessage()]
    assert notes == ["user-carved: no dev file: dev is a seeded 10% of train (dev: {fraction: 0.1, seed: 13}); "
                     "dev: none trains finetune.epochs epochs and tests the last"]
    splits = spec.read(None)
    assert (len(splits["train"]), len(splits["dev"]), len(splits["test"])) == (180, 20, 60)
    everything = register_from_yaml(dataset(ner, "user-all", NER + "files: {train: train.txt, dev: train.txt, "
                                                                   "test: test.txt}\nlabels: [Chemical, Disease]\n"))
    whole = everything.read(None)["train"]
    assert sorted(ids(splits["train"] + splits["dev"])) == sorted(ids(whole))  # dev comes out of train
    assert ids(splits["train"]) == [x.id for x in whole if x not in splits["dev"]]  # in file order

    # the same carve spelled out is the same dataset; another seed or fraction is another
    spelled = dataset(ner, "user-carved", NER + "files: {train: train.txt, test: test.txt}\n"
                                                "labels: [Chemical, Disease]\ndev: {fraction: 0.1, seed: 13}\n")
    assert register_from_yaml(spelled).fingerprint(None) == spec.fingerprint(None)
    seeded = dataset(ner, "user-carved", spelled.read_text().split("\n", 1)[1].replace("seed: 13", "seed: 14"))
    other = register_from_yaml(seeded)
    assert other.fingerprint(None) != spec.fingerprint(None)
    assert set(ids(other.read(None)["dev"])) != set(ids(splits["dev"])) and len(other.read(None)["dev"]) == 20
    bigger = dataset(ner, "user-carved", spelled.read_text().split("\n", 1)[1].replace("0.1", "0.25"))
    assert len(register_from_yaml(bigger).read(None)["dev"]) == 50


def test_dev_none_reads_no_dev_and_all_of_train(ner):
    spec = register_from_yaml(dataset(ner, "user-nodev", NER + "files: {train: train.txt, test: test.txt}\n"
                                                               "labels: [Chemical, Disease]\ndev: none\n"))
    assert spec.no_dev and spec.carve_dev is None
    splits = spec.read(None)
    assert (len(splits["train"]), splits["dev"], len(splits["test"])) == (200, [], 60)
    carved = register_from_yaml(dataset(ner, "user-carved2", NER + "files: {train: train.txt, test: test.txt}\n"
                                                                   "labels: [Chemical, Disease]\n"))
    assert spec.fingerprint(None) != carved.fingerprint(None)


def test_a_relation_carve_keeps_a_sentence_on_one_side(data_dir, tmp_path):
    lines = gad_lines(data_dir, 0, 300)
    write(tmp_path / "data" / "train.tsv", "\n".join(lines + lines[:40]) + "\n")  # 40 sentences twice
    write(tmp_path / "data" / "test.tsv", "\n".join(gad_lines(data_dir, 300, 360)) + "\n")
    spec = register_from_yaml(dataset(tmp_path, "user-gad", "path: data\nfiles: {train: train.tsv, test: test.tsv}\n"
                                                              "dev: {fraction: 0.3, seed: 2}\n" + GAD_RE))
    assert spec.carve_dev == CarvedDev(0.3, 2, group_by="text")
    splits = spec.read(None)
    assert not {x.text for x in splits["train"]} & {x.text for x in splits["dev"]}
    assert len(splits["train"]) + len(splits["dev"]) == 340


# ---------------------------------------------------------------------------------------- folds

def test_folds_over_train_test_pairs(data_dir, tmp_path):
    for k in (1, 2, 3):
        write(tmp_path / "data" / f"fold{k}" / "train.tsv",
              "\n".join(gad_lines(data_dir, 100 * k, 100 * k + 80)) + "\n")
        write(tmp_path / "data" / f"fold{k}" / "test.tsv",
              "\n".join(gad_lines(data_dir, 100 * k + 80, 100 * k + 100)) + "\n")
    pairs = "".join(f"  - {{train: fold{k}/train.tsv, test: fold{k}/test.tsv}}\n" for k in (1, 2, 3))
    spec = register_from_yaml(dataset(tmp_path, "user-pairs", f"path: data\nfolds:\n{pairs}" + GAD_RE))
    assert isinstance(spec.folds, ListedFolds) and spec.fold_count == 3 and spec.carve_dev == CarvedDev(0.1, 13, "text")
    assert spec.files == tuple(f"fold{k}/{s}.tsv" for k in (1, 2, 3) for s in ("train", "test"))
    fingerprints = set()
    for k in (1, 2, 3):
        fold = get_dataset(f"user-pairs@fold{k}")
        assert fold.fold_index == k and fold.files == (f"fold{k}/train.tsv", f"fold{k}/test.tsv")
        splits = fold.read(None)
        assert [x.text for x in splits["test"]] == [line.split("\t")[0]
                                                    for line in gad_lines(data_dir, 100 * k + 80, 100 * k + 100)]
        assert len(splits["train"]) + len(splits["dev"]) == 80 and len(splits["dev"]) == 8
        fingerprints.add(fold.fingerprint(None))
    assert len(fingerprints) == 3
    none = register_from_yaml(dataset(tmp_path, "user-pairs-nodev", f"path: data\nfolds:\n{pairs}dev: none\n" + GAD_RE))
    assert none.fold(2).read(None)["dev"] == [] and len(none.fold(2).read(None)["train"]) == 80


def test_k_folds_over_one_file_cover_it_with_disjoint_tests(data_dir, tmp_path):
    write(tmp_path / "data" / "all.tsv", "\n".join(gad_lines(data_dir, 0, 90)) + "\n")
    spec = register_from_yaml(dataset(tmp_path, "user-kfold", "path: data\nfolds: {k: 3, seed: 5, file: all.tsv}\n"
                                                                "dev: none\n" + GAD_RE))
    assert spec.folds == KFolds(3, 5, pool="pool", group_by="text") and spec.no_dev and spec.files == ("all.tsv",)
    tests = []
    for fold in spec.each_fold():
        splits = fold.read(None)
        assert splits["dev"] == [] and len(splits["train"]) + len(splits["test"]) == 90
        assert 29 <= len(splits["test"]) <= 31  # a third, per class (stratified)
        assert not set(ids(splits["train"])) & set(ids(splits["test"]))
        tests += ids(splits["test"])
    assert sorted(tests) == sorted(f"all-{i}" for i in range(90))
    labels = [x.label for x in spec.fold(1).read(None)["test"]]  # stratified: GAD's classes in proportion
    everything = [line.rsplit("\t", 1)[1] for line in gad_lines(data_dir, 0, 90)]
    assert abs(labels.count("1") - everything.count("1") / 3) <= 1
    reseeded = register_from_yaml(dataset(tmp_path, "user-kfold", "path: data\nfolds: {k: 3, seed: 6, file: all.tsv}\n"
                                                                  "dev: none\n" + GAD_RE))
    assert ids(reseeded.fold(1).read(None)["test"]) != ids(spec.fold(1).read(None)["test"])
    assert reseeded.fold(1).fingerprint(None) != spec.fold(1).fingerprint(None)
    assert json.loads(spec.definition)["folds"] == {"k": 3, "seed": 5, "file": "all.tsv"}


# ------------------------------------------------------------------------------- omitted labels

def test_a_conll_file_without_labels_takes_the_types_of_its_training_split(ner, caplog):
    caplog.set_level(logging.INFO, logger="bioablate")
    path = dataset(ner, "user-types", NER + "files: {train: train.txt, test: test.txt}\ndev: none\n")
    spec = register_from_yaml(path)
    register_from_yaml(path)
    assert spec.labels == ("Chemical", "Disease") and spec.labels_from == "train.txt"
    said = [r.getMessage() for r in caplog.records if "labels read" in r.getMessage()]
    assert said == ["user-types: labels read from train.txt: Chemical, Disease"]
    given = register_from_yaml(dataset(ner, "user-given", NER + "files: {train: train.txt, test: test.txt}\ndev: none\n"
                                                               "labels: [Chemical, Disease]\n"))
    assert spec.read(None) == given.read(None) and given.labels_from == ""

    # a type only test uses: one line naming the test file's line and where the labels came from
    train = (ner / "data" / "train.txt").read_text()
    write(ner / "data" / "train.txt", train.replace("-Disease", "-Chemical"))  # test still has Disease tags
    narrow = register_from_yaml(path)
    assert narrow.labels == ("Chemical",)
    with pytest.raises(DataFormatError) as error:
        narrow.read(None)
    message = str(error.value)
    assert message.startswith(str(ner / "data" / "test.txt") + ":") and "\n" not in message
    assert "entity type 'Disease'" in message and "not among the types of the training split ['Chemical']" in message


def test_a_pico_jsonl_file_without_labels_lists_the_types_in_its_metric(tmp_path):
    lines = [{"tokens": ["aspirin", "in", "adults"], "tags": ["I-INT", "O", "I-PAR"]},
             {"tokens": ["pain", "fell"], "tags": ["I-OUT", "O"]}]
    write(tmp_path / "data" / "a.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    spec = register_from_yaml(dataset(tmp_path, "user-pico", "format: jsonl\ntask_type: pico\npath: data\n"
                                                             "files: {train: a.jsonl, dev: a.jsonl, test: a.jsonl}\n"))
    assert spec.labels == ("INT", "OUT", "PAR") and spec.metric_args == {"labels": ("INT", "OUT", "PAR")}


def test_folds_read_the_labels_of_every_training_file(data_dir, tmp_path):
    write(tmp_path / "data" / "a.txt", two_type_conll(data_dir, "train", 0, 10).replace("-Disease", "-Chemical"))
    write(tmp_path / "data" / "b.txt", two_type_conll(data_dir, "train", 10, 20))
    spec = register_from_yaml(dataset(tmp_path, "user-fold-types", NER + "folds:\n  - {train: a.txt, test: b.txt}\n"
                                                                         "  - {train: b.txt, test: a.txt}\n"))
    assert spec.labels == ("Chemical", "Disease") and spec.labels_from == "a.txt and 1 more training files"
    kfold = register_from_yaml(dataset(tmp_path, "user-kfold-types", NER + "folds: {file: a.txt}\n"))
    assert kfold.labels == ("Chemical",) and kfold.folds == KFolds(10, 13, pool="pool")


# -------------------------------------------------------------------------------------- mistakes

FILES = "files: {train: train.txt, test: test.txt}\n"
PAIRS = "folds:\n  - {train: train.txt, test: test.txt}\n  - {train: test.txt, test: train.txt}\n"


@pytest.mark.parametrize("body, message", [
    (PAIRS + "files: {test: test.txt}\n", "files.test: a dataset with folds takes its files from 'folds'"),
    (PAIRS + "files: {train: train.txt}\n", "files.train: a dataset with folds takes its files from 'folds'"),
    ("folds: {k: 1, file: train.txt}\n", "folds.k: 1 is below the least, 2 (the number of folds)"),
    ("folds: {k: ten, file: train.txt}\n", "folds.k: expected a whole number from 2 to 10,000, got 'ten'"),
    # bounded before anything is dealt (it overflowed inside numpy)
    ("folds: {k: 100000000000000000000, file: train.txt}\n",
     "folds.k: 100,000,000,000,000,000,000 is above the most this accepts, 10,000 (the number of folds)"),
    ("folds: {k: 5}\n", "folds: missing key 'file' (the one file dealt into k folds)"),
    ("folds: {kk: 5, file: train.txt}\n",
     "unknown key 'folds.kk' (did you mean 'k'?); valid keys under 'folds': k, seed, file"),
    ("folds: {file: train.txt, seed: 1.5}\n", "folds.seed: expected a whole number, got 1.5"),
    ("folds: all.tsv\n", "folds: expected a list of {train: FILE, test: FILE} pairs or a mapping {k: 10, seed: 13, "
                         "file: FILE}, got 'all.tsv'"),
    ("folds:\n  - {train: train.txt, test: test.txt}\n",
     "folds: cross-validation needs at least 2 train/test pairs, got 1"),
    ("folds:\n  - {train: train.txt, test: test.txt}\n  - {train: test.txt}\n",
     "folds[1]: missing key 'test' (each fold is {train: FILE, test: FILE})"),
    ("folds:\n  - {train: train.txt, tset: test.txt}\n  - {train: test.txt, test: train.txt}\n",
     "unknown key 'folds[0].tset' (did you mean 'test'?); valid keys under 'folds[0]': train, test"),
    ("folds:\n  - train.txt\n  - test.txt\n",
     "folds[0]: expected a mapping {train: FILE, test: FILE}, got 'train.txt'"),
    ("folds:\n  - {train: a.txt, test: a.txt}\n  - {train: test.txt, test: train.txt}\n",
     "folds[0]: train and test are the same file (a.txt)"),
    ("folds:\n  - {train: [a.txt], test: b.txt}\n  - {train: test.txt, test: train.txt}\n",
     "folds[0].train: expected a file name (relative to path), got a list"),
    (FILES + "dev: 0.1\n", "dev: expected `none` or a mapping {fraction: 0.1, seed: 13}, got 0.1"),
    (FILES + "dev: no\n", "dev: expected `none` or a mapping {fraction: 0.1, seed: 13}, got False"),
    (FILES + "dev: {fraction: 1.5}\n", "dev.fraction: expected a number between 0 and 1 (the share of train that "
                                       "becomes dev), got 1.5"),
    (FILES + "dev: {fraction: 0.1, seed: x}\n", "dev.seed: expected a whole number, got 'x'"),
    (FILES + "dev: {fractoin: 0.2}\n", "unknown key 'dev.fractoin' (did you mean 'fraction'?); valid keys under 'dev': "
                                       "fraction, seed"),
    ("files: {train: train.txt, dev: d.txt, test: test.txt}\ndev: none\n",
     "dev: the files give a dev split (files.dev: d.txt); remove 'dev' or 'files.dev'"),
    ("files: {train: train.txt}\n", "missing key 'files.test' (or 'folds': cross-validation folds, README, "
                                    "'Your own dataset, no Python')"),
    ("files: {test: test.txt}\n", "missing key 'files.train'"),
])
def test_protocol_mistakes_are_one_line_naming_the_key(tmp_path, body, message):
    path = dataset(tmp_path, "user-bad", "format: conll\npath: data\nlabels: [Chemical]\n" + body)
    with pytest.raises(ConfigError) as error:
        register_from_yaml(path)
    assert str(error.value).startswith(f"{path}: {message}"), str(error.value)
    assert "\n" not in str(error.value)


def test_k_folds_do_not_apply_to_a_golden_file(tmp_path):
    path = dataset(tmp_path, "user-golden", "format: bioasq-golden\npath: data\nfolds: {file: golden.json}\n")
    with pytest.raises(ConfigError, match=r"folds: a bioasq-golden file reads its train and test questions "
                                          r"differently .* give train/test pairs$"):
        register_from_yaml(path)


def test_labels_read_from_train_need_the_file_and_its_tags(ner):
    missing = dataset(ner, "user-nofile", NER + "files: {train: nothere.txt, test: test.txt}\n")
    with pytest.raises(ConfigError) as error:
        register_from_yaml(missing)
    assert str(error.value) == (f"{missing}: files.train: {ner / 'data' / 'nothere.txt'} is not a file; without "
                                "'labels' the entity types are read from the training split")
    write(ner / "data" / "plain.txt", "aspirin\tO\nhelps\tO\n")
    untagged = dataset(ner, "user-untagged", NER + "files: {train: plain.txt, test: test.txt}\n")
    with pytest.raises(ConfigError, match=r"labels: none given, and plain\.txt has no entity tags to read them "
                                          r"from; list the entity types under 'labels'$"):
        register_from_yaml(untagged)
    write(ner / "data" / "untyped.txt", "aspirin\tB\nhelps\tO\n")
    with pytest.raises(DataFormatError, match=r"untyped\.txt:1: untyped tag 'B': set the key 'entity_type'"):
        register_from_yaml(dataset(ner, "user-untyped", NER + "files: {train: untyped.txt, test: test.txt}\n"))


# ---------------------------------------------------------------------------------- fingerprints

# A user dataset file that names its three splits, normalized by main before `dev:` and `folds:` existed
# (9eab27f, datamodules/custom/schema.py): its definition, part of the data fingerprint, is unchanged.
PINNED_DEFINITION = (
    '{"collapse_type": null, "columns": {}, "entity_type": null, "entity_types": null, "fields": {}, "files": '
    '{"dev": "dev.tsv", "test": "test.tsv", "train": "train.tsv"}, "format": "conll", "header": false, '
    '"label_separator": ",", "labels": ["Chemical"], "max_length": 512, "metric": null, "multi_label": false, '
    '"name": "custom-pin2", "negative_label": null, "path": "data", "positive_label": null, "task_type": null}')


def test_a_file_with_three_splits_normalizes_as_before(tmp_path):
    path = dataset(tmp_path, "custom-pin2", "format: conll\npath: data\nfiles: {train: train.tsv, dev: dev.tsv, "
                                            "test: test.tsv}\nlabels: [Chemical]\n")
    definition = load_definition(path)
    assert definition.normalized == PINNED_DEFINITION
    assert definition.protocol.carve_dev is None and definition.protocol.folds is None


def test_the_definition_covers_dev_and_folds(tmp_path):
    def normalized(body: str) -> dict:
        return json.loads(load_definition(dataset(tmp_path, "user-fp", "format: conll\npath: data\nlabels: [C]\n"
                                                  + body)).normalized)

    assert normalized(FILES)["dev"] == normalized(FILES + "dev: {seed: 13}\n")["dev"] == {"fraction": 0.1, "seed": 13}
    assert normalized(FILES + "dev: None\n")["dev"] == "none"
    assert normalized(PAIRS)["folds"] == [{"train": "train.txt", "test": "test.txt"},
                                          {"train": "test.txt", "test": "train.txt"}]
    assert "files" in normalized(PAIRS) and normalized(PAIRS)["files"] == {}


def test_a_missing_fold_file_is_one_line_naming_the_dataset_file(ner, data_dir):
    from ablations.config import build_config
    from ablations.run.finetune_identity import identify

    path = dataset(ner, "user-gone", NER + "labels: [Chemical, Disease]\nfolds:\n"
                                          "  - {train: train.txt, test: test.txt}\n"
                                          "  - {train: test.txt, test: gone.txt}\n")
    identify(build_config("micro", [f"datasets=[{path}]"], task="user-gone@fold1", data_dir=str(data_dir)))
    with pytest.raises(MissingDataError) as error:
        identify(build_config("micro", [f"datasets=[{path}]"], task="user-gone@fold2", data_dir=str(data_dir)))
    assert str(error.value) == (f"data directory {ner / 'data'} is missing files (user-gone@fold2: gone.txt); "
                                f"check 'path', 'files' and 'folds' in {path}")
    with pytest.raises(MissingDataError, match="user-gone@fold2: gone.txt"):
        get_dataset("user-gone@fold2").read(None)

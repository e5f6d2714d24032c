"""Evaluation protocols (datamodules/protocols.py) and the DatasetSpec fold API: carving and dealing are
deterministic under a seed, keep groups whole, stratify by label, and never touch test; datasets without
a protocol keep their pinned fingerprints."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from bioablate_core.errors import ConfigError
from datamodules.instances import PairInstance, TaggingInstance
from datamodules.protocols import CarvedDev, FileFolds, KFolds, carve, deal_folds, fold_name, split_fold_name
from datamodules.registry import dataset_names, get_dataset
from datamodules.spec import DatasetSpec

# DatasetSpec.fingerprint over the staged data, as 0.2.0 computes it: a run's fingerprint must not change
# because the spec gains optional fields.
PINNED_FINGERPRINTS = {
    "bc5-chem": "d03284c3455df149", "bc5-disease": "6ffb9ec36dfc6457", "ncbi-disease": "0a5e1733dfdb00dc",
    "bc2gm": "365da19c9b092841", "jnlpba": "1cee7165c3fb430c", "ebm-pico": "a92bc97dcdb808c6",
    "chemprot": "afbd6a4bbecc2b0f", "ddi": "d6b9e1d83c5c47ee", "gad": "2b9b6b3f8419e9af",
    "biosses": "de2ccdeb906a5821", "hoc": "b9473198ad29c9e0", "pubmedqa": "685a8ed1fd144559",
    "bioasq": "059cfbc2d297e826",
}


def test_blurb_fingerprints_are_pinned(data_dir: Path):
    assert {name: get_dataset(name).fingerprint(data_dir) for name in PINNED_FINGERPRINTS} == PINNED_FINGERPRINTS


# User datasets' `folds:` and `dev: none` must not change the fingerprints of the built-in datasets with a
# protocol (their runs would all run again); a deliberate change to the carving or dealing code (a
# PROTOCOL_VERSION bump) updates these.
PINNED_PROTOCOL_FINGERPRINTS = {
    "euadr": "58cccb151769cd28", "euadr@fold2": "4ecbc0efbddcf08d", "biobert-gad@fold2": "2170d146ac0f2159",
    "bioelectra-rerank@fold2": "45a0ea1199fc1830", "bioelectra-yesno": "1edb9821621a9405",
}


def test_protocol_fingerprints_are_pinned(data_dir: Path):
    assert {name: get_dataset(name).fingerprint(data_dir)
            for name in PINNED_PROTOCOL_FINGERPRINTS} == PINNED_PROTOCOL_FINGERPRINTS


def _pairs(n_questions: int, candidates: int) -> list[PairInstance]:
    """Question q has `candidates` candidates; the first of every third question is positive."""
    return [PairInstance(f"{q}-{c}", f"question {q}", f"answer {c}", "1" if c == 0 and q % 3 == 0 else "0")
            for q in range(n_questions) for c in range(candidates)]


def test_deal_folds_is_seeded_balanced_grouped_and_stratified():
    pool = _pairs(30, 4)  # 10 questions with a positive, 20 without
    first = deal_folds(pool, 5, seed=7, group_by="text_a")
    assert first == deal_folds(pool, 5, seed=7, group_by="text_a")
    assert first != deal_folds(pool, 5, seed=8, group_by="text_a")
    for q in range(30):  # all candidates of a question in one fold
        assert len({first[q * 4 + c] for c in range(4)}) == 1
    assert Counter(first) == {k: 24 for k in range(5)}  # 6 questions x 4 candidates each
    positives = Counter(k for k, x in zip(first, pool) if x.label == "1")
    assert positives == {k: 2 for k in range(5)}  # 10 questions with a positive, 2 per fold


def test_carve_takes_the_fraction_per_stratum_and_whole_groups():
    pool = _pairs(30, 4)
    train, dev = carve(pool, CarvedDev(0.2, seed=3, group_by="text_a"))
    # strata: 10 questions with a positive (40 pairs, target 8 = 2 questions), 20 without (80, target 16)
    assert len(dev) == 24 and len(train) == 96
    assert sum(x.label == "1" for x in dev) == 2
    assert not {x.text_a for x in dev} & {x.text_a for x in train}
    assert [x.id for x in train] == [x.id for x in pool if x not in dev]  # file order kept
    assert carve(pool, CarvedDev(0.2, seed=3, group_by="text_a")) == (train, dev)


def test_fraction_out_of_range_is_refused():
    with pytest.raises(ValueError, match="between 0 and 1"):
        CarvedDev(1.0, seed=1)


def test_fold_names_round_trip():
    assert fold_name("biobert-gad", 3) == "biobert-gad@fold3"
    assert split_fold_name("biobert-gad@fold3") == ("biobert-gad", 3)
    assert split_fold_name("gad") == ("gad", None)


READER_VERSION = 1  # the reader below is this module's: its fingerprint takes this version


def _tiny_kfold_spec(tmp_path: Path) -> DatasetSpec:
    (tmp_path / "pool.txt").write_text("".join(f"w{i}\n" for i in range(10)))

    def read_pool(data_dir: Path):
        words = (Path(data_dir) / "pool.txt").read_text().split()
        return {"test": [TaggingInstance(w, (w,), ()) for w in words]}

    return DatasetSpec(name="tiny-kfold", task_type="ner", reader=read_pool, files=("pool.txt",), labels=("X",),
                       metric="entity_f1", max_length=16, root=tmp_path, folds=KFolds(5, seed=1),
                       carve_dev=CarvedDev(0.25, seed=2))


def test_kfold_spec_selects_disjoint_test_parts_that_cover_the_pool(tmp_path: Path):
    spec = _tiny_kfold_spec(tmp_path)
    assert spec.fold_count == 5 and [f.name for f in spec.each_fold()] == [f"tiny-kfold@fold{k}" for k in range(1, 6)]
    tests = []
    for fold in spec.each_fold():
        splits = fold.read(None)
        assert (len(splits["train"]), len(splits["dev"]), len(splits["test"])) == (6, 2, 2)  # 8 left, a quarter dev
        ids = [{x.id for x in splits[s]} for s in ("train", "dev", "test")]
        assert not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
        tests += ids[2]
    assert sorted(tests) == sorted(f"w{i}" for i in range(10))
    assert spec.read(None) == spec.fold(1).read(None)  # no fold chosen: fold 1
    fingerprints = {f.fingerprint(None) for f in spec.each_fold()}
    assert len(fingerprints) == 5 and spec.fingerprint(None) not in fingerprints
    assert replace(spec, carve_dev=CarvedDev(0.25, seed=3)).fingerprint(None) != spec.fingerprint(None)


def test_fold_selection_errors_are_one_line(tmp_path: Path):
    spec = _tiny_kfold_spec(tmp_path)
    with pytest.raises(ConfigError, match=r"tiny-kfold has folds 1\.\.5, not 6"):
        spec.fold(6)
    with pytest.raises(ConfigError, match="is already fold 2"):
        spec.fold(2).fold(1)
    with pytest.raises(ConfigError, match="gad has no folds"):
        get_dataset("gad").fold(1)
    assert get_dataset("gad").fold_count == 0 and get_dataset("gad").each_fold() == []


def test_file_folds_must_list_every_folds_files():
    folds = FileFolds(2, ("X/{fold}/a.tsv",))
    assert folds.all_files() == ("X/1/a.tsv", "X/2/a.tsv")
    with pytest.raises(ValueError, match="every fold's files"):
        DatasetSpec(name="x", task_type="re", reader=lambda p, k: {}, files=("X/1/a.tsv",), labels=("0", "1"),
                    metric="accuracy", max_length=16, folds=folds)


def test_only_new_datasets_have_protocols():
    assert all(get_dataset(name).folds is None and get_dataset(name).carve_dev is None
               for name in PINNED_FINGERPRINTS)
    assert set(PINNED_FINGERPRINTS) <= set(dataset_names())

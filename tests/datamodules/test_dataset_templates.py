"""The dataset YAML templates shipped for the papers' datasets that are not staged (BC4CHEMD, 2010 i2b2/VA,
the clinical sets under data use agreements: experiments/datasets/): each is a valid user dataset file whose
task type and metric are the paper's, and reads once files of its format are in place."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bioablate_core.errors import MissingDataError
from datamodules.custom import register_from_yaml
from datamodules.custom.schema import load_definition
from datamodules.registry import DATASETS

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted((REPO_ROOT / "experiments" / "datasets").glob("*.yaml"))
EXPECTED = {"bc4chemd": ("ner", "entity_f1"), "i2b2-2010-ner": ("ner", "entity_f1"),
            "share-clefe": ("ner", "entity_f1"), "i2b2-2010-re": ("re", "relation_micro_f1"),
            "mednli": ("pair-classification", "accuracy"), "medsts": ("similarity", "pearson")}


def test_every_template_is_a_valid_dataset_file_scored_as_the_paper_scores_it():
    assert {p.stem for p in TEMPLATES} == set(EXPECTED)
    for path in TEMPLATES:
        definition = load_definition(path)
        assert definition.name == path.stem
        assert (definition.kind_name, definition.metric) == EXPECTED[path.stem], path


def test_a_template_reads_once_its_files_are_there(tmp_path, data_dir):
    copy = tmp_path / "bc4chemd.yaml"
    shutil.copy(REPO_ROOT / "experiments" / "datasets" / "bc4chemd.yaml", copy)
    spec = register_from_yaml(copy)
    try:
        with pytest.raises(MissingDataError, match="train.tsv"):
            spec.read(None)
        # BioBERT's species files have BC4CHEMD's format (token, untyped B/I/O tag): in place, it reads
        (tmp_path / "BC4CHEMD").mkdir()
        for name in ("train.tsv", "devel.tsv", "test.tsv"):
            shutil.copy(data_dir / "BioBERT" / "NER" / "s800" / name, tmp_path / "BC4CHEMD" / name)
        splits = spec.read(None)
        assert splits["train"] and {s.label for x in splits["train"] for s in x.spans} == {"Chemical"}
    finally:
        DATASETS.unregister("bc4chemd")

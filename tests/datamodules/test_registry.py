"""The dataset registry: the 13 BLURB datasets are there as soon as it is imported, looked up by name and
task type; an unknown name lists the known ones. Its in-memory cache of parsed datasets is keyed by
content, so an edited file is read again, and every caller gets its own lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from bioablate_core.errors import UnknownNameError
from datamodules import spec as dataset_spec
from datamodules.blurb import BLURB_DATASETS
from datamodules.custom import register_from_yaml
from datamodules.metrics import METRICS
from datamodules.registry import DATASETS, dataset_names, get_dataset, register
from datamodules.task_types import BLURB_TASK_TYPES


def test_blurb_datasets_are_registered_in_order():
    assert dataset_names()[:13] == [spec.name for spec in BLURB_DATASETS] and len(BLURB_DATASETS) == 13
    assert all(get_dataset(spec.name) is spec for spec in BLURB_DATASETS)
    assert dataset_names("re") == ["chemprot", "ddi", "gad", "biobert-gad", "euadr"]  # BLURB's, then BioBERT's
    assert {spec.task_type for spec in BLURB_DATASETS} == set(BLURB_TASK_TYPES)
    assert all(spec.metric in METRICS for spec in BLURB_DATASETS)


def test_unknown_task_lists_the_known_ones():
    with pytest.raises(UnknownNameError) as error:
        get_dataset("bc5chem")
    assert str(error.value).startswith("unknown task 'bc5chem'; known: bc2gm, bc5-chem, bc5-disease, ")
    assert str(error.value).endswith("(did you mean 'bc5-chem'?)")


def test_a_spec_with_an_unknown_metric_or_task_type_is_refused():
    from dataclasses import replace

    gad = get_dataset("gad")
    with pytest.raises(UnknownNameError, match="unknown metric 'f2'"):
        register(replace(gad, name="gad-f2", metric="f2"))
    with pytest.raises(ValueError, match="task type 'tagging'"):
        register(replace(gad, name="gad-tagging", task_type="tagging"))
    assert "gad-f2" not in DATASETS and "gad-tagging" not in DATASETS


def test_read_cache_follows_file_content(tmp_path: Path):
    (tmp_path / "data").mkdir()
    for split in ("train", "dev", "test"):
        (tmp_path / "data" / f"{split}.tsv").write_text(f"a {split} sentence\tpos\nanother one\tneg\n")
    (tmp_path / "cache-demo.yaml").write_text(
        "name: cache-demo\nformat: tsv\npath: data\n"
        "files: {train: train.tsv, dev: dev.tsv, test: test.tsv}\nlabels: [pos, neg]\n")
    register_from_yaml(tmp_path / "cache-demo.yaml")
    spec = get_dataset("cache-demo")

    first = spec.read(None)
    assert [i.text for i in first["train"]] == ["a train sentence", "another one"]
    first["train"].clear()  # a caller's own list: the cached splits are untouched
    again = spec.read(None)
    assert [i.text for i in again["train"]] == ["a train sentence", "another one"]
    assert again["train"][0] is spec.read(None)["train"][0]  # parsed once, served from memory

    (tmp_path / "data" / "train.tsv").write_text("an edited sentence\tneg\n")
    assert [(i.text, i.labels) for i in spec.read(None)["train"]] == [("an edited sentence", ("neg",))]
    assert sum(name == "cache-demo" for name, _ in dataset_spec._READ_CACHE) == 2  # old content, new content


READER_VERSION = 1  # the reader below is this module's: its fingerprint takes this version


@pytest.mark.parametrize("enabled_before", [True, False])
def test_a_reader_runs_with_the_garbage_collector_paused_and_finds_it_as_it_was(tmp_path: Path, enabled_before):
    """Parsing makes no garbage cycles, and a full collection during it walked the whole heap again and again:
    the collector is off while the reader runs, and after it as the caller had it."""
    import gc

    from datamodules.instances import TextInstance
    from datamodules.spec import DatasetSpec

    seen = []

    def read_words(data_dir: Path):
        seen.append(gc.isenabled())
        return {"test": [TextInstance(w, w, ("pos",)) for w in (Path(data_dir) / "w.txt").read_text().split()]}

    (tmp_path / "w.txt").write_text(f"a b c {enabled_before}")
    spec = DatasetSpec(name="gc-paused", task_type="classification", reader=read_words, files=("w.txt",),
                       labels=("pos",), metric="accuracy", max_length=16, root=tmp_path)
    (gc.enable if enabled_before else gc.disable)()
    try:
        assert len(spec.read(None)["test"]) == 4
        assert seen == [False] and gc.isenabled() == enabled_before
    finally:
        gc.enable()

"""bioablate_core.identity: what identifies a run is marked on each schema field, and the lists fingerprints use are
read off the marks: the run config's (its fields' metadata: result keys, LOCATION_KEYS) and a
dataset's (`datamodules.spec.identifies`: `_shape_key`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from bioablate_core.identity import field_marks, marked

marks = field_marks(("shape", "none"))


def test_every_field_is_placed_once_in_a_known_group():
    @marks(shape="b a", none="c")
    @dataclasses.dataclass
    class Placed:
        a: int = 0
        b: int = 0
        c: int = 0

    assert marked(Placed, "shape") == ["b", "a"]  # in the order the marks name them
    assert marked(Placed, "shape", "none") == ["b", "a", "c"]
    with pytest.raises(TypeError, match=r"unmarked fields \['c'\]"):
        marks(shape="a b")(dataclasses.make_dataclass("Grown", ["a", "b", "c"]))
    with pytest.raises(TypeError, match=r"Twice.a is marked twice"):
        marks(shape="a", none="a")(dataclasses.make_dataclass("Twice", ["a"]))
    with pytest.raises(TypeError, match=r"unknown groups \['result'\]"):
        marks(result="a")


def test_a_field_marked_in_its_metadata_keeps_its_default_and_other_metadata():
    from bioablate_core.identity import markers, marks
    from bioablate_core.schema import RANGE, bounded

    shape, none = markers("shape", "none")

    @dataclasses.dataclass
    class Placed:
        a: int = none(bounded(1, ge=0))
        b: list = shape(dataclasses.field(default_factory=list))
        c: str = shape("x")

    assert marks(Placed) == {"a": "none", "b": "shape", "c": "shape"}
    assert marked(Placed, "shape") == ["b", "c"]  # in the order the fields are declared
    assert (Placed().a, Placed().b, Placed().c) == (1, [], "x")
    assert dataclasses.fields(Placed)[0].metadata[RANGE].ge == 0
    with pytest.raises(TypeError, match=r"Grown: unmarked fields \['b'\]"):
        marks(dataclasses.make_dataclass("Grown", [("a", int, shape(0)), ("b", int, 0)]))


def test_the_location_keys_are_the_run_configs_place_marks_and_change_no_identity():
    from ablations.config import LOCATION_KEYS, NON_RESULT_KEYS, build_config, fingerprint
    from ablations.experiment.record import config_digest

    assert set(LOCATION_KEYS) == {"data_dir", "work_dir", "tracking_uri", "launcher"}
    assert all(any(k == place or k.startswith(place + ".") for k in NON_RESULT_KEYS) for place in LOCATION_KEYS)
    cfg = build_config("micro", [], task="gad")
    moved = build_config("micro", ["launcher.partition=gpu"], task="gad", work_dir="/elsewhere",
                         tracking_uri="sqlite:///x.db", data_dir="/data")
    assert (config_digest(moved), fingerprint(moved, "data")) == (config_digest(cfg), fingerprint(cfg, "data"))
    # a non-location key that decides no result (the profile's name) still tells recorded plans apart
    assert config_digest(OmegaConf.merge(cfg, {"profile": "mini"})) != config_digest(cfg)


READER_VERSION = 1  # the reader below is this module's: its fingerprint takes this version


def test_a_datasets_shape_fields_change_its_fingerprint_and_its_descriptions_do_not(tmp_path: Path):
    from datamodules.spec import DatasetSpec

    (tmp_path / "train.txt").write_text("a\n")
    spec = DatasetSpec(name="tiny", task_type="classification", reader=lambda base: {}, files=("train.txt",),
                       labels=("no", "yes"), metric="accuracy", max_length=16, root=tmp_path)
    changed = {"task_type": "re", "labels": ("yes", "no"), "metric": "macro_f1", "metric_args": {"k": 1},
               "max_length": 32, "multi_label": True}
    assert set(changed) == set(marked(DatasetSpec, "shape"))
    for name, value in changed.items():
        assert dataclasses.replace(spec, **{name: value}).fingerprint(None) != spec.fingerprint(None), name
    described = {"count_unit": "pairs", "paper_counts": {"train": 1}, "notes": "ours", "licenses": ("cc-by-4.0",),
                 "inner_files": ("train.txt",), "labels_from": "train.txt", "source": "tiny.yaml"}
    assert set(described) == set(marked(DatasetSpec, "none")) - {"root"}
    for name, value in described.items():
        assert dataclasses.replace(spec, **{name: value}).fingerprint(None) == spec.fingerprint(None), name

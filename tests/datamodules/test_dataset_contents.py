"""Reader versions (DatasetSpec.fingerprint): a built-in dataset's instances on the staged data change only
with a bump of its reader's `READER_VERSION`, and a bump changes the fingerprint.

The pins in dataset_contents.json are written by `python -m tests.datamodules.test_dataset_contents` (run it
after a deliberate version bump, and say in the commit why the instances changed)."""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from datamodules.readers import ner
from datamodules.registry import DATASETS, get_dataset
from datamodules.spec import DatasetSpec

PINS = Path(__file__).with_name("dataset_contents.json")


def builtin_specs() -> list[DatasetSpec]:
    """Every built-in dataset and each of its folds (what a run can name)."""
    return [s for name in DATASETS.names() for s in (DATASETS.get(name), *DATASETS.get(name).each_fold())]


def content_digest(spec: DatasetSpec, data_dir: Path) -> str:
    """16 hex digits of SHA-256 over every split's instances, in order (instances are frozen dataclasses:
    their repr is their content)."""
    digest = hashlib.sha256()
    for split, instances in sorted(spec.read(data_dir).items()):
        digest.update(split.encode())
        for instance in instances:
            digest.update(repr(instance).encode())
    return digest.hexdigest()[:16]


def current_pins(data_dir: Path) -> dict[str, dict[str, str]]:
    return {spec.name: {"code": spec.code_version(), "instances": content_digest(spec, data_dir)}
            for spec in builtin_specs() if not spec.missing_files(data_dir)}


def test_instances_change_only_with_a_reader_version_bump(data_dir: Path):
    pinned = json.loads(PINS.read_text())
    now = current_pins(data_dir)
    unbumped = [name for name in now if name in pinned and now[name]["code"] == pinned[name]["code"]
                and now[name]["instances"] != pinned[name]["instances"]]
    assert not unbumped, (
        f"the instances of {unbumped} changed but their reader's READER_VERSION did not: their stored runs "
        "would be reused for different data. Bump READER_VERSION in the reader's module (or "
        "protocols.PROTOCOL_VERSION), then run `python -m tests.datamodules.test_dataset_contents`")
    assert now == pinned, "the pins are out of date: run `python -m tests.datamodules.test_dataset_contents`"


def test_a_field_that_shapes_runs_changes_the_fingerprint(data_dir: Path):
    spec = get_dataset("chemprot")
    changed = [replace(spec, max_length=128), replace(spec, labels=spec.labels[:-1]),
               replace(spec, metric_args={"negative": "other"}), replace(spec, metric="accuracy")]
    assert len({spec.fingerprint(data_dir), *(c.fingerprint(data_dir) for c in changed)}) == 1 + len(changed)
    # what only describes the data (notes, the paper's counts, licences) does not
    described = replace(spec, notes="reworded", paper_counts={}, licenses=())
    assert described.fingerprint(data_dir) == spec.fingerprint(data_dir)


def test_a_version_bump_changes_the_fingerprint(data_dir: Path, monkeypatch):
    spec = get_dataset("ncbi-disease")
    before = spec.fingerprint(data_dir)
    monkeypatch.setattr(ner, "READER_VERSION", ner.READER_VERSION + 1)
    bumped = spec.fingerprint(data_dir)
    assert bumped != before
    assert spec.code_version() == f"datamodules.readers.ner:{ner.READER_VERSION}"


def test_a_reader_whose_module_declares_no_version_is_refused(tmp_path: Path):
    spec = DatasetSpec(name="unversioned", task_type="classification", reader=lambda base: {}, files=(),
                       labels=("a", "b"), metric="accuracy", max_length=16)
    with pytest.raises(TypeError, match="declares no READER_VERSION"):
        spec.fingerprint(tmp_path)


if __name__ == "__main__":
    from tests.conftest import _data_dir

    PINS.write_text(json.dumps(current_pins(_data_dir()), indent=1, sort_keys=True) + "\n")
    print(f"wrote {PINS}", file=sys.stderr)

"""The dataset registry's in-memory cache of parsed datasets: keyed by content, so an edited file is read
again, and every caller gets its own lists."""

from __future__ import annotations

from pathlib import Path

from datamodules import spec as dataset_spec
from datamodules.custom import register_from_yaml
from datamodules.registry import get_dataset


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

"""NER files in the schemes public corpora ship in (datamodules/custom/tagged.py): BC5-chem written as IOBES
and as BILOU reads back to the built-in reader's mentions, the scheme read is said, and entity F1 over the
spans read equals seqeval's (conlleval's rules) over the same tags."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest

from datamodules.custom import register_from_yaml
from datamodules.metrics import entity_f1
from datamodules.registry import get_dataset
from datamodules.spec import SPLITS
from datamodules.tagging import get_scheme

AS_WRITTEN = {"iobes": {"U": "S", "L": "E"}, "bilou": {}}  # from BIOUL's prefixes


def _tags(instance, scheme: str) -> list[str]:
    return [AS_WRITTEN[scheme].get(tag[0], tag[0]) + tag[1:] for tag in
            get_scheme("bioul").encode(instance.spans, len(instance.tokens))]


def _write(folder: Path, name: str, sentences: dict[str, list[tuple[tuple[str, ...], list[str]]]]) -> Path:
    folder.mkdir(parents=True)
    for split, rows in sentences.items():
        (folder / f"{split}.tsv").write_text("".join(
            "".join(f"{token}\t{tag}\n" for token, tag in zip(tokens, tags)) + "\n" for tokens, tags in rows))
    yaml = folder.parent / f"{name}.yaml"
    yaml.write_text(f"name: {name}\nformat: conll\npath: {folder.name}\nlabels: [Chemical]\n"
                    "files: {train: train.tsv, dev: dev.tsv, test: test.tsv}\n")
    return yaml


@pytest.mark.parametrize("scheme", ["iobes", "bilou"])
def test_iobes_and_bilou_files_read_as_shipped(scheme, data_dir, tmp_path, caplog):
    builtin = get_dataset("bc5-chem").read(data_dir)
    written = {split: [(x.tokens, _tags(x, scheme)) for x in builtin[split]] for split in SPLITS}
    assert any(tag.startswith(("S-", "U-")) for _, tags in written["test"] for tag in tags)
    with caplog.at_level(logging.INFO, logger="bioablate"):
        got = register_from_yaml(_write(tmp_path / "data", f"user-bc5-{scheme}", written)).read(None)
    for split in SPLITS:
        assert [x.spans for x in got[split]] == [x.spans for x in builtin[split]], split
    said = {scheme: "IOBES", "bilou": "BILOU"}[scheme]
    assert f"test.tsv tags read as {said}" in caplog.text


def _corrupt(tags: list[str], rng: random.Random) -> list[str]:
    """Predictions: a fifth of the tags replaced by any prefix of IOBES, valid sequence or not."""
    return [rng.choice(["O", "B-Chemical", "I-Chemical", "E-Chemical", "S-Chemical"]) if rng.random() < 0.2 else t
            for t in tags]


def test_entity_f1_over_iobes_files_equals_seqeval(data_dir, tmp_path):
    seqeval = pytest.importorskip("seqeval.metrics")
    builtin = get_dataset("bc5-chem").read(data_dir)["test"][:1500]
    rng = random.Random(0)
    gold_tags = [_tags(x, "iobes") for x in builtin]
    pred_tags = [_corrupt(tags, rng) for tags in gold_tags]
    rows = {split: [(x.tokens, t) for x, t in zip(builtin, tags)] for split, tags in
            (("train", gold_tags), ("dev", gold_tags), ("test", gold_tags))}
    gold = register_from_yaml(_write(tmp_path / "gold", "user-bc5-gold", rows)).read(None)["test"]
    rows["test"] = [(x.tokens, t) for x, t in zip(builtin, pred_tags)]
    predicted = register_from_yaml(_write(tmp_path / "pred", "user-bc5-pred", rows)).read(None)["test"]

    ours = entity_f1([x.spans for x in gold], [x.spans for x in predicted])
    assert 0.3 < ours["score"] < 0.95  # hits and misses, with the repair rules exercised
    assert ours["precision"] == pytest.approx(seqeval.precision_score(gold_tags, pred_tags), abs=1e-12)
    assert ours["recall"] == pytest.approx(seqeval.recall_score(gold_tags, pred_tags), abs=1e-12)
    assert ours["score"] == pytest.approx(seqeval.f1_score(gold_tags, pred_tags), abs=1e-12)

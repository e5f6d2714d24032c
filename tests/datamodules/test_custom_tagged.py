"""NER files in the schemes public corpora ship in (datamodules/custom/tagged.py): BC5-chem written as IOBES
and as BILOU reads back to the built-in reader's mentions, detected or declared (`tagging:`), the scheme read
is said, entity F1 over the spans read equals seqeval's (conlleval's rules) over the same tags, and a tag
outside a declared scheme, or an unknown scheme, is one line naming where."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pytest

from bioablate_core.errors import ConfigError, DataFormatError
from datamodules.custom import register_from_yaml
from datamodules.metrics import entity_f1
from datamodules.registry import get_dataset
from datamodules.spec import SPLITS
from datamodules.tagging import get_scheme

AS_WRITTEN = {"iobes": {"U": "S", "L": "E"}, "bilou": {}}  # from BIOUL's prefixes


def _tags(instance, scheme: str) -> list[str]:
    if scheme == "bio":
        return get_scheme("bio").encode(instance.spans, len(instance.tokens))
    return [AS_WRITTEN[scheme].get(tag[0], tag[0]) + tag[1:] for tag in
            get_scheme("bioul").encode(instance.spans, len(instance.tokens))]


def _write(folder: Path, name: str, sentences: dict[str, list[tuple[tuple[str, ...], list[str]]]],
           extra: str = "") -> Path:
    folder.mkdir(parents=True)
    for split, rows in sentences.items():
        (folder / f"{split}.tsv").write_text("".join(
            "".join(f"{token}\t{tag}\n" for token, tag in zip(tokens, tags)) + "\n" for tokens, tags in rows))
    yaml = folder.parent / f"{name}.yaml"
    yaml.write_text(f"name: {name}\nformat: conll\npath: {folder.name}\nlabels: [Chemical]\n"
                    "files: {train: train.tsv, dev: dev.tsv, test: test.tsv}\n" + extra)
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


@pytest.mark.parametrize("scheme,said", [("iobes", "IOBES"), ("bilou", "BILOU"), ("bio", "IOB2")])
def test_declared_scheme_reads_and_scores_as_detection(scheme, said, data_dir, tmp_path, caplog):
    builtin = {split: xs[:400] for split, xs in get_dataset("bc5-chem").read(data_dir).items()}
    written = {split: [(x.tokens, _tags(x, scheme)) for x in builtin[split]] for split in SPLITS}
    detected = register_from_yaml(_write(tmp_path / "auto", f"user-auto-{scheme}", written)).read(None)
    with caplog.at_level(logging.INFO, logger="bioablate"):
        declared = register_from_yaml(_write(tmp_path / "declared", f"user-declared-{scheme}", written,
                                             f"tagging: {scheme}\n")).read(None)
    for split in SPLITS:
        assert [x.spans for x in declared[split]] == [x.spans for x in builtin[split]] == \
            [x.spans for x in detected[split]], split
    gold = [x.spans for x in builtin["test"]]
    assert entity_f1(gold, [x.spans for x in declared["test"]]) == entity_f1(gold, [x.spans for x in detected["test"]])
    assert f"test.tsv tags read as {said} (declared: tagging: {scheme}" in caplog.text


@pytest.mark.parametrize("scheme,tag", [("bio", "S-Chemical"), ("bilou", "E-Chemical"), ("iobes", "U-Chemical"),
                                        ("io", "B-Chemical")])
def test_tag_outside_declared_scheme_is_one_line_naming_file_line_and_scheme(scheme, tag, tmp_path):
    rows = [(("Aspirin", "helps", "."), ["B-Chemical", "O", "O"]), (("Na", "Cl"), ["I-Chemical", "I-Chemical"])]
    rows = [(tokens, [t.replace("B-", "I-") if scheme == "io" else t for t in tags]) for tokens, tags in rows]
    bad = rows + [(("salt",), [tag])]  # on line 8: three lines, a blank, two, a blank
    yaml = _write(tmp_path / "data", f"user-{scheme}", {"train": rows, "dev": rows, "test": bad},
                  f"tagging: {scheme}\n")
    with pytest.raises(DataFormatError) as error:
        register_from_yaml(yaml).read(None)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{tmp_path / 'data' / 'test.tsv'}:8: ")
    assert f"tag '{tag}' is outside tagging scheme {scheme}" in message and str(yaml) in message


@pytest.mark.parametrize("value,nearest", [("bioes", "iobes"), ("bioul", "bilou")])
def test_unknown_tagging_scheme_is_one_line_naming_the_nearest(value, nearest, tmp_path):
    rows = [(("Aspirin",), ["B-Chemical"])]
    yaml = _write(tmp_path / "data", "user-typo", {"train": rows, "dev": rows, "test": rows}, f"tagging: {value}\n")
    with pytest.raises(ConfigError) as error:
        register_from_yaml(yaml)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{yaml}: ")
    assert f"unknown tagging '{value}'" in message and f"did you mean '{nearest}'?" in message

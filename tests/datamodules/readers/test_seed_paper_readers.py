"""Readers of BioBERT's and Bio-ELECTRA's other benchmarks on the real staged files (MANIFEST.md
sections 12-13), their folds and carved dev splits.

MANIFEST.md section 12 gives fold 1's positives as GAD 2 519 and EU-ADR 234, but the staged files hold
2 520 and 235 (`cut -f2 train.tsv | sort | uniq -c`; section 5's table also says 2 520 for the same GAD
file): the tests assert the files' numbers.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bioablate_core.errors import DataFormatError
from datamodules.instances import RelationInstance
from datamodules.readers.biobert_ner import read_untyped_iob_file
from datamodules.readers.bioelectra import question_id, read_rerank_file, read_yesno_file
from datamodules.readers.gad import read_gad
from datamodules.registry import get_dataset
from datamodules.seed_papers import BIOELECTRA_RERANK


@pytest.mark.parametrize("name, sentences, tokens, mentions", [
    ("linnaeus", (11935, 4078, 7142), (281273, 93877, 165095), (2119, 711, 1433)),
    ("s800", (5733, 830, 1630), (147291, 22217, 42298), (2557, 384, 767)),
])
def test_species_ner_counts_are_the_manifests(data_dir: Path, name, sentences, tokens, mentions):
    splits = get_dataset(name).read(data_dir)
    order = ("train", "dev", "test")
    assert tuple(len(splits[s]) for s in order) == sentences
    assert tuple(sum(len(x.tokens) for x in splits[s]) for s in order) == tokens
    assert tuple(sum(len(x.spans) for x in splits[s]) for s in order) == mentions  # one per B tag
    assert {span.label for s in order for x in splits[s] for span in x.spans} == {"SPECIES"}


def test_untyped_tags_make_species_spans_and_typed_tags_are_refused(tmp_path: Path):
    good = tmp_path / "good.tsv"
    good.write_text("Human\tB\ncells\tO\n\nE.\tB\ncoli\tI\nand\tO\nyeast\tI\n")
    first, second = read_untyped_iob_file(good, "SPECIES")
    assert [(s.start, s.end) for s in first.spans] == [(0, 1)]
    assert [(s.start, s.end) for s in second.spans] == [(0, 2), (3, 4)]  # an I after O starts a mention
    bad = tmp_path / "bad.tsv"
    bad.write_text("Human\tB\ncells\tB-Species\n")
    with pytest.raises(DataFormatError, match=r"bad\.tsv:2: expected 'token<TAB>tag' .* untyped tag B, I or O"):
        read_untyped_iob_file(bad, "SPECIES")


# dev = a tenth of the distinct sentences of each label (Python rounds halves to even):
# GAD fold 1 has 2 344 distinct positive and 2 275 negative sentences -> 234 + round(227.5) = 228 -> 462;
# EU-ADR fold 1 has 235 and 83 -> round(23.5) = 24 + round(8.3) = 8 -> 32
@pytest.mark.parametrize("name, train, positive, test, dev_sentences", [
    ("biobert-gad", 4796, 2520, 534, 462), ("euadr", 318, 235, 37, 32)])
def test_relation_fold_one_counts(data_dir: Path, name, train, positive, test, dev_sentences):
    spec = get_dataset(name)
    assert spec.fold_count == 10
    splits = spec.fold(1).read(data_dir)
    pool = splits["train"] + splits["dev"]
    assert (len(pool), sum(x.label == "1" for x in pool), len(splits["test"])) == (train, positive, test)
    assert len({x.text for x in splits["dev"]}) == dev_sentences
    assert all(isinstance(x, RelationInstance) and x.text[x.head.start:x.head.end] == "@GENE$"
               and x.text[x.tail.start:x.tail.end] == "@DISEASE$" for s in splits.values() for x in s)


def test_gad_fold_one_holds_blurbs_gad_files(data_dir: Path):
    """Fold 1 of biobert-gad is the file pair BLURB's GAD reads; only the dev carving differs."""
    fold = get_dataset("biobert-gad").fold(1).read(data_dir)
    blurb = read_gad(data_dir)
    assert fold["test"] == blurb["test"]
    assert sorted(x.id for x in fold["train"] + fold["dev"]) == sorted(x.id for x in blurb["train"] + blurb["dev"])


@pytest.mark.parametrize("name", ["biobert-gad", "euadr"])
def test_every_fold_reads_and_carved_dev_is_seeded_and_apart_from_train(data_dir: Path, name):
    spec = get_dataset(name)
    for fold in spec.each_fold():
        splits = fold.read(data_dir)
        assert splits["train"] and splits["dev"] and splits["test"]
        train_texts, dev_texts = {x.text for x in splits["train"]}, {x.text for x in splits["dev"]}
        assert not train_texts & dev_texts  # identical sentences are carved together
        dev_ids = {x.id for x in splits["dev"]}
        assert not dev_ids & {x.id for x in splits["train"]}
    assert spec.fold(3).read(data_dir) == spec.fold(3).read(data_dir)
    fingerprints = {fold.fingerprint(data_dir) for fold in spec.each_fold()}
    assert len(fingerprints) == 10
    assert spec.fold(2).name == f"{name}@fold2" and spec.fold(2).files[0].endswith("/2/train.tsv")


def test_yesno_counts_labels_and_carved_dev(data_dir: Path):
    splits = get_dataset("bioelectra-yesno").read(data_dir)
    train = splits["train"] + splits["dev"]
    assert Counter(x.label for x in train) == {"yes": 579, "no": 149}  # MANIFEST: 728 (579 / 149)
    assert Counter(x.label for x in splits["test"]) == {"yes": 102, "no": 26}  # 128 (102 / 26)
    # a tenth per label: round(57.9) = 58 yes, round(14.9) = 15 no
    assert Counter(x.label for x in splits["dev"]) == {"yes": 58, "no": 15}
    assert not {x.id for x in splits["dev"]} & {x.id for x in splits["train"]}
    first_row = next(x for x in train if x.id == "train-0")  # label 1 = yes
    assert (first_row.text_a, first_row.label) == ("Are ultraconserved enhancers important for normal development?",
                                                   "yes")


def test_rerank_pool_and_question_grouped_folds(data_dir: Path):
    pool = read_rerank_file(data_dir / "BioELECTRA/reranker/test.tsv")
    assert (len(pool), sum(x.label == "1" for x in pool)) == (9064, 117)  # MANIFEST section 13
    assert len({question_id(x.id) for x in pool}) == len({x.text_a for x in pool}) == 100
    spec = BIOELECTRA_RERANK  # registered as bioelectra-rerank (tests/datamodules/test_ranking.py)
    seen_test = []
    for fold in spec.each_fold():
        splits = fold.read(data_dir)
        questions = [{x.text_a for x in splits[s]} for s in ("train", "dev", "test")]
        assert not (questions[0] & questions[1] or questions[0] & questions[2] or questions[1] & questions[2])
        assert len(questions[2]) == 10 and len(questions[1]) == 9  # 100 questions / 10; a tenth of 90
        assert sum(len(splits[s]) for s in splits) == 9064
        seen_test += questions[2]
    assert len(seen_test) == len(set(seen_test)) == 100  # every question tested exactly once


def test_malformed_bioelectra_rows_name_file_and_line(tmp_path: Path):
    path = tmp_path / "yesno.tsv"
    path.write_text("yesno_label\tquestion\tideal_answer\n1\tIs it?\tYes.\n2\tIs it?\tNo.\n")
    with pytest.raises(DataFormatError, match=r"yesno\.tsv:3: expected yesno_label 1 \(yes\) or 0 \(no\), got '2'"):
        read_yesno_file(path, "train")
    path.write_text("label\tquestion\tanswer\n")
    with pytest.raises(DataFormatError, match=r"yesno\.tsv:1: expected the header 'yesno_label<TAB>question"):
        read_yesno_file(path, "train")
    rerank = tmp_path / "rerank.tsv"
    rerank.write_text("label\tquestion\tanswer_candidate\n1\tQ?\n")
    with pytest.raises(DataFormatError, match=r"rerank\.tsv:2: expected 3 non-empty TAB-separated columns"):
        read_rerank_file(rerank)

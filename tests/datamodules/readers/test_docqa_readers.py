"""Readers for BIOSSES, HoC, PubMedQA and BioASQ, checked against the real staged files (MANIFEST
sections 6-9) and against small malformed copies of them."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from bioablate_core.errors import DataFormatError
from datamodules.instances import PairInstance, TextInstance
from datamodules.readers.bioasq import TRAIN_FILES, bioasq_notes, read_bioasq
from datamodules.readers.biosses import read_biosses
from datamodules.readers.hoc import HOC_LABELS, HOC_SPLIT_FILE, read_hoc
from datamodules.readers.pubmedqa import read_pubmedqa
from datamodules.spec import SPLITS


def sizes(splits: dict) -> tuple[int, ...]:
    return tuple(len(splits[name]) for name in SPLITS)


def assert_disjoint_ids(splits: dict) -> None:
    ids = [instance.id for name in SPLITS for instance in splits[name]]
    assert len(ids) == len(set(ids))


# --- BIOSSES -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def biosses(data_dir: Path) -> dict:
    return read_biosses(data_dir)


def test_biosses_splits_and_scores(biosses: dict) -> None:
    assert sizes(biosses) == (64, 16, 20)
    assert_disjoint_ids(biosses)
    pairs = [p for name in SPLITS for p in biosses[name]]
    assert all(isinstance(p, PairInstance) and 0.0 <= p.label <= 4.0 for p in pairs)
    assert all(p.text_a == p.text_a.strip() and p.text_b == p.text_b.strip() for p in pairs)


def test_biosses_gold_is_the_annotator_mean(biosses: dict) -> None:
    # Pair 3 (train) is scored 2, 2, 3, 2, 2 by annotators a-e.
    pair = next(p for p in biosses["train"] if p.id == "3")
    assert pair.label == pytest.approx(11 / 5)
    assert pair.text_b.startswith("In addition, genetic and functional studies")


@pytest.fixture
def biosses_copy(tmp_path: Path, data_dir: Path) -> Path:
    shutil.copytree(data_dir / "BIOSSES", tmp_path / "BIOSSES")
    return tmp_path


def test_biosses_non_numeric_score_names_file_and_line(biosses_copy: Path) -> None:
    path = biosses_copy / "BIOSSES" / "annotation_pairs_scores.tsv"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    fields = lines[4].split("\t")
    fields[5] = "three"
    lines[4] = "\t".join(fields)
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"annotation_pairs_scores\.tsv:5: annotator_c score 'three'"):
        read_biosses(biosses_copy)


def test_biosses_pair_without_split_is_named(biosses_copy: Path) -> None:
    path = biosses_copy / "BIOSSES" / "blurb_split.tsv"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    assert lines[3].startswith("3\t")
    path.write_text("".join(lines[:3] + lines[4:]), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"blurb_split\.tsv: no split given for sentence_id\(s\) 3 "):
        read_biosses(biosses_copy)


# --- HoC -----------------------------------------------------------------------------------------------

MANIFEST_HOC_COUNTS = {
    "Sustaining proliferative signaling": 462,
    "Resisting cell death": 429,
    "Genomic instability and mutation": 333,
    "Activating invasion and metastasis": 291,
    "Tumor promoting inflammation": 240,
    "Evading growth suppressors": 240,
    "Inducing angiogenesis": 143,
    "Enabling replicative immortality": 115,
    "Avoiding immune destruction": 108,
    "Cellular energetics": 105,
}


@pytest.fixture(scope="module")
def hoc(data_dir: Path) -> dict:
    return read_hoc(data_dir)


def test_hoc_split_sizes_and_labels(hoc: dict) -> None:
    assert sizes(hoc) == (1295, 186, 371)
    assert_disjoint_ids(hoc)
    abstracts = [a for name in SPLITS for a in hoc[name]]
    assert all(isinstance(a, TextInstance) and a.labels == tuple(sorted(a.labels)) for a in abstracts)
    assert Counter(label for a in abstracts for label in a.labels) == MANIFEST_HOC_COUNTS
    assert set(HOC_LABELS) == set(MANIFEST_HOC_COUNTS)


def test_hoc_unlabelled_abstracts(hoc: dict, data_dir: Path) -> None:
    """MANIFEST's 270 counts abstracts with no annotation at all; two more are annotated only `NULL`."""
    unlabelled = {a.id for name in SPLITS for a in hoc[name] if not a.labels}
    assert len(unlabelled) == 272
    labels_dir = data_dir / "HoC/labels"
    annotated = {p for p in unlabelled if (labels_dir / f"{p}.txt").read_text(encoding="utf-8").strip("< ")}
    assert annotated == {"19770690", "22806877"}


def test_hoc_text_joins_sentences(hoc: dict, data_dir: Path) -> None:
    abstract = next(a for name in SPLITS for a in hoc[name] if a.id == "11724768")
    sentences = (data_dir / "HoC/text/11724768.txt").read_text(encoding="utf-8").splitlines()
    assert abstract.text == " ".join(sentences)
    assert abstract.labels == ("Sustaining proliferative signaling",)


def test_hoc_split_is_frozen_and_stable(hoc: dict, data_dir: Path) -> None:
    rows = HOC_SPLIT_FILE.read_text(encoding="utf-8").splitlines()
    assert rows[0] == "pmid\tsplit" and len(rows) == 1853
    assert read_hoc(data_dir) == hoc


@pytest.fixture
def hoc_copy(tmp_path: Path, data_dir: Path) -> tuple[Path, Path]:
    """A three-abstract HoC with its own split file."""
    pmids = ("11724768", "11742853", "11773160")
    for sub in ("text", "labels"):
        (tmp_path / "HoC" / sub).mkdir(parents=True)
        for pmid in pmids:
            shutil.copy(data_dir / "HoC" / sub / f"{pmid}.txt", tmp_path / "HoC" / sub)
    split_file = tmp_path / "hoc.tsv"
    split_file.write_text("pmid\tsplit\n" + "".join(f"{p}\t{s}\n" for p, s in zip(pmids, SPLITS)), encoding="utf-8")
    return tmp_path, split_file


def test_hoc_copy_reads(hoc_copy: tuple[Path, Path]) -> None:
    assert sizes(read_hoc(*hoc_copy)) == (1, 1, 1)


def test_hoc_wrong_field_count_names_file(hoc_copy: tuple[Path, Path]) -> None:
    data, split_file = hoc_copy
    labels = data / "HoC/labels/11742853.txt"
    labels.write_text(labels.read_text(encoding="utf-8") + "< ", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"11742853\.txt:1: expected \d+ '<'-separated fields"):
        read_hoc(data, split_file)


def test_hoc_unknown_hallmark_is_named(hoc_copy: tuple[Path, Path]) -> None:
    data, split_file = hoc_copy
    labels = data / "HoC/labels/11724768.txt"
    labels.write_text(labels.read_text(encoding="utf-8").replace("Sustaining", "Sustained", 1), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"11724768\.txt:1: sentence \d+: unknown top-level hallmark"):
        read_hoc(data, split_file)


def test_hoc_split_file_must_cover_the_data(hoc_copy: tuple[Path, Path]) -> None:
    data, split_file = hoc_copy
    rows = split_file.read_text(encoding="utf-8").splitlines(keepends=True)
    split_file.write_text("".join(rows[:-1]), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"hoc\.tsv: PMID 11773160 .* has no row in the split file"):
        read_hoc(data, split_file)

    split_file.write_text("".join(rows) + "99999999\ttest\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"hoc\.tsv:5: PMID 99999999 has no abstract"):
        read_hoc(data, split_file)


# --- PubMedQA ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pubmedqa(data_dir: Path) -> dict:
    return read_pubmedqa(data_dir)


def test_pubmedqa_splits(pubmedqa: dict, data_dir: Path) -> None:
    assert sizes(pubmedqa) == (450, 50, 500)
    assert_disjoint_ids(pubmedqa)
    assert Counter(q.label for q in pubmedqa["test"]) == {"yes": 276, "no": 169, "maybe": 55}
    official = json.loads((data_dir / "PubMedQA/test_ground_truth.json").read_text(encoding="utf-8"))
    assert {q.id: q.label for q in pubmedqa["test"]} == official
    # The CV folds are stratified: dev keeps roughly the pool's 276/169/55 proportions.
    assert Counter(q.label for q in pubmedqa["dev"]) == {"yes": 27, "no": 17, "maybe": 6}
    assert read_pubmedqa(data_dir) == pubmedqa


@pytest.fixture
def pubmedqa_copy(tmp_path: Path, data_dir: Path) -> Path:
    shutil.copytree(data_dir / "PubMedQA", tmp_path / "PubMedQA")
    return tmp_path


def test_pubmedqa_invalid_json_names_line(pubmedqa_copy: Path) -> None:
    path = pubmedqa_copy / "PubMedQA/ori_pqal.json"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:10]), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"ori_pqal\.json:\d+: invalid JSON .*expected one object keyed by PMID"):
        read_pubmedqa(pubmedqa_copy)


def test_pubmedqa_missing_key_names_item_and_key(pubmedqa_copy: Path) -> None:
    path = pubmedqa_copy / "PubMedQA/ori_pqal.json"
    items = json.loads(path.read_text(encoding="utf-8"))
    del items["21645374"]["QUESTION"]
    path.write_text(json.dumps(items), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"ori_pqal\.json: item 21645374 has no key 'QUESTION'"):
        read_pubmedqa(pubmedqa_copy)


def test_pubmedqa_test_label_must_agree(pubmedqa_copy: Path) -> None:
    path = pubmedqa_copy / "PubMedQA/test_ground_truth.json"
    truth = json.loads(path.read_text(encoding="utf-8"))
    truth["12377809"] = "maybe"  # its final_decision is "yes"
    path.write_text(json.dumps(truth), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"test id 12377809 is labelled 'maybe'"):
        read_pubmedqa(pubmedqa_copy)


# --- BioASQ --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bioasq(data_dir: Path) -> dict:
    return read_bioasq(data_dir)


def test_bioasq_splits(bioasq: dict, data_dir: Path) -> None:
    assert sizes(bioasq) == (349, 44, 140)
    assert_disjoint_ids(bioasq)
    assert Counter(q.label for q in bioasq["test"]) == {"yes": 94, "no": 46}
    blurb_dev = set((data_dir / "BioASQ/blurb_dev_question_ids.txt").read_text(encoding="utf-8").split())
    assert {q.id for q in bioasq["dev"]} <= blurb_dev
    assert not {q.id for q in bioasq["train"]} & blurb_dev
    assert all(q.text_a and q.text_b for name in SPLITS for q in bioasq[name])
    assert "0 duplicate id(s)" in bioasq_notes(data_dir)


def question(qid: str, answer: object = "yes") -> dict:
    snippets = [{"text": "First."}, {"text": "Second."}]
    return {"id": qid, "type": "yesno", "body": f"Is {qid} true?", "exact_answer": answer, "snippets": snippets}


def write_bioasq(root: Path, test: list[dict], batches: dict[str, list[dict]]) -> Path:
    """A minimal BioASQ folder: the given 7B test questions and 4b-6b batches (others empty)."""
    golden = root / "BioASQ" / "golden"
    golden.mkdir(parents=True)
    (golden / "7B_golden.json").write_text(json.dumps({"questions": test}), encoding="utf-8")
    for name in TRAIN_FILES:
        questions = batches.get(Path(name).name, [])
        (root / name).write_text(json.dumps({"questions": questions}), encoding="utf-8")
    (root / "BioASQ" / "blurb_dev_question_ids.txt").write_text("d1\n", encoding="utf-8")
    return root


def test_bioasq_dedup_overlap_and_answer_forms(tmp_path: Path) -> None:
    data = write_bioasq(
        tmp_path,
        test=[question("t1", ["No"]), {"id": "f1", "type": "factoid"}],
        batches={
            "4B1_golden.json": [question("q1", " Yes"), question("t1"), question("d1", [["no"]])],
            "5B2_golden.json": [question("q1", "no")],
        },
    )
    splits = read_bioasq(data)
    assert [(q.id, q.label) for name in SPLITS for q in splits[name]] == [("q1", "yes"), ("d1", "no"), ("t1", "no")]
    assert splits["test"][0].text_b == "First. Second."
    assert "Dropped: 1 question(s) also in the test set, 1 duplicate id(s)" in bioasq_notes(data)


def test_bioasq_missing_key_names_question_and_key(tmp_path: Path) -> None:
    broken = question("q7")
    del broken["snippets"]
    data = write_bioasq(tmp_path, test=[question("t1")], batches={"6B3_golden.json": [broken]})
    with pytest.raises(DataFormatError, match=r"6B3_golden\.json: question q7 has no key 'snippets'"):
        read_bioasq(data)


def test_bioasq_bad_answer_and_bad_json(tmp_path: Path) -> None:
    data = write_bioasq(tmp_path, test=[question("t1", "perhaps")], batches={})
    with pytest.raises(DataFormatError, match=r"7B_golden\.json: question t1: exact_answer 'perhaps'"):
        read_bioasq(data)
    (data / TRAIN_FILES[0]).write_text('{"questions": [\n{"id": ', encoding="utf-8")
    (data / "BioASQ/golden/7B_golden.json").write_text(json.dumps({"questions": []}), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"4B1_golden\.json:2: invalid JSON"):
        read_bioasq(data)

"""BioASQ golden-file reader for extractive QA, on the real staged files (MANIFEST section 9)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bioablate_core.errors import DataFormatError
from datamodules.instances import AnswerSpan
from datamodules.readers.bioasq_golden import GOLDEN_7B, GOLDEN_FILES, golden_splits, locate, read_golden_file

B6_1 = "BioASQ/golden/6B1_golden.json"


def test_locate_is_case_insensitive_earliest_then_longest():
    text = "Nerve growth factor (NGF) binds; ngf again."
    assert locate(text, ["NGF", "nerve growth factor"]) == AnswerSpan(0, 19)  # earliest wins
    assert locate(text, ["ngf"]) == AnswerSpan(21, 24)  # first occurrence, any case
    assert locate("IL-6R and IL-6", ["IL-6", "IL-6R"]) == AnswerSpan(0, 5)  # same start: the longest
    assert locate(text, ["insulin", " "]) is None  # blank synonyms never match
    assert locate("had AD", ["ad"]) == AnswerSpan(4, 6)  # whole words: not the "ad" of "had"
    assert locate("Stroop tests", ["Stroop Test"]) is None
    assert locate("IL-2+ cells", ["IL-2+"]) == AnswerSpan(0, 5)  # no word boundary needed after "+"


def test_6b1_factoid_counts(data_dir: Path):
    instances, counts = read_golden_file(data_dir / B6_1)
    # 31 factoid questions, 274 snippets; an answer is in 135 snippets, of 24 questions
    assert (counts.questions, counts.snippets, counts.located_snippets, counts.located_questions) == (31, 274, 135, 24)
    assert len(instances) == 274 and len({x.question_id for x in instances}) == 31
    for x in instances:
        assert x.question_type == "factoid" and x.answer_groups == ()
        assert x.id.startswith(x.question_id + "_")
        for span in x.answer_spans:  # every located span is one of the synonyms, up to case
            assert x.context[span.start:span.end].lower() in {a.lower() for a in x.answers}


def test_training_drops_unlocated_snippets_and_questions(data_dir: Path):
    instances, counts = read_golden_file(data_dir / B6_1, locate_only=True)
    assert len(instances) == 135 and all(x.answer_spans for x in instances)
    assert (counts.dropped_questions, counts.dropped_snippets) == (31 - 24, 274 - 135)


def test_unlocated_question_is_kept_at_test(data_dir: Path):
    # "What is the administration route of IVIG ...": gold "Intravenous"; its first snippet begins
    # "ntravenous immunoglobulin" (clipped in the golden file), so nothing is located there
    test, _ = read_golden_file(data_dir / B6_1)
    train, _ = read_golden_file(data_dir / B6_1, locate_only=True)
    first = test[0]
    assert first.id == "5a7d51dafaa1ab7d2e000017_000" and first.answers == ("Intravenous",)
    assert first.answer_spans == () and first.context.startswith("ntravenous")
    unlocated = {x.question_id for x in test} - {x.question_id for x in train}
    assert len(unlocated) == 7 and all(not x.answer_spans for x in test if x.question_id in unlocated)


def test_list_questions_keep_one_group_per_item(data_dir: Path):
    instances, counts = read_golden_file(data_dir / B6_1, question_types=("list",))
    assert (counts.questions, counts.snippets) == (11, 117)
    first = instances[0]
    assert first.id == "5a6d0b2db750ff445500002d_000" and first.question_type == "list"
    assert first.answer_groups == (("CUL-2LRR-1",), ("UBXN-3",))
    assert first.answers == ("CUL-2LRR-1", "UBXN-3")


def test_factoid_synonyms_across_inner_lists(data_dir: Path):
    # 5B2: "What is the target of tanezumab?" exact_answer [["nerve growth factor"], ["NGF"]]
    instances, _ = read_golden_file(data_dir / "BioASQ/golden/5B2_golden.json")
    tanezumab = next(x for x in instances if x.question.startswith("What is the target of tanezumab"))
    assert tanezumab.answers == ("nerve growth factor", "NGF")


def test_blank_answer_is_kept_at_test_with_no_gold(data_dir: Path):
    # 4B5 question 571e4523bb137a4b0c00000c is a factoid answered [[" "]]
    instances, counts = read_golden_file(data_dir / "BioASQ/golden/4B5_golden.json")
    assert counts.blank_answers == 1
    blank = [x for x in instances if x.question_id == "571e4523bb137a4b0c00000c"]
    assert blank and all(x.answers == () and x.answer_spans == () for x in blank)


def test_7b_counts(data_dir: Path):
    _, factoid = read_golden_file(data_dir / GOLDEN_7B)
    _, listed = read_golden_file(data_dir / GOLDEN_7B, question_types=("list",))
    assert (factoid.questions, factoid.snippets, factoid.located_questions) == (162, 1167, 124)
    assert (listed.questions, listed.snippets) == (88, 639)


def test_splits_train_4b_5b_test_6b(data_dir: Path):
    splits, counts = golden_splits(data_dir, train=GOLDEN_FILES[:10], test=GOLDEN_FILES[10:])
    assert len(splits["test"]) == 1594 and len({x.question_id for x in splits["test"]}) == 161
    assert len(splits["train"]) == 628 and len({x.question_id for x in splits["train"]}) == 229
    assert splits["dev"] == [] and counts.test_overlap_dropped == 0
    assert counts.questions == 161 + 311  # 311 factoid questions in 4b-5b, 82 of them unlocated
    assert counts.dropped_questions == 82


def test_splits_drop_training_questions_that_are_test_questions(data_dir: Path):
    splits, counts = golden_splits(data_dir, train=[B6_1], test=[B6_1])
    assert splits["train"] == [] and counts.test_overlap_dropped == 24  # the 24 located questions


@pytest.fixture
def golden_copy(tmp_path: Path, data_dir: Path) -> Path:
    (tmp_path / "BioASQ/golden").mkdir(parents=True)
    shutil.copy(data_dir / B6_1, tmp_path / B6_1)
    return tmp_path / B6_1


def edit_first_factoid(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(next(q for q in data["questions"] if q["type"] == "factoid"))
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("change, message", [
    (lambda q: q.update(exact_answer="Intravenous"),
     r"question 5a7d51dafaa1ab7d2e000017: exact_answer must be a non-empty list"),
    (lambda q: q.update(exact_answer=[[3]]), r"exact_answer holds int"),
    (lambda q: q["snippets"][1].pop("text"), r"snippets\[1\] has no string key 'text'"),
    (lambda q: q.pop("body"), r"question 5a7d51dafaa1ab7d2e000017 has no key 'body'"),
])
def test_malformed_question_names_file_and_question(golden_copy: Path, change, message):
    edit_first_factoid(golden_copy, change)
    with pytest.raises(DataFormatError, match=r"6B1_golden\.json: .*" + message):
        read_golden_file(golden_copy)


def test_question_without_snippets_kept_at_test_dropped_for_training(golden_copy: Path):
    edit_first_factoid(golden_copy, lambda q: q.update(snippets=[]))
    test, counts = read_golden_file(golden_copy)
    kept = [x for x in test if x.question_id == "5a7d51dafaa1ab7d2e000017"]
    assert [(x.id, x.context) for x in kept] == [("5a7d51dafaa1ab7d2e000017_000", "")]
    train, counts = read_golden_file(golden_copy, locate_only=True)
    assert all(x.question_id != "5a7d51dafaa1ab7d2e000017" for x in train)
    assert counts.dropped_questions == 7 + 1  # its second snippet held "intravenous"; now it has none

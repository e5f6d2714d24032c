"""SQuAD v1.1 reader, on the real staged files (MANIFEST sections 12-13) and small malformed ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bioablate_core.errors import DataFormatError
from datamodules.readers.bioasq_golden import read_golden_file
from datamodules.readers.squad import (
    BIOBERT_TEST_FILES,
    BIOELECTRA_BIOASQ_FILE,
    question_id_of,
    read_squad_file,
    read_squad_splits,
)


def test_question_ids():
    assert question_id_of("5a6a3335b750ff4455000025_000") == "5a6a3335b750ff4455000025"  # BioBERT
    assert question_id_of("58edf567eda5a57672000011:5") == "58edf567eda5a57672000011"  # Bio-ELECTRA
    assert question_id_of("a_b_12") == "a_b"  # the last separator
    assert question_id_of("56be4db0acb8c2140047f05c") == "56be4db0acb8c2140047f05c"  # SQuAD: its own
    assert question_id_of("q_x1") == "q_x1"  # not digits after the separator


def test_bioelectra_bioasq_has_one_located_answer_per_pair(data_dir: Path):
    instances = read_squad_file(data_dir / BIOELECTRA_BIOASQ_FILE)
    assert len(instances) == 1809
    assert len({x.question_id for x in instances}) == 214
    for x in instances:
        assert len(x.answers) == 1 and len(x.answer_spans) == 1
        span = x.answer_spans[0]
        assert x.context[span.start:span.end] == x.answers[0]
        assert x.question_type == "squad"
    first = instances[0]
    assert (first.id, first.answers, first.answer_starts) == ("58edf567eda5a57672000011:5", ("48 genes",), (101,))


def test_biobert_test_inputs_have_no_answers_and_group_by_question(data_dir: Path):
    splits = read_squad_splits(data_dir, {"test": BIOBERT_TEST_FILES}, question_type="factoid")
    assert (len(splits["train"]), len(splits["dev"]), len(splits["test"])) == (0, 0, 1672)
    assert all(x.answers == () and x.answer_spans == () for x in splits["test"])
    batch = read_squad_file(data_dir / "BioBERT/QA/BioASQ-test-factoid-6b-1.json")
    assert len(batch) == 121
    golden, _ = read_golden_file(data_dir / "BioASQ/golden/6B1_golden.json")
    # the 121 snippets belong to the 31 factoid questions of the 6B1 golden batch
    assert {x.question_id for x in batch} == {x.question_id for x in golden}
    assert len({x.question_id for x in golden}) == 31


def write(tmp_path: Path, data) -> Path:
    path = tmp_path / "qa.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def squad(qas, context="The cat sat on the mat.") -> dict:
    return {"data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}


def test_answer_not_at_its_offset_names_the_question(tmp_path: Path):
    path = write(tmp_path, squad([{"id": "q1", "question": "Who?", "answers": [{"text": "cat", "answer_start": 5}]}]))
    with pytest.raises(DataFormatError, match=r"qa\.json: data\[0\]\.paragraphs\[0\]\.qas\[0\]\.answers\[0\] "
                                              r"\(id q1\): answer 'cat' is not at answer_start 5"):
        read_squad_file(path)


@pytest.mark.parametrize("qas, message", [
    ([{"question": "Who?"}], r"qas\[0\] has no key 'id'"),
    ([{"id": "q1", "question": 3}], r"qas\[0\]\.question: expected str, found int"),
    ([{"id": "q1", "question": "?", "answers": [{"text": "cat"}]}],
     r"answers\[0\] \(id q1\) has no key 'answer_start'"),
    ([{"id": "q1", "question": "?"}, {"id": "q1", "question": "?"}], r"qas\[1\]: id 'q1' occurs twice"),
])
def test_malformed_qas(tmp_path: Path, qas, message):
    with pytest.raises(DataFormatError, match=message):
        read_squad_file(write(tmp_path, squad(qas)))


def test_not_squad_and_invalid_json(tmp_path: Path):
    with pytest.raises(DataFormatError, match="list under \"data\""):
        read_squad_file(write(tmp_path, {"questions": []}))
    with pytest.raises(DataFormatError, match=r"qa\.json:2: invalid JSON"):
        read_squad_file(write(tmp_path, '{"data": [\n}'))


def test_answers_optional_and_user_file_read(tmp_path: Path):
    path = write(tmp_path, squad([{"id": "q1", "question": "Where?", "answers": [
        {"text": "the mat", "answer_start": 15}, {"text": "mat", "answer_start": 19}]}, {"id": "q2", "question": "?"}]))
    first, second = read_squad_file(path)
    assert first.answers == ("the mat", "mat") and first.answer_starts == (15, 19)
    assert second.answers == () and second.question_id == "q2"

"""Bio-ELECTRA's factoid / list extractive QA (Table 2) as a registered dataset, `bioelectra-factoid`: the
staged test file (BioASQ 8b question x snippet pairs in SQuAD v1.1 format, 1,809 pairs of 214 questions),
dealt into 10 folds by question, each pair scored on its own with SQuAD's exact match and token F1."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from ablations.cli import main
from ablations.config import build_config
from datamodules.finetune_data import FinetuneDataModule, FinetuneDataOptions
from datamodules.readers.squad import read_squad_file
from datamodules.registry import get_dataset
from lightning_modules.models import load_encoder

FILE = "BioELECTRA/bioasq/dev.json"


@pytest.fixture(scope="module")
def staged(data_dir: Path):
    return read_squad_file(data_dir / FILE)


def test_the_dataset_is_registered_as_extractive_qa_scored_with_squad(staged):
    spec = get_dataset("bioelectra-factoid")
    assert (spec.task_type, spec.metric, spec.fold_count, spec.files) == ("qa-extractive", "squad_v1", 10, (FILE,))
    assert spec.paper_counts == {"train": 9557, "test": 1809} and spec.count_unit == "pairs"
    assert len(staged) == 1809 and len({x.question_id for x in staged}) == 214
    assert all(len(x.answers) == 1 and x.answer_spans for x in staged)  # one located answer per pair


def test_folds_deal_whole_questions_and_test_every_pair_once(staged, data_dir):
    spec = get_dataset("bioelectra-factoid")
    tested: Counter[str] = Counter()
    for fold in spec.each_fold():
        splits = fold.read(data_dir)
        questions = {split: {x.question_id for x in splits[split]} for split in ("train", "dev", "test")}
        # a question's snippets share its answer: no question on two sides of a fold
        assert not questions["train"] & questions["test"] and not questions["train"] & questions["dev"]
        assert not questions["dev"] & questions["test"]
        assert sum(len(s) for s in splits.values()) == 1809
        assert 20 <= len(questions["test"]) <= 22 and len(questions["dev"]) >= 15  # 214 / 10; a tenth of train
        tested.update(x.id for x in splits["test"])
    assert set(tested) == {x.id for x in staged} and set(tested.values()) == {1}
    # seeded: the same folds on every read
    assert [x.id for x in spec.fold(3).read(data_dir)["test"]] == [x.id for x in spec.fold(3).read(data_dir)["test"]]


def test_each_pair_is_scored_on_its_own_with_exact_match_and_token_f1(data_dir):
    tokenizer = load_encoder(build_config("micro", [], task="bc5-chem").model, data_dir, 0.1)[1]
    options = FinetuneDataOptions(max_length=192, batch_size=16, eval_batch_size=32)
    datamodule = FinetuneDataModule(get_dataset("bioelectra-factoid"), data_dir, tokenizer, options)
    datamodule.setup()
    test = datamodule.instances["test"]
    encoder = datamodule.encoder
    assert encoder.group_by is None and len(test) > len({x.question_id for x in test})
    gold = encoder.score(test, [[(x.answers[0], 1.0)] for x in test])
    assert gold == {"score": 1.0, "em": 1.0, "f1": 1.0, "total": float(len(test))}
    # one word more than the answer: no exact match, a token F1 below 1
    longer = encoder.score(test, [[(x.answers[0] + " cells", 1.0)] for x in test])
    assert longer["em"] == 0.0 and 0.0 < longer["f1"] < 1.0
    # a pair is right or wrong on its own: answering only the first pair of each question
    first = {}
    for i, x in enumerate(test):
        first.setdefault(x.question_id, i)
    some = encoder.score(test, [[(x.answers[0], 1.0)] if first[x.question_id] == i else [] for i, x in enumerate(test)])
    assert some["em"] == pytest.approx(len(first) / len(test))


def test_data_stats_counts_the_fold_and_says_what_differs(data_dir, capsys):
    assert main(["data", "stats", "--task", "bioelectra-factoid", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[1]: line.split() for line in out.splitlines() if line.startswith("bioelectra-factoid ")}
    assert set(rows) == {"train", "dev", "test"} and rows["test"][4] == "1809"  # ours (fold 1) vs the paper's
    assert sum(int(r[3]) for r in rows.values()) == 1809
    header = out.splitlines()[0]  # the dataset column as wide as the longest name
    assert header.index("split") == len("bioelectra-factoid") + 1
    assert all(line.index(" train " if " train " in line else " dev " if " dev " in line else " test ") ==
               len("bioelectra-factoid") for line in out.splitlines() if line.startswith("bioelectra-factoid "))
    assert "10 seeded folds over the test file's questions" in out and "not comparable" in out
    assert "counts fold 1" in out

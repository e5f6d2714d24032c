"""`finetune.max_eval_examples` on tasks whose metric scores groups of instances: a capped dev or test split
keeps whole groups (all candidates of a ranked question, all snippets of a BioASQ question), so that the
micro profile's 32 evaluation examples still give a meaningful MRR; tasks scored per instance (SQuAD's
per-pair EM / F1, NER, ...) are capped per instance as before, and training is always capped per instance.
On the staged Bio-ELECTRA and BioASQ files. (The run fingerprint that follows: tests/ablations/run/test_finetune.py.)"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from ablations.config import build_config
from datamodules.finetune_data import FinetuneDataModule, FinetuneDataOptions, subsample
from datamodules.metrics import mean_reciprocal_rank
from datamodules.registry import get_dataset
from lightning_modules.models import load_encoder

CAP = 32


@pytest.fixture(scope="module")
def tokenizer(data_dir: Path):
    return load_encoder(build_config("micro", [], task="bc5-chem").model, data_dir, 0.1)[1]


def capped(task: str, data_dir: Path, tokenizer, limit: int = CAP) -> FinetuneDataModule:
    options = FinetuneDataOptions(max_length=64, batch_size=16, eval_batch_size=32, max_train_examples=limit,
                                  max_eval_examples=limit)
    datamodule = FinetuneDataModule(get_dataset(task), data_dir, tokenizer, options)
    datamodule.setup()
    return datamodule


@pytest.mark.parametrize("task,group_by", [("bioelectra-rerank", "text_a"), ("bioasq-6b-factoid", "question_id")])
def test_a_capped_evaluation_keeps_whole_groups_where_the_metric_scores_by_group(task, group_by, data_dir, tokenizer):
    datamodule = capped(task, data_dir, tokenizer)
    assert datamodule.encoder.group_by == group_by
    full = get_dataset(task).read(data_dir)
    for split in ("dev", "test"):
        kept = datamodule.instances[split]
        groups = {getattr(x, group_by) for x in kept}
        # every member of every kept group, in corpus order: nothing cut apart
        assert kept == [x for x in full[split] if getattr(x, group_by) in groups]
        assert len(kept) <= CAP or len(groups) == 1  # within the cap, or one group larger than it
        assert len(kept) < len(full[split])
    assert len(datamodule.instances["train"]) == CAP  # training is capped per instance


def test_a_capped_ranking_test_set_scores_whole_questions(data_dir, tokenizer):
    """The staged re-ranking questions are ~100 candidates each with one relevant among them: a per-pair
    sample of 32 of a fold's 976 test pairs holds no relevant candidate at all (MRR 0, nothing ranked),
    the whole-question cap one whole question, which a perfect scorer ranks first."""
    datamodule = capped("bioelectra-rerank", data_dir, tokenizer)
    test = datamodule.instances["test"]
    oracle = {i: 1.0 if x.label == "1" else 0.0 for i, x in enumerate(test)}
    metrics, _ = datamodule.score("test", oracle)
    assert metrics["score"] == 1.0 and metrics["questions"] == len({x.text_a for x in test}) >= 1
    assert metrics["questions_without_positive"] == 0

    per_pair = subsample(get_dataset("bioelectra-rerank").read(data_dir)["test"], CAP)  # the cap before
    cut = mean_reciprocal_rank([x.label for x in per_pair], [1.0 if x.label == "1" else 0.0 for x in per_pair],
                               [x.text_a for x in per_pair])
    # the fold's 10 test questions all touched, none with its relevant candidate
    assert cut["score"] == 0.0 and cut["questions"] == 0 and cut["questions_without_positive"] == 10


def test_capped_bioasq_questions_are_scored_over_all_their_snippets(data_dir, tokenizer):
    datamodule = capped("bioasq-6b-factoid", data_dir, tokenizer)
    test = datamodule.instances["test"]
    snippets = Counter(x.question_id for x in get_dataset("bioasq-6b-factoid").read(data_dir)["test"])
    records = datamodule.encoder.question_records(test, [[] for _ in test])
    assert records and all(r["contexts"] == snippets[r["id"]] for r in records)
    assert datamodule.encoder.score(test, [[] for _ in test])["total"] == len(records)


@pytest.mark.parametrize("task", ["bioelectra-factoid", "bc5-chem"])
def test_tasks_scored_per_instance_are_capped_per_instance(task, data_dir, tokenizer):
    datamodule = capped(task, data_dir, tokenizer)
    assert datamodule.encoder.group_by is None
    full = get_dataset(task).read(data_dir)
    for split in ("train", "dev", "test"):
        assert datamodule.instances[split] == subsample(full[split], CAP) and len(datamodule.instances[split]) == CAP
    if task == "bioelectra-factoid":  # SQuAD scores each question x snippet pair: one per kept pair
        test = datamodule.instances["test"]
        assert len({x.question_id for x in test}) < CAP  # pairs of one question may be kept apart
        assert datamodule.encoder.score(test, [[] for _ in test])["total"] == CAP


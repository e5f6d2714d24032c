"""Bio-ELECTRA's answer re-ranking (Table 5) as a registered dataset, `bioelectra-rerank`: pair
classification whose prediction per (question, candidate) pair is the relevant label's probability, scored
by MRR over each question's candidates. On the staged file (9,064 pairs, 100 questions, 117 relevant),
dealt into 10 folds by question."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
import torch
from transformers import BertTokenizer

from datamodules.metrics import mean_reciprocal_rank
from datamodules.readers.bioelectra import question_id
from datamodules.registry import get_dataset
from datamodules.task_kinds import make_encoder
from lightning_modules.heads import HeadSpec


@pytest.fixture(scope="module")
def encoder(data_dir: Path):
    tokenizer = BertTokenizer(vocab=str(data_dir / "vocab" / "pubmedbert-uncased" / "vocab.txt"))
    return make_encoder(get_dataset("bioelectra-rerank"), tokenizer, 128)


@pytest.fixture(scope="module")
def test_split(data_dir: Path):
    return get_dataset("bioelectra-rerank").fold(1).read(data_dir)["test"]


def mrr_by_hand(instances, scores) -> float:
    """Per question (the `q<n>` of the ids): 1 / (1 + candidates scored at least as high as its best relevant
    one, other than itself); questions without a relevant candidate left out."""
    by_question = defaultdict(list)
    for instance, score in zip(instances, scores):
        by_question[question_id(instance.id)].append((score, instance.label == "1"))
    ranks = []
    for candidates in by_question.values():
        relevant = [s for s, positive in candidates if positive]
        if relevant:
            ordered = sorted(candidates, key=lambda c: (-c[0], c[1]))  # ties: irrelevant first
            ranks.append(1 / (1 + next(i for i, c in enumerate(ordered) if c[1])))
    return sum(ranks) / len(ranks)


def test_the_dataset_is_registered_as_a_ranking_task(encoder, test_split):
    spec = get_dataset("bioelectra-rerank")
    assert (spec.task_type, spec.metric, spec.labels) == ("qa", "mean_reciprocal_rank", ("0", "1"))
    assert (encoder.output_kind, encoder.num_labels) == ("ranking", 2)
    # fold 1's test split: 10 whole questions, with their every candidate
    assert len({x.text_a for x in test_split}) == 10
    features = encoder.encode(test_split[:3])
    assert [f["labels"] for f in features] == [encoder.label_ids[x.label] for x in test_split[:3]]


def test_the_head_predicts_the_relevant_labels_probability(encoder):
    head = HeadSpec().build(encoder, 8)
    logits = torch.tensor([[0.0, 0.0], [2.0, -1.0], [-3.0, 1.0]])
    expected = [0.5, 1 / (1 + torch.exp(torch.tensor(3.0)).item()), 1 / (1 + torch.exp(torch.tensor(-4.0)).item())]
    assert head.predict(logits, {}).tolist() == pytest.approx(expected)
    assert encoder.decode({}, head.predict(logits, {})[2].item()) == pytest.approx(expected[2])


def test_mrr_of_candidate_scores_matches_a_hand_computation(encoder, test_split):
    # a fixed, uninformative score per candidate (its position, folded): some relevant candidates first
    scores = [((i * 37) % 101) / 101 for i in range(len(test_split))]
    result = encoder.score(test_split, scores)
    assert result["score"] == pytest.approx(mrr_by_hand(test_split, scores))
    assert result["questions"] + result["questions_without_positive"] == 10
    # every relevant candidate scored above its question's others: MRR 1
    perfect = [1.0 if x.label == "1" else 0.0 for x in test_split]
    assert encoder.score(test_split, perfect)["score"] == 1.0


def test_candidates_are_ranked_within_their_question_not_across_questions(encoder, test_split):
    """Each question's relevant candidate tops its own question but is outscored by another question's
    every candidate: MRR 1 grouped by question (a ranking across the file would give much less)."""
    questions = sorted({x.text_a for x in test_split})
    offset = {q: i for i, q in enumerate(questions)}  # question i's scores lie in [i, i + 1)
    scores = [offset[x.text_a] + (0.9 if x.label == "1" else 0.1) for x in test_split]
    result = encoder.score(test_split, scores)
    assert result["score"] == 1.0 and result["hits_at_1"] == 1.0
    # the same scores grouped otherwise (by candidate number across questions): the relevant candidates of
    # the lower questions fall below the higher questions' irrelevant ones
    by_candidate = [x.id.partition("-")[2] for x in test_split]
    assert mean_reciprocal_rank([x.label for x in test_split], scores, by_candidate)["score"] < 0.9
    # reverse within each question: its relevant candidate ranks last among its own
    worst = [offset[x.text_a] + (0.1 if x.label == "1" else 0.9) for x in test_split]
    assert encoder.score(test_split, worst)["score"] == pytest.approx(mrr_by_hand(test_split, worst))
    assert encoder.score(test_split, worst)["score"] < 0.2

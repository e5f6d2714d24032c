"""Bio-ELECTRA's metrics (per-class P/R/F1 for yes/no, MRR for answer-candidate ranking) and balanced
class weights, against figures computed by hand."""

from __future__ import annotations

import pytest

from datamodules.class_weights import balanced_class_weights, training_class_weights
from datamodules.instances import PairInstance, TextInstance
from datamodules.metrics import METRIC_NAMES, curve_keys, is_count, mean_reciprocal_rank, metric_keys, per_class_f1


def test_per_class_f1_by_hand():
    gold = ["yes", "yes", "yes", "yes", "no", "no"]
    pred = ["yes", "yes", "yes", "no", "yes", "no"]
    result = per_class_f1(gold, pred, ("yes", "no"))
    # yes: tp 3 (rows 0-2), fp 1 (row 4), fn 1 (row 3) -> P 3/4, R 3/4, F1 3/4
    # no:  tp 1 (row 5),    fp 1 (row 3), fn 1 (row 4) -> P 1/2, R 1/2, F1 1/2
    assert result["precision_yes"] == result["recall_yes"] == result["f1_yes"] == pytest.approx(0.75)
    assert result["precision_no"] == result["recall_no"] == result["f1_no"] == pytest.approx(0.5)
    assert (result["support_yes"], result["support_no"]) == (4.0, 2.0)
    assert result["score"] == pytest.approx((0.75 + 0.5) / 2)  # macro F1 = 0.625
    assert result["precision"] == result["recall"] == pytest.approx(0.625)


def test_per_class_f1_always_yes_scores_zero_for_no():
    # the "stuck" classifier of Bio-ELECTRA's Table 3 discussion: 4 yes, 1 no, always answering yes
    result = per_class_f1(["yes"] * 4 + ["no"], ["yes"] * 5, ("yes", "no"))
    # yes: P 4/5, R 1, F1 2*0.8*1/1.8 = 8/9; no: nothing predicted -> P = R = F1 = 0
    assert result["f1_yes"] == pytest.approx(8 / 9) and result["f1_no"] == 0.0
    assert result["score"] == pytest.approx(4 / 9)


def test_per_class_f1_refuses_unknown_labels_and_names_its_keys():
    with pytest.raises(ValueError, match="maybe"):
        per_class_f1(["yes"], ["maybe"], ("yes", "no"))
    assert metric_keys("per_class_f1", {"labels": ("yes", "no")}) == {
        "score", "precision", "recall", "precision_yes", "recall_yes", "f1_yes", "precision_no", "recall_no", "f1_no"}
    assert curve_keys(per_class_f1(["yes"], ["yes"], ("yes", "no"))) == ["score", "precision", "recall"]
    assert METRIC_NAMES["per_class_f1"] == "macro F1"


def test_mean_reciprocal_rank_by_hand():
    gold = ["0", "1", "0", "0", "1", "1", "0", "0", "0"]
    scores = [0.9, 0.8, 0.1, 0.3, 0.2, 0.7, 0.5, 0.4, 0.6]
    groups = ["a", "a", "a", "b", "b", "c", "c", "d", "d"]
    result = mean_reciprocal_rank(gold, scores, groups)
    # a: 0.9 (neg) > 0.8 (pos) -> rank 2, RR 1/2;  b: 0.3 (neg) > 0.2 (pos) -> rank 2, RR 1/2
    # c: 0.7 (pos) first -> RR 1;  d: no relevant candidate -> left out, counted
    assert result["score"] == pytest.approx((0.5 + 0.5 + 1.0) / 3)
    assert result["hits_at_1"] == pytest.approx(1 / 3)
    assert (result["questions"], result["questions_without_positive"]) == (3.0, 1.0)
    assert is_count("questions") and is_count("questions_without_positive")


def test_mrr_ties_count_against_the_model_and_the_best_positive_counts():
    # one question, all scores equal: the positive ranks after both negatives -> 1/3, whatever the order
    assert mean_reciprocal_rank(["1", "0", "0"], [0.5, 0.5, 0.5], ["q"] * 3)["score"] == pytest.approx(1 / 3)
    # two positives: the better one (0.6, below one negative 0.7) -> rank 2
    assert mean_reciprocal_rank(["1", "0", "1"], [0.1, 0.7, 0.6], ["q"] * 3)["score"] == pytest.approx(0.5)
    assert mean_reciprocal_rank([], [], [])["score"] == 0.0
    with pytest.raises(ValueError, match="groups"):
        mean_reciprocal_rank(["1"], [0.5], [])


def test_balanced_class_weights_by_hand():
    # 8 samples, 2 classes: yes 6, no 2 -> yes 8 / (2 * 6) = 2/3, no 8 / (2 * 2) = 2
    assert balanced_class_weights(["yes"] * 6 + ["no"] * 2, ("yes", "no")) == pytest.approx((2 / 3, 2.0))
    # 6 samples, 3 classes a 1, b 2, c 3 -> 6/3 = 2, 6/6 = 1, 6/9 = 2/3 (order follows `classes`)
    assert balanced_class_weights(list("abbccc"), ("c", "a", "b")) == pytest.approx((2 / 3, 2.0, 1.0))
    with pytest.raises(ValueError, match=r"\['no'\] do not occur"):
        balanced_class_weights(["yes"], ("yes", "no"))
    with pytest.raises(ValueError, match=r"\['maybe'\] are not among"):
        balanced_class_weights(["yes", "maybe"], ("yes",))


def test_training_class_weights_read_instance_labels():
    train = [PairInstance(str(i), "q", "a", "yes" if i < 3 else "no") for i in range(4)]
    # yes 3, no 1 of 4 -> 4/6, 4/2
    assert training_class_weights(train, ("yes", "no")) == pytest.approx((2 / 3, 2.0))
    assert training_class_weights([TextInstance("t", "x", ("a",)), TextInstance("u", "y", ("b",))],
                                  ("a", "b")) == (1.0, 1.0)
    with pytest.raises(ValueError, match="2 labels"):
        training_class_weights([TextInstance("t", "x", ("a", "b"))], ("a", "b"))

"""QA metrics (datamodules/qa_metrics.py): hand-worked cases, arithmetic in the comments."""

from __future__ import annotations

import pytest

from datamodules.metrics import METRICS, metric_keys
from datamodules.qa_metrics import (
    bioasq_factoid,
    bioasq_list,
    list_question_prf,
    normalize_answer,
    squad_exact_match,
    squad_token_f1,
    squad_v1,
)


def test_registered_and_empty_inputs_score_zero():
    assert METRICS.get("bioasq_factoid") is bioasq_factoid
    assert METRICS.get("bioasq_list") is bioasq_list
    assert METRICS.get("squad_v1") is squad_v1
    assert metric_keys("bioasq_factoid", {}) == {"score", "strict", "lenient", "mrr"}
    assert metric_keys("bioasq_list", {}) == {"score", "precision", "recall", "f1"}
    assert metric_keys("squad_v1", {}) == {"score", "em", "f1"}
    assert bioasq_factoid([], [])["score"] == 0.0


# ---------------------------------------------------------------------------------------- BioASQ factoid


def test_factoid_strict_lenient_mrr():
    gold = [("IL-6", "interleukin 6"), ("BRCA1",), ("TP53",), ("x",)]
    pred = [
        ["il-6", "other"],  # rank 1 (case-insensitive synonym): strict, lenient, RR 1
        ["a", "b", "brca1"],  # rank 3: lenient, RR 1/3
        ["a", "b", "c", "d", "e", "TP53"],  # rank 6: beyond the five that count -> 0
        [],  # no answer -> 0
    ]
    result = bioasq_factoid(gold, pred)
    assert result["strict"] == pytest.approx(1 / 4)  # only question 1
    assert result["lenient"] == pytest.approx(2 / 4)  # questions 1 and 2
    assert result["mrr"] == pytest.approx((1 + 1 / 3) / 4)  # = 1/3
    assert result["score"] == result["mrr"]
    assert result["total"] == 4.0


def test_factoid_only_lowercasing_no_other_normalisation():
    # the organisers lower-case and compare with equals: "IL 6" is not "IL-6", "the p53" is not "p53"
    result = bioasq_factoid([("IL-6",), ("p53",)], [["IL 6"], ["the p53"]])
    assert result["lenient"] == 0.0


def test_factoid_question_without_gold_is_wrong():
    # 4B5 has a factoid answered [[" "]]: no gold synonym left, nothing can be right
    assert bioasq_factoid([()], [["anything"]])["lenient"] == 0.0


# ------------------------------------------------------------------------------------------- BioASQ list


def test_list_prf_per_question_then_mean():
    gold = [(("a", "alpha"), ("b",), ("c",)), (("x",),)]
    pred = [["ALPHA", "a", "b", "d"], []]
    # question 1: ALPHA -> item 1 (tp, used up); a -> item 1 already used (fp); b -> tp; d -> fp;
    # c unmatched -> fn. tp 2, fp 2, fn 1: P = 2/4, R = 2/3, F = 2 * 1/2 * 2/3 / (1/2 + 2/3) = 4/7
    assert list_question_prf(gold[0], pred[0]) == pytest.approx((1 / 2, 2 / 3, 4 / 7))
    # question 2: no answers -> 0, 0, 0
    result = bioasq_list(gold, pred)
    assert result["precision"] == pytest.approx((1 / 2 + 0) / 2)
    assert result["recall"] == pytest.approx((2 / 3 + 0) / 2)
    assert result["f1"] == pytest.approx((4 / 7 + 0) / 2)
    assert result["score"] == result["f1"]


def test_list_shared_synonym_follows_the_organisers_second_pass():
    # items {x, y} and {y, z}; answer y matches item 1 (tp 1, fp 0). The organisers' FN pass finds y among
    # the answers for item 2, so it is no false negative: P = R = F = 1 (a plain count would give R = 1/2)
    assert list_question_prf([("x", "y"), ("y", "z")], ["y"]) == (1.0, 1.0, 1.0)


# ------------------------------------------------------------------------------------------------- SQuAD


def test_squad_normalisation():
    # lower, punctuation out ("cat's" -> "cats", "!" and "," gone), articles out, spaces collapsed
    assert normalize_answer("The  Cat's, a hat!") == "cats hat"
    assert normalize_answer("theory of an anthem") == "theory of anthem"  # whole words only


def test_squad_em_and_f1_max_over_gold_answers():
    gold = [("the IL-6 receptor", "IL6R"), ("an answer",), ()]
    pred = ["IL-6 receptor complex", "Answer.", "x"]
    # 1: "il6 receptor complex" vs "il6 receptor": shared 2, P = 2/3, R = 2/2, F1 = 2 * 2/3 / (5/3) = 0.8;
    #    vs "il6r": shared 0 -> 0. Max 0.8; EM 0.
    assert squad_token_f1(pred[0], gold[0][0]) == pytest.approx(0.8)
    assert squad_exact_match(pred[0], gold[0][0]) == 0.0
    # 2: "answer" == "answer": EM 1, F1 1.   3: no gold answer -> 0, 0
    result = squad_v1(gold, pred)
    assert result["em"] == pytest.approx(1 / 3)
    assert result["f1"] == pytest.approx((0.8 + 1) / 3)  # = 0.6
    assert result["score"] == result["f1"]


def test_squad_f1_counts_repeated_tokens_as_a_multiset():
    # pred "a b b" -> tokens [b, b] ("a" is an article); gold "b c" -> [b, c]: shared min(2, 1) = 1,
    # P = 1/2, R = 1/2, F1 = 1/2
    assert squad_token_f1("a b b", "b c") == pytest.approx(0.5)


def test_lengths_must_match():
    with pytest.raises(ValueError):
        squad_v1([("a",)], [])

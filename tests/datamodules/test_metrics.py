"""BLURB metrics: hand-worked cases (arithmetic in the comments), agreement with seqeval on real NER files,
with sklearn / scipy on random data."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from datamodules.instances import Span, iob_to_spans
from datamodules.metrics import (
    METRICS,
    accuracy,
    blurb_score,
    entity_f1,
    multilabel_micro_f1,
    pearson,
    pico_word_macro_f1,
    positive_class_f1,
    relation_micro_f1,
)
from datamodules.textfiles import conll_blocks


def D(start: int, end: int, label: str = "Disease") -> Span:
    return Span(start, end, label)


# --------------------------------------------------------------------------------------------- entity F1


def test_entity_f1_partial_overlap_is_both_fp_and_fn():
    # gold [0,2) vs pred [0,1): not an exact match -> TP 0, FP 1, FN 1 -> P = R = F1 = 0
    result = entity_f1([[D(0, 2)]], [[D(0, 1)]])
    assert (result["tp"], result["fp"], result["fn"]) == (0.0, 1.0, 1.0)
    assert result["score"] == result["precision"] == result["recall"] == 0.0


def test_entity_f1_several_sentences():
    gold = [
        [D(0, 2), D(5, 6)],  # s0
        [D(1, 3), D(4, 5), D(6, 8)],  # s1
        [],  # s2
    ]
    pred = [
        [D(0, 2), D(5, 7)],  # s0: [0,2) TP; [5,7) FP and gold [5,6) FN
        [D(4, 5)],  # s1: [4,5) TP; gold [1,3) and [6,8) FN
        [D(1, 3)],  # s2: same offsets as a gold mention of s1, but another sentence -> FP
    ]
    # TP 2, FP 2, FN 3 -> P = 2/4 = 0.5, R = 2/5 = 0.4, F1 = 2 * 0.5 * 0.4 / 0.9 = 4/9
    result = entity_f1(gold, pred)
    assert (result["tp"], result["fp"], result["fn"], result["support"]) == (2.0, 2.0, 3.0, 5.0)
    assert result["precision"] == pytest.approx(0.5)
    assert result["recall"] == pytest.approx(0.4)
    assert result["score"] == pytest.approx(4 / 9)


def test_entity_f1_label_must_match_and_per_type_f1():
    gold = [[Span(0, 1, "Chemical"), Span(3, 5, "Disease")]]
    pred = [[Span(0, 1, "Disease"), Span(3, 5, "Disease")]]
    # [0,1) has the wrong type: FP (Disease) + FN (Chemical); [3,5) TP -> P = 1/2, R = 1/2, F1 = 1/2
    # Chemical: TP 0, FN 1 -> 0;  Disease: TP 1, FP 1 -> P 1/2, R 1 -> F1 = 2/3
    result = entity_f1(gold, pred)
    assert result["score"] == pytest.approx(0.5)
    assert result["f1_Chemical"] == 0.0
    assert result["f1_Disease"] == pytest.approx(2 / 3)
    # and each type's precision, recall and support: the run's metrics/test_per_class.csv has no empty column
    assert (result["precision_Disease"], result["recall_Disease"], result["support_Disease"]) == (0.5, 1.0, 1.0)
    assert (result["precision_Chemical"], result["recall_Chemical"], result["support_Chemical"]) == (0.0, 0.0, 1.0)


def test_entity_f1_collapsed_type_has_no_per_type_keys():
    result = entity_f1([[Span(0, 1, "")]], [[Span(0, 1, "")]])
    assert result["score"] == 1.0
    assert not [key for key in result if key.startswith("f1_")]


def test_entity_f1_empty_and_zero_denominators():
    assert entity_f1([], [])["score"] == 0.0
    assert entity_f1([[], []], [[], []])["score"] == 0.0
    nothing_predicted = entity_f1([[D(0, 1)]], [[]])  # TP 0, FP 0, FN 1: precision 0/0 -> 0.0
    assert nothing_predicted["precision"] == nothing_predicted["score"] == 0.0
    assert nothing_predicted["fn"] == 1.0


def test_entity_f1_length_mismatch_names_both_lengths():
    with pytest.raises(ValueError, match=r"2.*1"):
        entity_f1([[], []], [[]])


# ----------------------------------------------------- entity F1 vs seqeval on the real staged NER files


def _read_iob(path: Path) -> list[list[str]]:
    """Tags of a `token<TAB>tag` file, one list per blank-line-separated sentence."""
    return [[line.split("\t")[1] for _, line in block] for block in conll_blocks(path)]


def _corrupt(sentences: list[list[str]], rng: random.Random) -> list[list[str]]:
    """A deterministic 'prediction': drop B tags (leaving I-after-O), start mentions with I, shorten and
    extend spans, add spurious mentions and relabel some mentions, so partial matches abound."""
    predicted = []
    for tags in sentences:
        out = list(tags)
        for i, tag in enumerate(tags):
            r = rng.random()
            typ = tag.partition("-")[2] or "Disease"
            if tag.startswith("B-"):
                if r < 0.08:
                    out[i] = "O"  # dropped B: any following I-X is now an invalid I after O
                elif r < 0.12:
                    out[i] = f"I-{typ}"  # mention opened with I
                elif r < 0.15:
                    out[i] = "B-Other"  # wrong type; following I-X start a new mention
            elif tag.startswith("I-") and r < 0.08:
                out[i] = "O"  # span end shifted left (or split in two)
            elif tag == "O":
                if r < 0.02:
                    out[i] = f"B-{typ}"  # spurious mention (or a split right after a mention)
                elif r < 0.04:
                    out[i] = f"I-{typ}"  # extends a preceding mention, else an I after O
        predicted.append(out)
    return predicted


def _count_i_after_o(sentences: list[list[str]]) -> int:
    return sum(
        tag.startswith("I-") and (i == 0 or tags[i - 1] == "O") for tags in sentences for i, tag in enumerate(tags)
    )


@pytest.mark.parametrize("relative_path", ["BC5CDR-disease-IOB/devel.tsv", "NCBI-disease-IOB/test.tsv"])
def test_entity_f1_agrees_with_seqeval_on_real_files(data_dir: Path, relative_path: str):
    seqeval = pytest.importorskip("seqeval.metrics")
    gold_tags = _read_iob(data_dir / relative_path)
    pred_tags = _corrupt(gold_tags, random.Random(0))
    assert _count_i_after_o(pred_tags) > 50  # the conlleval "I after O starts a mention" rule is exercised

    ours = entity_f1([iob_to_spans(t) for t in gold_tags], [iob_to_spans(t) for t in pred_tags])

    assert 0.3 < ours["score"] < 0.95  # a meaningful mix of hits and misses
    assert ours["precision"] == pytest.approx(seqeval.precision_score(gold_tags, pred_tags), abs=1e-9)
    assert ours["recall"] == pytest.approx(seqeval.recall_score(gold_tags, pred_tags), abs=1e-9)
    assert ours["score"] == pytest.approx(seqeval.f1_score(gold_tags, pred_tags), abs=1e-9)


# ------------------------------------------------------------------------------------ PICO word macro F1


def test_pico_word_macro_f1_overlapping_elements_by_hand():
    gold = [
        [Span(0, 4, "PAR"), Span(2, 5, "INT")],  # instance 0, 6 words; words 2-3 are both PAR and INT
        [Span(0, 2, "OUT")],  # instance 1, 3 words
    ]
    pred = [
        [Span(1, 3, "PAR"), Span(2, 4, "PAR"), Span(2, 3, "INT"), Span(4, 6, "INT")],
        [Span(1, 3, "OUT")],
    ]
    # PAR: gold words {0,1,2,3}, pred {1,2,3} (overlapping pred spans count each word once)
    #      TP 3, FP 0, FN 1 -> P 1, R 3/4 -> F1 = 1.5 / 1.75 = 6/7
    # INT: gold {2,3,4}, pred {2,4,5} -> TP 2, FP 1 (word 5), FN 1 (word 3) -> P = R = F1 = 2/3
    # OUT: gold {(1,0),(1,1)}, pred {(1,1),(1,2)} -> TP 1, FP 1, FN 1 -> F1 = 1/2
    # macro = (6/7 + 2/3 + 1/2) / 3 = (36 + 28 + 21) / 42 / 3 = 85/126
    result = pico_word_macro_f1(gold, pred, lengths=[6, 3], labels=["PAR", "INT", "OUT"])
    assert result["f1_PAR"] == pytest.approx(6 / 7)
    assert result["precision_PAR"] == 1.0 and result["recall_PAR"] == pytest.approx(0.75)
    assert result["f1_INT"] == pytest.approx(2 / 3)
    assert result["f1_OUT"] == pytest.approx(0.5)
    assert (result["support_PAR"], result["support_INT"], result["support_OUT"]) == (4.0, 3.0, 2.0)
    assert result["score"] == pytest.approx(85 / 126)


def test_pico_word_macro_f1_absent_element_and_empty_input():
    # INT absent from gold and prediction: its F1 is 0.0, and it still weighs 1/2 in the macro mean
    result = pico_word_macro_f1([[Span(0, 2, "PAR")]], [[Span(0, 2, "PAR")]], [2], ["PAR", "INT"])
    assert (result["f1_PAR"], result["f1_INT"], result["score"]) == (1.0, 0.0, 0.5)
    assert pico_word_macro_f1([], [], [], ["PAR"])["score"] == 0.0


def test_pico_word_macro_f1_rejects_bad_input():
    with pytest.raises(ValueError, match="outside"):
        pico_word_macro_f1([[Span(0, 4, "PAR")]], [[]], [3], ["PAR"])
    with pytest.raises(ValueError, match="'OUT'"):
        pico_word_macro_f1([[]], [[Span(0, 1, "OUT")]], [3], ["PAR"])
    with pytest.raises(ValueError, match=r"2.*1"):
        pico_word_macro_f1([[], []], [[], []], [3], ["PAR"])


# ------------------------------------------------------------------------------------- relation micro F1


GOLD_RE = ["CPR:3", "CPR:3", "CPR:4", "false", "false", "CPR:9", "CPR:4"]
PRED_RE = ["CPR:3", "false", "CPR:9", "CPR:4", "false", "CPR:9", "false"]


def test_relation_micro_f1_by_hand():
    # 0: CPR:3 = CPR:3            TP (CPR:3)
    # 1: gold CPR:3, pred false   FN only (CPR:3)
    # 2: gold CPR:4, pred CPR:9   FP (CPR:9) and FN (CPR:4)
    # 3: gold false, pred CPR:4   FP only (CPR:4)
    # 4: false = false            nothing (negative class excluded)
    # 5: CPR:9 = CPR:9            TP (CPR:9)
    # 6: gold CPR:4, pred false   FN only (CPR:4)
    # TP 2, FP 2, FN 3 -> P = 1/2, R = 2/5, F1 = 4/9
    result = relation_micro_f1(GOLD_RE, PRED_RE, negative="false")
    assert (result["tp"], result["fp"], result["fn"]) == (2.0, 2.0, 3.0)
    assert result["precision"] == pytest.approx(0.5)
    assert result["recall"] == pytest.approx(0.4)
    assert result["score"] == pytest.approx(4 / 9)
    # CPR:3: TP 1, FN 1 -> 2/3;  CPR:4: TP 0 -> 0;  CPR:9: TP 1, FP 1 -> 2/3; no key for "false"
    assert result["f1_CPR3"] == pytest.approx(2 / 3)
    assert result["f1_CPR4"] == 0.0
    assert result["f1_CPR9"] == pytest.approx(2 / 3)
    assert "f1_false" not in result


def test_relation_micro_f1_all_negative_and_empty():
    assert relation_micro_f1(["false", "false"], ["false", "false"], "false")["score"] == 0.0
    assert relation_micro_f1([], [], "false")["score"] == 0.0
    with pytest.raises(ValueError, match=r"1.*2"):
        relation_micro_f1(["false"], ["false", "false"], "false")


def test_relation_micro_f1_agrees_with_sklearn():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = random.Random(1)
    classes = ["false"] * 6 + ["CPR:3", "CPR:4", "CPR:5", "CPR:6", "CPR:9"]  # mostly negative, like ChemProt
    gold = [rng.choice(classes) for _ in range(5000)]
    pred = [g if rng.random() < 0.6 else rng.choice(classes) for g in gold]
    positive = sorted(set(classes) - {"false"})
    for gold_, pred_ in [(gold, pred), (GOLD_RE, PRED_RE)]:
        ours = relation_micro_f1(gold_, pred_, negative="false")
        p, r, f, _ = metrics.precision_recall_fscore_support(gold_, pred_, labels=positive, average="micro")
        assert (ours["precision"], ours["recall"], ours["score"]) == pytest.approx((p, r, f), abs=1e-12)


# ------------------------------------------------------------------------------------- GAD positive F1


def test_positive_class_f1_by_hand():
    gold = ["1", "1", "1", "0", "0", "0"]
    pred = ["1", "0", "1", "1", "1", "0"]
    # TP 2 (0, 2), FN 1 (1), FP 2 (3, 4) -> P = 2/4, R = 2/3, F1 = 2 * (1/3) / (7/6) = 4/7
    result = positive_class_f1(gold, pred, positive="1")
    assert result["precision"] == pytest.approx(0.5)
    assert result["recall"] == pytest.approx(2 / 3)
    assert result["score"] == pytest.approx(4 / 7)
    assert positive_class_f1(gold, ["0"] * 6, positive="1")["score"] == 0.0  # never predicts positive
    assert positive_class_f1([], [], positive="1")["score"] == 0.0


# ------------------------------------------------------------------------------------------------ Pearson


def test_pearson_by_hand():
    # means 2.5 and 2.5; centred: g = (-1.5, -0.5, 0.5, 1.5), p = (-0.5, -1.5, 1.5, 0.5)
    # g.p = 0.75 + 0.75 + 0.75 + 0.75 = 3;  g.g = p.p = 2.25 + 0.25 + 0.25 + 2.25 = 5  ->  r = 3/5
    result = pearson([1.0, 2.0, 3.0, 4.0], [2.0, 1.0, 4.0, 3.0])
    assert result["score"] == pytest.approx(0.6)
    assert result["constant_prediction"] == 0.0
    assert pearson([1.0, 2.0, 3.0], [3.0, 2.0, 1.0])["score"] == pytest.approx(-1.0)


def test_pearson_constant_prediction_is_zero_not_nan():
    result = pearson([0.5, 1.5, 4.0], [0.1, 0.1, 0.1])
    assert result["score"] == 0.0 and result["constant_prediction"] == 1.0
    assert pearson([], [])["score"] == 0.0
    assert pearson([2.0], [3.0])["score"] == 0.0


def test_pearson_agrees_with_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(2)
    gold = [rng.uniform(0, 4) for _ in range(100)]
    pred = [g + rng.gauss(0, 1) for g in gold]
    assert pearson(gold, pred)["score"] == pytest.approx(stats.pearsonr(gold, pred)[0], abs=1e-12)


# ----------------------------------------------------------------------------------- HoC multi-label F1


def test_multilabel_micro_f1_by_hand():
    labels = ["A", "B", "C"]
    gold = [["A", "B"], ["C"], [], ["A", "C"], ["B"]]
    pred = [["A"], ["B", "C"], ["A"], [], ["B", "B"]]
    # 0: A TP, B FN;  1: C TP, B FP;  2: A FP;  3: A FN, C FN;  4: B TP (duplicates read as a set)
    # TP 3, FP 2, FN 3 -> P = 3/5, R = 3/6, F1 = 2 * 0.3 / 1.1 = 6/11
    # A: TP 1, FP 1, FN 1 -> 1/2;  B: TP 1, FP 1, FN 1 -> 1/2;  C: TP 1, FN 1 -> P 1, R 1/2 -> 2/3
    result = multilabel_micro_f1(gold, pred, labels)
    assert (result["tp"], result["fp"], result["fn"]) == (3.0, 2.0, 3.0)
    assert result["precision"] == pytest.approx(0.6)
    assert result["recall"] == pytest.approx(0.5)
    assert result["score"] == pytest.approx(6 / 11)
    assert (result["f1_A"], result["f1_B"]) == pytest.approx((0.5, 0.5))
    assert result["f1_C"] == pytest.approx(2 / 3)
    assert (result["support_A"], result["support_B"], result["support_C"]) == (2.0, 2.0, 2.0)


def test_multilabel_micro_f1_agrees_with_sklearn_and_rejects_unknown_labels():
    metrics = pytest.importorskip("sklearn.metrics")
    labels = [f"hallmark_{k}" for k in range(10)]
    rng = random.Random(3)
    gold = [rng.sample(labels, rng.randint(0, 3)) for _ in range(400)]
    pred = [rng.sample(labels, rng.randint(0, 3)) for _ in range(400)]
    binarized_gold = [[int(label in row) for label in labels] for row in gold]
    binarized_pred = [[int(label in row) for label in labels] for row in pred]
    expected = metrics.f1_score(binarized_gold, binarized_pred, average="micro")
    assert multilabel_micro_f1(gold, pred, labels)["score"] == pytest.approx(expected, abs=1e-12)
    assert multilabel_micro_f1([], [], labels)["score"] == 0.0
    with pytest.raises(ValueError, match="'Z'"):
        multilabel_micro_f1([["A"]], [["Z"]], ["A"])


# ----------------------------------------------------------------------------------------------- accuracy


def test_accuracy_by_hand():
    # 2 of 4 equal -> 0.5
    result = accuracy(["yes", "no", "maybe", "yes"], ["yes", "yes", "maybe", "no"])
    assert (result["score"], result["correct"], result["total"]) == (0.5, 2.0, 4.0)
    assert accuracy([], [])["score"] == 0.0
    with pytest.raises(ValueError, match=r"3.*2"):
        accuracy(["a", "b", "c"], ["a", "b"])


# ------------------------------------------------------------------------------------------- BLURB score

PUBMEDBERT_TABLE6 = {  # Gu et al., Table 6, PubMedBERT row; BLURB score 81.16
    "BC5-chem": 93.33,
    "BC5-disease": 85.62,
    "NCBI-disease": 87.82,
    "BC2GM": 84.52,
    "JNLPBA": 79.10,
    "EBM-PICO": 73.38,
    "ChemProt": 77.24,
    "DDI": 82.36,
    "GAD": 83.96,
    "BIOSSES": 92.30,
    "HoC": 82.32,
    "PubMedQA": 55.84,
    "BioASQ": 87.56,
}
BLURB_TASK_TYPES = {
    **dict.fromkeys(["BC5-chem", "BC5-disease", "NCBI-disease", "BC2GM", "JNLPBA"], "ner"),
    "EBM-PICO": "pico",
    **dict.fromkeys(["ChemProt", "DDI", "GAD"], "re"),
    "BIOSSES": "similarity",
    "HoC": "classification",
    **dict.fromkeys(["PubMedQA", "BioASQ"], "qa"),
}


def test_blurb_score_reproduces_pubmedbert_81_16():
    # ner  = (93.33 + 85.62 + 87.82 + 84.52 + 79.10) / 5 = 430.39 / 5 = 86.078
    # pico = 73.38
    # re   = (77.24 + 82.36 + 83.96) / 3 = 243.56 / 3 = 81.18667
    # similarity = 92.30;  classification = 82.32
    # qa   = (55.84 + 87.56) / 2 = 143.40 / 2 = 71.70
    # BLURB = (86.078 + 73.38 + 81.18667 + 92.30 + 82.32 + 71.70) / 6 = 486.96467 / 6 = 81.1608 -> 81.16
    result = blurb_score(PUBMEDBERT_TABLE6, BLURB_TASK_TYPES)
    assert result["per_type"] == pytest.approx(
        {"ner": 86.078, "pico": 73.38, "re": 243.56 / 3, "similarity": 92.30, "classification": 82.32, "qa": 71.70}
    )
    assert result["score"] == pytest.approx(486.96466667 / 6)
    assert round(result["score"], 2) == 81.16
    # a flat mean over the 13 datasets would give 1065.35 / 13 = 81.95 instead: the two-level average matters
    assert round(sum(PUBMEDBERT_TABLE6.values()) / 13, 2) == 81.95


def test_blurb_score_averages_only_the_types_present_and_validates():
    # ner = (0.8 + 0.6) / 2 = 0.7; qa = 0.5 -> (0.7 + 0.5) / 2 = 0.6
    result = blurb_score({"a": 0.8, "b": 0.6, "c": 0.5}, {"a": "ner", "b": "ner", "c": "qa", "unused": "re"})
    assert result["score"] == pytest.approx(0.6)
    assert set(result["per_type"]) == {"ner", "qa"}
    with pytest.raises(ValueError, match="mystery"):
        blurb_score({"a": 0.8, "mystery": 0.1}, {"a": "ner"})
    with pytest.raises(ValueError, match="parsing"):
        blurb_score({"a": 0.8}, {"a": "parsing"})
    with pytest.raises(ValueError):
        blurb_score({}, BLURB_TASK_TYPES)


# ------------------------------------------------------------------------------------ registry and speed


def test_metrics_registry_returns_float_dicts_with_score():
    calls = {
        "entity_f1": ([[D(0, 1)]], [[D(0, 1)]]),
        "pico_word_macro_f1": ([[Span(0, 1, "PAR")]], [[]], [2], ["PAR"]),
        "relation_micro_f1": (["x"], ["x"], "false"),
        "positive_class_f1": (["1"], ["1"], "1"),
        "pearson": ([1.0, 2.0], [1.0, 3.0]),
        "multilabel_micro_f1": ([["A"]], [["A"]], ["A"]),
        "accuracy": ([1], [1]),
        "per_class_f1": (["yes"], ["no"], ["yes", "no"]),
        "mean_reciprocal_rank": (["1", "0"], [0.2, 0.9], ["q", "q"]),
        "bioasq_factoid": ([["il-6"]], [["IL-6", "tnf"]]),
        "bioasq_list": ([[["a"], ["b"]]], [["a"]]),
        "squad_v1": ([["the answer"]], ["answer"]),
    }
    assert set(METRICS) == set(calls)
    for name, args in calls.items():
        result = METRICS.get(name)(*args)
        assert "score" in result and all(isinstance(v, float) for v in result.values()), name

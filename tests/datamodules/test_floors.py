"""Each task's trivial baselines (datamodules/floors.py) against values worked out by hand from the gold
labels of small real test sets: the scorer's floor must be what counting says a predictor that learned nothing
scores, and a run's state must follow from its score and its predictions."""

from __future__ import annotations

from collections import Counter

import pytest

from datamodules.finetune_data import subsample
from datamodules.floors import (
    AT_FLOOR,
    COLLAPSED,
    LEARNED,
    Floor,
    baselines,
    collapsed,
    floor_of,
    histogram,
    learning_state,
)
from datamodules.instances import Span
from datamodules.registry import get_dataset
from datamodules.split_checks import read_checked
from datamodules.task_kinds import make_encoder

N = 200  # test instances each check scores: what a capped run scores, and quick to read


def _test_set(task: str, data_dir, limit: int | None = N):
    spec = get_dataset(task)
    encoder = make_encoder(spec, None, 128)  # scoring reads no tokenizer
    test = read_checked(spec, data_dir, warn=False)["test"]
    return encoder, subsample(test, limit, encoder.group_by)


def _by_kind(encoder, test) -> dict[str, float]:
    return {f.kind: f.score for f in baselines(encoder, test)}


def test_gad_all_positive_is_twice_the_positives_over_instances_plus_positives(data_dir):
    encoder, test = _test_set("gad", data_dir)
    positives = sum(x.label == "1" for x in test)
    # precision positives / N, recall 1: F1 = 2 p / (N + p)
    assert _by_kind(encoder, test)["all positive"] == pytest.approx(2 * positives / (len(test) + positives))
    assert _by_kind(encoder, test)["all negative"] == 0.0
    assert floor_of(encoder, test) == Floor(pytest.approx(2 * positives / (len(test) + positives)), "all positive")


@pytest.mark.parametrize("task", ["chemprot", "ddi"])
def test_relations_all_negative_scores_zero_and_one_class_for_all_its_counted_f1(task, data_dir):
    encoder, test = _test_set(task, data_dir)
    found = _by_kind(encoder, test)
    assert found["all negative"] == 0.0  # nothing predicted positive: no true positive
    gold = Counter(x.label for x in test)
    positives = len(test) - gold["false"]
    for label in (c for c in get_dataset(task).labels if c != "false"):
        # every pair labelled c: TP = gold c, FP = N - gold c, FN = positives - gold c -> F1 = 2 c / (N + positives)
        assert found[f"all {label}"] == pytest.approx(2 * gold[label] / (len(test) + positives))
    best = max(gold[c] for c in gold if c != "false")
    assert floor_of(encoder, test).score == pytest.approx(2 * best / (len(test) + positives))


def test_hoc_no_label_every_label_and_the_best_constant_set(data_dir):
    encoder, test = _test_set("hoc", data_dir, None)
    found = _by_kind(encoder, test)
    labels = get_dataset("hoc").labels
    gold = sum(len(x.labels) for x in test)
    assert found["no label"] == 0.0
    # every (document, hallmark) decision positive: precision G / (N L), recall 1
    assert found["every label"] == pytest.approx(2 * gold / (len(test) * len(labels) + gold))
    counts = Counter(label for x in test for label in x.labels)
    top = [c for _, c in counts.most_common()]
    # the k most frequent labels for every document: TP = their gold count, predicted N k
    for k in range(1, len(top)):
        assert found[f"top-{k} labels"] == pytest.approx(2 * sum(top[:k]) / (len(test) * k + gold))


def test_pubmedqa_majority_class_is_its_share(data_dir):
    encoder, test = _test_set("pubmedqa", data_dir, None)
    label, count = Counter(x.label for x in test).most_common(1)[0]
    assert floor_of(encoder, test) == Floor(pytest.approx(count / len(test)), f"majority class ({label})")


def test_biosses_constant_score_has_no_correlation(data_dir):
    encoder, test = _test_set("biosses", data_dir, None)
    assert floor_of(encoder, test) == Floor(0.0, "constant score")


def test_ner_all_o_and_pico_every_word_one_element(data_dir):
    encoder, test = _test_set("ncbi-disease", data_dir)
    assert floor_of(encoder, test) == Floor(0.0, "all O")
    encoder, test = _test_set("ebm-pico", data_dir)
    found = _by_kind(encoder, test)
    words = sum(len(x.tokens) for x in test)
    for label in ("PAR", "INT", "OUT"):
        inside = len({(i, w) for i, x in enumerate(test) for s in x.spans if s.label == label
                      for w in range(s.start, s.end)})
        # every word this element: recall 1, precision inside / words; the other two elements F1 0
        assert found[f"every word {label}"] == pytest.approx(2 * inside / (words + inside) / 3)


def test_states_follow_from_the_score_and_the_predictions(data_dir):
    encoder, test = _test_set("gad", data_dir)
    floor = floor_of(encoder, test)
    assert collapsed(encoder, ["1"] * len(test)) and not collapsed(encoder, ["1", "0"] * (len(test) // 2))
    assert learning_state(floor.score, floor, True) == COLLAPSED
    assert learning_state(floor.score, floor, False) == AT_FLOOR  # equal is not above
    assert learning_state(floor.score + 1e-6, floor, False) == LEARNED
    ner, sentences = _test_set("ncbi-disease", data_dir)
    assert collapsed(ner, [()] * len(sentences))  # all O
    assert not collapsed(ner, [(Span(0, 1, "Disease"),)] + [()] * (len(sentences) - 1))
    assert histogram(ner, [(Span(0, 1, "Disease"),), ()]) == {"Disease": 1, "(no mention)": 1}

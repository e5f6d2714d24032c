"""A resample scored from its units' counts (the metrics of `datamodules.metric_registry.ADDITIVE`) is the
number the task's own scorer gives when it rescores the same draw, key for key and bit for bit, on real test
sets with real errors in them."""

from __future__ import annotations

import numpy as np
import pytest

from ablations.tables.scored_units import ScoredUnits, Unit
from datamodules.instances import TaggingInstance, TextInstance
from datamodules.metric_registry import ADDITIVE
from datamodules.registry import get_dataset

# one dataset per metric that has counts: NER, PICO, ChemProt's relations, GAD, HoC, PubMedQA, Bio-ELECTRA yes/no
DATASETS = {"bc5-chem": "entity_f1", "ebm-pico": "pico_word_macro_f1", "chemprot": "relation_micro_f1",
            "gad": "positive_class_f1", "hoc": "multilabel_micro_f1", "pubmedqa": "accuracy",
            "bioelectra-yesno": "per_class_f1"}


# the means over questions, whose summed values are floats (Additive.exact False): each on the dataset that
# uses it (bioasq_list has no built-in dataset: BioBERT's factoid questions, their answers as list items)
MEANS = {"bioelectra-factoid": "squad_v1", "bioasq-4b-factoid": "bioasq_factoid", "bioasq-list": "bioasq_list",
         "bioelectra-rerank": "mean_reciprocal_rank"}


def test_every_metric_with_counts_is_covered():
    assert set(ADDITIVE) == set(DATASETS.values()) | set(MEANS.values())
    assert {name for name, additive in ADDITIVE.items() if not additive.exact} == set(MEANS.values())


def gold_of(instance):
    """An instance's gold answer in the form its metric scores (as scored_units reads a run's records)."""
    if isinstance(instance, TaggingInstance):
        return list(instance.spans)
    if isinstance(instance, TextInstance):
        return tuple(instance.labels)
    return instance.label


def real_units(name: str, data_dir, n: int = 300) -> ScoredUnits:
    """`n` test instances of dataset `name`; every third prediction is another instance's gold (a wrong
    answer of the dataset's own kind: spurious and missed mentions, wrong classes), every fifth is empty
    where the answer is a list."""
    spec = get_dataset(name)
    split = spec.read(data_dir)["test"]
    instances = list(split)[:n]
    golds = [gold_of(i) for i in instances]
    predictions = []
    for k, gold in enumerate(golds):
        if k % 5 == 0 and isinstance(gold, (list, tuple)):
            predictions.append(type(gold)())
        elif k % 3 == 0:
            predictions.append(golds[(k * 7 + 1) % len(golds)])
        else:
            predictions.append(gold)
    units = [Unit(str(i.id), [g], [p]) for i, g, p in zip(instances, golds, predictions)]
    return ScoredUnits(spec.metric, dict(spec.metric_args), units, "instance")


def check_draws_against_rescoring(units: ScoredUnits, same) -> None:
    """Each of 23 draws (everything, one unit, every other unit twice, 20 random), scored from the units'
    summed rows, equals (`same(scored, rescored)`) the metric rescoring that draw, key for key; and the random
    draws scored together (`scores`, a matrix product per block) too."""
    rng = np.random.default_rng(0)
    everything = list(range(len(units)))
    draws = [everything, everything[:1], everything[::2] * 2] + [list(rng.integers(0, len(units), len(units)))
                                                                for _ in range(20)]
    full = units._rescore(units.units)
    assert 0 < full["score"] < 1, full  # the predictions hold real errors, and real hits
    additive, checked = ADDITIVE[units.metric], set()
    for draw in draws:
        rescored = units._rescore([units.units[i] for i in draw])
        summed = additive.finish(units._counts(additive)[draw].sum(axis=0).tolist(), **units.metric_args)
        for key in summed.keys() & rescored.keys():
            assert same(units.score(np.asarray(draw), key), rescored[key]), (key, draw[:5])
            checked.add(key)
    together = units.scores(np.asarray(draws[3:]))
    rescored = [units._rescore([units.units[i] for i in d])["score"] for d in draws[3:]]
    assert all(same(a, b) for a, b in zip(together.tolist(), rescored, strict=True))
    assert "score" in checked and all(u.counts is not None for u in units.units)  # counted, once, per unit


@pytest.mark.parametrize("name", list(DATASETS))
def test_a_draw_scored_from_counts_is_the_metric_rescoring_it(name, data_dir):
    units = real_units(name, data_dir)
    assert units.metric == DATASETS[name]
    check_draws_against_rescoring(units, lambda scored, rescored: scored == rescored)  # bit for bit


def test_pearson_resamples_scored_together_are_the_metric_rescoring_each(data_dir):
    """BIOSSES has no counts: a block of draws is correlated row-wise (`pearson_rows`), and each row's r is
    the scorer's own on that draw, bit for bit, the degenerate draws (one pair, constant predictions) too."""
    spec = get_dataset("biosses")
    instances = list(spec.read(data_dir)["test"])
    golds = [float(i.label) for i in instances]
    predictions = [g + ((k * 37) % 11 - 5) / 4 for k, g in enumerate(golds)]  # noisy, not a shifted copy
    predictions[:4] = [2.0] * 4  # a draw of these alone has constant predictions
    units = ScoredUnits("pearson", {}, [Unit(str(i.id), [g], [p]) for i, g, p in zip(instances, golds, predictions)],
                        "instance")
    rng = np.random.default_rng(0)
    draws = np.stack([np.arange(len(units)), np.zeros(len(units), dtype=int), np.arange(len(units)) % 4]
                     + [rng.integers(0, len(units), len(units)) for _ in range(300)])
    scored = units.scores(draws)
    rescored = [units._rescore([units.units[i] for i in draw])["score"] for draw in draws.tolist()]
    assert scored.tolist() == rescored
    assert scored[1] == scored[2] == 0.0 and 0.3 < scored[0] < 1.0  # undefined r is 0; the full set correlates


def question_units(name: str, data_dir) -> ScoredUnits:
    """Units of a mean over questions on real test questions, with real errors: a wrong answer (another
    question's), a right answer ranked second, none at all, a partial answer (token F1 between 0 and 1), and for
    answer ranking, scores that put a relevant candidate first, lower down, or tied with irrelevant ones."""
    spec = get_dataset("bioasq-4b-factoid" if name == "bioasq-list" else name)
    test = list(spec.read(data_dir)["test"])
    if name == "bioelectra-rerank":
        by_question: dict[str, Unit] = {}
        for k, instance in enumerate(test):
            unit = by_question.setdefault(instance.id.split("-")[0], Unit(instance.id.split("-")[0], [], []))
            unit.golds.append(instance.label)
            unit.predictions.append(float((k * 37) % 7) / 4 + (0.5 if instance.label == "1" and k % 3 else 0.0))
        return ScoredUnits(spec.metric, dict(spec.metric_args), list(by_question.values()), "question")
    if name == "bioelectra-factoid":  # SQuAD: one unit per question x snippet, one answer each
        golds = [list(i.answers) for i in test]
        predictions = ["" if k % 5 == 0 else golds[(k * 7 + 1) % len(golds)][0] if k % 3 == 0
                       else f"the {golds[k][0]} gene" if k % 4 == 0 else golds[k][0] for k in range(len(golds))]
        return ScoredUnits("squad_v1", {}, [Unit(str(i.id), [g], [p]) for i, g, p in zip(test, golds, predictions)],
                           "instance")
    answers: dict[str, list[str]] = {}
    for instance in test:
        answers.setdefault(instance.question_id, [])
        answers[instance.question_id] += [a for a in instance.answers if a not in answers[instance.question_id]]
    questions = [question for question, gold in answers.items() if gold]  # BioBERT's test snippets may have none
    assert len(questions) > 50, len(questions)
    units = []
    for k, question in enumerate(questions):
        gold, wrong = answers[question], answers[questions[(k * 7 + 1) % len(questions)]][0]
        ranked = [] if k % 5 == 0 else [wrong, gold[0]] if k % 3 == 0 else [gold[0], wrong]
        if name == "bioasq-list":
            units.append(Unit(question, [[(a,) for a in gold] + [("unmatched item",)] * (k % 2)], [ranked]))
        else:
            units.append(Unit(question, [gold], [ranked]))
    return ScoredUnits(MEANS[name], {}, units, "question")


@pytest.mark.parametrize("name", list(MEANS))
def test_a_draw_of_a_mean_over_questions_summed_is_the_metric_rescoring_it_to_rounding(name, data_dir):
    units = question_units(name, data_dir)
    assert units.metric == MEANS[name]
    check_draws_against_rescoring(units, lambda scored, rescored: scored == pytest.approx(rescored, rel=1e-12,
                                                                                          abs=1e-15))

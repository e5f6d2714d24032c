"""Extractive QA metrics, registered in `datamodules.metrics.METRICS` when this module is imported.

- `bioasq_factoid`: BioASQ factoid strict accuracy, lenient accuracy and MRR over up to 5 ranked answers
  (BioBERT Table 6).
- `bioasq_list`: BioASQ list mean precision, recall and F-measure per question (over answer items).
- `squad_v1`: SQuAD v1.1 exact match and token F1, max over the gold answers (Bio-ELECTRA Table 2).

The BioASQ measures follow the organisers' code (github.com/BioASQ/Evaluation-Measures,
`QuestionAnswerEvaluator.java`, challenge version 3+): lower-casing is the only normalisation, a factoid
gold answer is any synonym of its groups, and every question counts, so one without an answer scores 0.
The SQuAD measures follow `evaluate-v1.1.py`, as fractions, not percentages.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

from datamodules.metric_registry import ADDITIVE, METRIC_NAMES, METRICS, Additive, check_lengths, ratio

BIOASQ_FACTOID_ANSWERS = 5  # BioASQ 3+ accepts up to five ranked answers to a factoid question

METRIC_NAMES.update({"bioasq_factoid": "MRR", "bioasq_list": "mean F1", "squad_v1": "token F1"})


# --------------------------------------------------------------------------------------------- BioASQ

@METRICS.register("bioasq_factoid")
def bioasq_factoid(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> dict[str, float]:
    """Strict accuracy, lenient accuracy and MRR over the first five answers, averaged over the questions.
    `gold[i]`: every synonym of question i's answer; `pred[i]`: its answers, best first. "score" is the MRR,
    BioASQ's official factoid measure."""
    return _factoid_result(_factoid_sums(gold, pred))


def _factoid_sums(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> tuple[float, ...]:
    """(strict, lenient, reciprocal rank, questions), summed over the questions given."""
    check_lengths(gold, pred)
    strict = lenient = reciprocal = 0.0
    for synonyms, answers in zip(gold, pred):
        accepted = {s.lower() for s in synonyms}
        rank = next((r for r, a in enumerate(answers[:BIOASQ_FACTOID_ANSWERS], 1) if a.lower() in accepted), None)
        if rank is not None:
            strict += rank == 1
            lenient += 1
            reciprocal += 1 / rank
    return strict, lenient, reciprocal, float(len(gold))


def _factoid_result(sums: Sequence[float], **_) -> dict[str, float]:
    strict, lenient, reciprocal, n = sums
    return {"score": ratio(reciprocal, n), "strict": ratio(strict, n), "lenient": ratio(lenient, n),
            "mrr": ratio(reciprocal, n), "total": float(n)}


def list_question_prf(groups: Sequence[Sequence[str]], answers: Sequence[str]) -> tuple[float, float, float]:
    """One list question's P, R and F as `calculatePRFforListQuestions` computes them: an answer is a true
    positive if it matches a gold item not yet used up, else a false positive. No answers: all three 0."""
    if not answers:
        return 0.0, 0.0, 0.0
    unmatched = [{s.lower() for s in group} for group in groups]
    tp = fp = 0
    for answer in answers:
        hit = next((i for i, group in enumerate(unmatched) if answer.lower() in group), None)
        if hit is None:
            fp += 1
        else:
            tp += 1
            del unmatched[hit]
    # the organisers' second pass: a leftover gold item is a false negative only if no answer is its synonym
    leftover = [a.lower() for a in answers]
    fn = 0
    for group in unmatched:
        hit = next((j for j, answer in enumerate(leftover) if answer in group), None)
        if hit is None:
            fn += 1
        else:
            del leftover[hit]
    precision, recall = ratio(tp, tp + fp), ratio(tp, tp + fn)
    return precision, recall, ratio(2 * precision * recall, precision + recall)


@METRICS.register("bioasq_list")
def bioasq_list(gold: Sequence[Sequence[Sequence[str]]], pred: Sequence[Sequence[str]]) -> dict[str, float]:
    """Mean over the questions of `list_question_prf`; `gold[i]` holds groups of synonyms. "score" is the
    mean F-measure, BioASQ's official list measure."""
    return _list_result(_list_sums(gold, pred))


def _list_sums(gold: Sequence[Sequence[Sequence[str]]], pred: Sequence[Sequence[str]]) -> tuple[float, ...]:
    """(precision, recall, F-measure, questions), summed over the questions given."""
    check_lengths(gold, pred)
    totals = [0.0, 0.0, 0.0]
    for groups, answers in zip(gold, pred):
        for k, value in enumerate(list_question_prf(groups, answers)):
            totals[k] += value
    return (*totals, float(len(gold)))


def _list_result(sums: Sequence[float], **_) -> dict[str, float]:
    *totals, n = sums
    precision, recall, f1 = (ratio(t, n) for t in totals)
    return {"score": f1, "precision": precision, "recall": recall, "f1": f1, "total": float(n)}


# ---------------------------------------------------------------------------------------------- SQuAD

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD v1.1's normalisation, in `evaluate-v1.1.py`'s order: case, punctuation, articles, spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def squad_exact_match(prediction: str, answer: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(answer))


def squad_token_f1(prediction: str, answer: str) -> float:
    """F1 over the normalised tokens, shared tokens counted as a multiset; 0 when none is shared."""
    predicted, gold = normalize_answer(prediction).split(), normalize_answer(answer).split()
    shared = sum((Counter(predicted) & Counter(gold)).values())
    if shared == 0:
        return 0.0
    precision, recall = shared / len(predicted), shared / len(gold)
    return 2 * precision * recall / (precision + recall)


@METRICS.register("squad_v1")
def squad_v1(gold: Sequence[Sequence[str]], pred: Sequence[str]) -> dict[str, float]:
    """Exact match ("em") and token F1 ("f1", the "score"), each the max over the accepted answers `gold[i]`
    of one answer `pred[i]`, averaged over the questions."""
    return _squad_result(_squad_sums(gold, pred))


def _squad_sums(gold: Sequence[Sequence[str]], pred: Sequence[str]) -> tuple[float, ...]:
    """(exact match, token F1, questions), summed over the questions given."""
    check_lengths(gold, pred)
    em = f1 = 0.0
    for answers, prediction in zip(gold, pred):
        if answers:
            em += max(squad_exact_match(prediction, a) for a in answers)
            f1 += max(squad_token_f1(prediction, a) for a in answers)
    return em, f1, float(len(gold))


def _squad_result(sums: Sequence[float], **_) -> dict[str, float]:
    em, f1, n = sums
    return {"score": ratio(f1, n), "em": ratio(em, n), "f1": ratio(f1, n), "total": float(n)}


# Means over questions: a resample sums its questions' values (metric_registry.Additive, inexact: floats)
ADDITIVE.update({"bioasq_factoid": Additive(_factoid_sums, _factoid_result, exact=False),
                 "bioasq_list": Additive(_list_sums, _list_result, exact=False),
                 "squad_v1": Additive(_squad_sums, _squad_result, exact=False)})

"""Every BLURB metric, as plain functions over instance-level golds and predictions.

The conventions follow Gu et al., *Domain-Specific Language Model Pretraining for Biomedical NLP*
(Sec. 2.3-2.5, Table 3) and `docs/DESIGN.md`, "Evaluation contract":

- NER: entity-level exact-match micro F1 (conlleval / seqeval default mode)        -> `entity_f1`
- PICO: word-level F1 per element (P, I, O), macro-averaged                          -> `pico_word_macro_f1`
- ChemProt, DDI: micro F1 over the positive relation classes, negative class excluded -> `relation_micro_f1`
- GAD: F1 of the positive class                                                      -> `positive_class_f1`
- BIOSSES: Pearson correlation                                                       -> `pearson`
- HoC: micro F1 over (document, hallmark) decisions                                  -> `multilabel_micro_f1`
- PubMedQA, BioASQ: accuracy                                                         -> `accuracy`
- Bio-ELECTRA yes/no: P/R/F1 of each class, macro-averaged                           -> `per_class_f1`
- Bio-ELECTRA answer-candidate ranking: mean reciprocal rank per question            -> `mean_reciprocal_rank`
- BLURB score: mean within each task type, then mean over the task types            -> `blurb_score`

Every metric returns a dict of floats: "score" is the primary number, the rest are details ("f1_<label>",
counts). Empty inputs and zero denominators give 0.0; gold and prediction of different lengths raise
`ValueError`. Runs log every key but the counts as MLflow metrics (`summary_keys`), and chart the headline
keys per epoch (`curve_keys`).
"""

from __future__ import annotations

import inspect
import re
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from datamodules.instances import Span
from datamodules.metric_registry import ADDITIVE, METRIC_NAMES, METRICS, Additive, check_lengths, ratio
from datamodules.task_types import BLURB_TASK_TYPES

METRIC_NAMES.update({"entity_f1": "entity F1", "pico_word_macro_f1": "word macro F1", "relation_micro_f1": "micro F1",
                "positive_class_f1": "F1", "pearson": "Pearson r", "multilabel_micro_f1": "micro F1",
                "accuracy": "accuracy"})


def _key(label: str) -> str:
    """A label in a metric name MLflow and Lightning keep unchanged (`CPR:3` -> `CPR3`)."""
    return re.sub(r"[^a-zA-Z0-9_/. -]+", "", label)


def _prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    """Precision, recall and F1 from counts; 0.0 wherever a denominator is zero."""
    precision = ratio(tp, tp + fp)
    recall = ratio(tp, tp + fn)
    return precision, recall, ratio(2 * precision * recall, precision + recall)


def _counts_result(tp: int, fp: int, fn: int) -> dict[str, float]:
    precision, recall, f1 = _prf(tp, fp, fn)
    return {
        "score": f1,
        "precision": precision,
        "recall": recall,
        "tp": float(tp),
        "fp": float(fp),
        "fn": float(fn),
        "support": float(tp + fn),
    }


@METRICS.register("entity_f1")
def entity_f1(gold: Sequence[Sequence[Span]], pred: Sequence[Sequence[Span]]) -> dict[str, float]:
    """Entity-level exact-match micro P/R/F1 (BLURB NER; conlleval, = `seqeval.metrics.f1_score`). A partial
    overlap is both a FP and a FN. Each mention type also gets "precision_", "recall_", "f1_", "support_"."""
    check_lengths(gold, pred)
    gold_set = {(i, s.start, s.end, s.label) for i, spans in enumerate(gold) for s in spans}
    pred_set = {(i, s.start, s.end, s.label) for i, spans in enumerate(pred) for s in spans}
    hits = gold_set & pred_set
    result = _counts_result(len(hits), len(pred_set) - len(hits), len(gold_set) - len(hits))

    gold_per_type = Counter(m[3] for m in gold_set)
    pred_per_type = Counter(m[3] for m in pred_set)
    hits_per_type = Counter(m[3] for m in hits)
    for label in sorted((gold_per_type | pred_per_type).keys() - {""}):
        tp = hits_per_type[label]
        result.update(_per_label_result((tp, pred_per_type[label] - tp, gold_per_type[label] - tp), [label]))
    return result


@METRICS.register("pico_word_macro_f1")
def pico_word_macro_f1(
    gold: Sequence[Sequence[Span]],
    pred: Sequence[Sequence[Span]],
    lengths: Sequence[int],
    labels: Sequence[str],
) -> dict[str, float]:
    """Word-level F1 per PICO element, macro-averaged over `labels` (BLURB EBM-PICO); one word may count for
    several. `lengths` (words per instance) bounds the spans: one outside, or of another label, raises."""
    return _pico_result(_pico_counts(gold, pred, lengths, labels), labels)


def _pico_counts(gold: Sequence[Sequence[Span]], pred: Sequence[Sequence[Span]], lengths: Sequence[int],
                 labels: Sequence[str]) -> tuple[int, ...]:
    """Positive words compared, per element of `labels` in order: (tp, fp, fn, tp, fp, fn, ...)."""
    check_lengths(gold, pred)
    check_lengths(gold, lengths, "lengths")
    if not labels:
        raise ValueError("labels must name at least one PICO element")

    def positive_words(instances: Sequence[Sequence[Span]]) -> dict[str, set[tuple[int, int]]]:
        words: dict[str, set[tuple[int, int]]] = {label: set() for label in labels}
        for i, spans in enumerate(instances):
            for span in spans:
                if span.label not in words:
                    raise ValueError(f"span label {span.label!r} of instance {i} not in labels {list(labels)}")
                if not 0 <= span.start <= span.end <= lengths[i]:
                    raise ValueError(f"span {span} of instance {i} outside its {lengths[i]} words")
                words[span.label].update((i, w) for w in range(span.start, span.end))
        return words

    gold_words, pred_words = positive_words(gold), positive_words(pred)
    counts: list[int] = []
    for label in labels:
        tp = len(gold_words[label] & pred_words[label])
        counts += [tp, len(pred_words[label]) - tp, len(gold_words[label]) - tp]
    return tuple(counts)


def _pico_result(counts: Sequence[int], labels: Sequence[str]) -> dict[str, float]:
    result = _per_label_result(counts, labels)
    result["score"] = sum(result[f"f1_{_key(label)}"] for label in labels) / len(labels)
    return result


def _per_label_result(counts: Sequence[int], labels: Sequence[str]) -> dict[str, float]:
    """precision_, recall_, f1_ and support_<label> of each label from its (tp, fp, fn), flattened in `counts`."""
    result: dict[str, float] = {}
    for k, label in enumerate(labels):
        tp, fp, fn = counts[3 * k:3 * k + 3]
        precision, recall, f1 = _prf(tp, fp, fn)
        key = _key(label)
        result.update({f"precision_{key}": precision, f"recall_{key}": recall, f"f1_{key}": f1,
                       f"support_{key}": float(tp + fn)})
    return result


@METRICS.register("relation_micro_f1")
def relation_micro_f1(gold: Sequence[str], pred: Sequence[str], negative: str,
                      labels: Sequence[str] = ()) -> dict[str, float]:
    """Micro P/R/F1 over the positive classes, `negative` excluded (ChemProt, DDI; = sklearn's micro
    `f1_score` over the positive labels). Every class seen and every one of `labels` gets "f1_<class>", so
    a run's metric names do not depend on the sample."""
    check_lengths(gold, pred)
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    for g, p in zip(gold, pred):
        if g == p:
            if g != negative:
                tp[g] += 1
            continue
        if p != negative:
            fp[p] += 1
        if g != negative:
            fn[g] += 1
    result = _counts_result(sum(tp.values()), sum(fp.values()), sum(fn.values()))
    for label in sorted(set(tp | fp | fn) | set(labels) - {negative}):
        result[f"f1_{_key(label)}"] = _prf(tp[label], fp[label], fn[label])[2]
    return result


@METRICS.register("positive_class_f1")
def positive_class_f1(gold: Sequence[str], pred: Sequence[str], positive: str) -> dict[str, float]:
    """Binary F1 of the `positive` class (BLURB GAD); every other label counts as negative."""
    check_lengths(gold, pred)
    tp = fp = fn = 0
    for g, p in zip(gold, pred):
        if p == positive:
            if g == positive:
                tp += 1
            else:
                fp += 1
        elif g == positive:
            fn += 1
    return _counts_result(tp, fp, fn)


@METRICS.register("pearson")
def pearson(gold: Sequence[float], pred: Sequence[float]) -> dict[str, float]:
    """Pearson r of gold and predicted scores (BLURB BIOSSES); no variance, or fewer than two pairs, gives
    0.0, not NaN ("constant_prediction" says when the predictions are constant)."""
    check_lengths(gold, pred)
    r, constant_pred = pearson_rows(np.asarray(gold, dtype=np.float64)[None], np.asarray(pred, dtype=np.float64)[None])
    return {"score": float(r[0]), "constant_prediction": float(constant_pred[0]), "n": float(len(gold))}


def pearson_rows(gold: np.ndarray, pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`pearson`'s r for each row of `gold` and `pred` (rows x pairs), and whether each row's predictions
    are constant: one vectorised path for a run's score and a bootstrap's resamples."""
    if gold.shape[1] < 2:
        return np.zeros(len(gold)), np.ones(len(gold), dtype=bool)
    constant_pred = pred.max(axis=1) == pred.min(axis=1)
    degenerate = constant_pred | (gold.max(axis=1) == gold.min(axis=1))
    gc, pc = gold - gold.mean(axis=1, keepdims=True), pred - pred.mean(axis=1, keepdims=True)
    product = np.einsum("ij,ij->i", gc, gc) * np.einsum("ij,ij->i", pc, pc)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.einsum("ij,ij->i", gc, pc) / np.sqrt(np.where(degenerate, 1.0, product))
    return np.where(degenerate, 0.0, np.clip(r, -1.0, 1.0)), constant_pred


@METRICS.register("multilabel_micro_f1")
def multilabel_micro_f1(
    gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]], labels: Sequence[str]
) -> dict[str, float]:
    """Micro F1 over all (instance, label) decisions (BLURB HoC), plus "f1_<label>" of each of `labels`."""
    check_lengths(gold, pred)
    known = set(labels)
    tp = dict.fromkeys(labels, 0)
    fp = dict.fromkeys(labels, 0)
    fn = dict.fromkeys(labels, 0)
    for i, (g_labels, p_labels) in enumerate(zip(gold, pred)):
        g, p = set(g_labels), set(p_labels)
        unknown = (g | p) - known
        if unknown:
            raise ValueError(f"instance {i} has labels {sorted(unknown)} not in {list(labels)}")
        for label in g & p:
            tp[label] += 1
        for label in p - g:
            fp[label] += 1
        for label in g - p:
            fn[label] += 1
    result = _counts_result(sum(tp.values()), sum(fp.values()), sum(fn.values()))
    for label in labels:
        result[f"f1_{_key(label)}"] = _prf(tp[label], fp[label], fn[label])[2]
        result[f"support_{_key(label)}"] = float(tp[label] + fn[label])
    return result


@METRICS.register("accuracy")
def accuracy(gold: Sequence, pred: Sequence) -> dict[str, float]:
    """Fraction of instances whose prediction equals the gold label (BLURB PubMedQA, BioASQ)."""
    check_lengths(gold, pred)
    correct = sum(g == p for g, p in zip(gold, pred))
    return {"score": ratio(correct, len(gold)), "correct": float(correct), "total": float(len(gold))}


COUNT_KEYS = frozenset({"tp", "fp", "fn", "support", "correct", "total", "n", "constant_prediction",
                        "questions", "questions_without_positive"})
COUNT_PREFIXES = ("support_",)  # per-class counts


def is_count(key: str) -> bool:
    """A count (or a flag) rather than a score: in the run's details artifact, not an MLflow metric."""
    return key in COUNT_KEYS or key.startswith(COUNT_PREFIXES)


def summary_keys(metrics: Mapping[str, float]) -> list[str]:
    """The keys a run logs as MLflow metrics (`test/<key>`, `best_dev/<key>`): all but the counts."""
    return [key for key in metrics if not is_count(key)]


def curve_keys(metrics: Mapping[str, float]) -> list[str]:
    """The keys a run charts per epoch (`dev/<key>`): the headline scores, no per-class ones."""
    return [key for key in summary_keys(metrics) if "_" not in key]


def metric_keys(metric: str, metric_args: Mapping) -> set[str]:
    """The keys a dataset's metric logs as MLflow metrics, found by scoring no examples."""
    fn = METRICS.get(metric)
    required = [p for p in inspect.signature(fn).parameters.values()
                if p.default is p.empty and p.name not in metric_args
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return {"score", *summary_keys(fn(*[[] for _ in required], **metric_args))}


def blurb_score(scores: Mapping[str, float], task_types: Mapping[str, str]) -> dict:
    """The BLURB score (Gu et al., Sec. 2.5): the mean within each task type of `scores` (dataset -> score),
    then over the types present; `task_types` maps a dataset to one of `BLURB_TASK_TYPES`."""
    if not scores:
        raise ValueError("no scores to aggregate")
    untyped = sorted(name for name in scores if name not in task_types)
    if untyped:
        raise ValueError(f"no task type for dataset(s): {', '.join(untyped)}")
    unknown = sorted({task_types[name] for name in scores} - set(BLURB_TASK_TYPES))
    if unknown:
        raise ValueError(f"task type(s) {', '.join(unknown)} are not BLURB's; BLURB averages "
                         f"{', '.join(BLURB_TASK_TYPES)}")
    by_type: dict[str, list[float]] = {}
    for name, value in scores.items():
        by_type.setdefault(task_types[name], []).append(float(value))
    per_type = {t: sum(by_type[t]) / len(by_type[t]) for t in BLURB_TASK_TYPES if t in by_type}
    return {"score": sum(per_type.values()) / len(per_type), "per_type": per_type}


# ---------------------------------------------------------------------------------------------------
# Bio-ELECTRA's yes/no (per-class P/R/F1, Table 3) and answer-candidate ranking (MRR, Table 5)

@METRICS.register("per_class_f1")
def per_class_f1(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str]) -> dict[str, float]:
    """P/R/F1 of every class in `labels` on its own (BioASQ's yes/no measure), and their unweighted means:
    "score" is macro F1 (= scikit-learn's `f1_score(average="macro")`). A label outside `labels` raises."""
    return _per_class_result(_per_class_counts(gold, pred, labels), labels)


def _per_class_counts(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str]) -> tuple[int, ...]:
    """(tp, fp, fn) of each class of `labels` in order, flattened."""
    check_lengths(gold, pred)
    if not labels:
        raise ValueError("labels must name at least one class")
    unknown = (set(gold) | set(pred)) - set(labels)
    if unknown:
        raise ValueError(f"labels {sorted(unknown)} not in {list(labels)}")
    counts: list[int] = []
    for label in labels:
        counts += [sum(g == p == label for g, p in zip(gold, pred)), sum(p == label != g for g, p in zip(gold, pred)),
                   sum(g == label != p for g, p in zip(gold, pred))]
    return tuple(counts)


def _per_class_result(counts: Sequence[int], labels: Sequence[str]) -> dict[str, float]:
    result = _per_label_result(counts, labels)
    for measure, name in (("f1", "score"), ("precision", "precision"), ("recall", "recall")):
        result[name] = sum(result[f"{measure}_{_key(label)}"] for label in labels) / len(labels)
    return result


@METRICS.register("mean_reciprocal_rank")
def mean_reciprocal_rank(gold: Sequence[str], scores: Sequence[float], groups: Sequence[str],
                         positive: str = "1") -> dict[str, float]:
    """Mean over questions of 1 / rank of the best relevant candidate (Bio-ELECTRA's ranking). `gold[i]` is
    candidate i's label (`positive`: relevant), `scores[i]` its score, `groups[i]` its question. Ties count
    against the model, so a constant scorer cannot profit from file order."""
    return _ranking_result(_ranking_sums(gold, scores, groups, positive))


def _ranking_sums(gold: Sequence[str], scores: Sequence[float], groups: Sequence[str],
                  positive: str = "1") -> tuple[float, ...]:
    """(reciprocal ranks, questions ranked right first, questions averaged, questions without a positive)."""
    check_lengths(gold, scores, "scores")
    check_lengths(gold, groups, "groups")
    by_question: dict[str, list[tuple[float, bool]]] = {}
    for g, s, q in zip(gold, scores, groups):
        by_question.setdefault(q, []).append((float(s), g == positive))
    reciprocal_ranks = []
    for candidates in by_question.values():
        relevant = [s for s, is_positive in candidates if is_positive]
        if not relevant:
            continue
        best = max(relevant)
        rank = 1 + sum(s > best or (s == best and not is_positive) for s, is_positive in candidates)
        reciprocal_ranks.append(1.0 / rank)
    answered = len(reciprocal_ranks)
    return (sum(reciprocal_ranks), float(sum(r == 1.0 for r in reciprocal_ranks)), float(answered),
            float(len(by_question) - answered))


def _ranking_result(sums: Sequence[float], **_) -> dict[str, float]:
    reciprocal, first, answered, without = sums
    return {"score": ratio(reciprocal, answered), "hits_at_1": ratio(first, answered),
            "questions": float(answered), "questions_without_positive": float(without)}


METRIC_NAMES.update({"per_class_f1": "macro F1", "mean_reciprocal_rank": "MRR"})


# ---------------------------------------------------------------------------------------------------
# Metrics whose counts add up over instances: a bootstrap sums its units' counts instead of rescoring every
# draw. Pearson is vectorised by `pearson_rows` instead.

def _reported(metric, keys: tuple[str, ...]):
    """The counts `metric` reports under `keys`, on the instances given: the metric's own counting."""
    return lambda gold, pred, **args: tuple(int(metric(gold, pred, **args)[key]) for key in keys)


def _micro_result(counts: Sequence[int], **_) -> dict[str, float]:
    return _counts_result(*counts)


def _accuracy_result(counts: Sequence[int], **_) -> dict[str, float]:
    correct, total = counts
    return {"score": ratio(correct, total), "correct": float(correct), "total": float(total)}


ADDITIVE.update({
    **{name: Additive(_reported(METRICS.get(name), ("tp", "fp", "fn")), _micro_result)
       for name in ("entity_f1", "relation_micro_f1", "positive_class_f1", "multilabel_micro_f1")},
    "accuracy": Additive(_reported(accuracy, ("correct", "total")), _accuracy_result),
    "pico_word_macro_f1": Additive(_pico_counts, lambda counts, labels, **_: _pico_result(counts, labels)),
    "per_class_f1": Additive(_per_class_counts, lambda counts, labels, **_: _per_class_result(counts, labels)),
    # a mean over questions (a unit is one question's candidates): floats, summed in another order
    "mean_reciprocal_rank": Additive(_ranking_sums, _ranking_result, exact=False),
})


# imported last so that every metric is registered wherever METRICS is read
import datamodules.qa_metrics  # noqa: E402,F401  (registers bioasq_factoid, bioasq_list, squad_v1)

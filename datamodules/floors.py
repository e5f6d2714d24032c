"""What a model that learned nothing scores: each task's trivial baselines, and a run's learning state.

A trivial baseline predicts without reading its input (one label, no mention, one label set, one score,
the empty answer), scored by the task's own scorer on the test instances the run scored; the best is the
run's floor.

A run's state (`test_state`):
- `collapsed`: its predictions do not depend on the input: one label (or label set, or answer) for at
  least COLLAPSE_SHARE of the test instances, no mention anywhere, or one score for every instance;
- `at floor`: its test score is not above the floor;
- `learned`: otherwise.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from datamodules.instances import Span
from datamodules.task_kinds import kind_name

LEARNED, AT_FLOOR, COLLAPSED = "learned", "at floor", "collapsed"
STATES = (LEARNED, AT_FLOOR, COLLAPSED)
COLLAPSE_SHARE = 0.99  # one prediction for this share of the test instances: the model ignores its input
HISTOGRAM_ENTRIES = 50  # labels kept in a prediction histogram (a user dataset may have hundreds)


@dataclass(frozen=True)
class Floor:
    """A trivial baseline's score (the metric's own units, e.g. F1 in [0, 1]) and what it predicts."""

    score: float
    kind: str


def baselines(encoder, instances: Sequence[Any]) -> list[Floor]:
    """Every trivial baseline of the encoder's task, scored on `instances` by the encoder's scorer."""
    spec, kind = encoder.spec, kind_name(encoder.spec)

    def scored(name: str, predict: Callable[[Any], Any]) -> Floor:
        return Floor(float(encoder.score(instances, [predict(x) for x in instances])["score"]), name)

    if kind == "token":
        out = [scored("all O", lambda x: ())]
        if spec.metric == "pico_word_macro_f1":  # a tagger can tag every word as one element, not as several
            out += [scored(f"every word {label}", lambda x, label=label: (Span(0, len(x.tokens), label),))
                    for label in spec.metric_args["labels"]]
        return out
    if kind == "span":
        return [scored("empty answer", lambda x: [])]
    if kind in ("regression", "ranking"):
        return [scored("constant score", lambda x: 0.0)]
    golds = [encoder.gold(x) for x in instances]
    if kind == "multilabel":
        # micro F1 of a constant label set grows with the gold counts it covers: the best set of each size k
        # is the k most frequent labels, so sizes 0..L cover every candidate for the best
        frequent = [label for label, _ in Counter(g for labels in golds for g in labels).most_common()]
        frequent += [label for label in spec.labels if label not in frequent]
        out = [scored("no label", lambda x: ()), scored("every label", lambda x: tuple(spec.labels))]
        out += [scored(f"top-{k} labels", lambda x, k=k: tuple(frequent[:k])) for k in range(1, len(frequent))]
        return out
    majority = Counter(golds).most_common(1)[0][0] if golds else None
    return [scored(_constant_name(spec, label, majority), lambda x, label=label: label) for label in spec.labels]


def _constant_name(spec, label: str, majority: str | None) -> str:
    args = spec.metric_args
    if label == args.get("negative") or ("positive" in args and label != args["positive"]):
        return "all negative"
    if label == args.get("positive"):
        return "all positive"
    return f"majority class ({label})" if label == majority else f"all {label}"


def floor_of(encoder, instances: Sequence[Any]) -> Floor:
    """The best trivial baseline on `instances` (the first of equals, in `baselines`' order)."""
    found = baselines(encoder, instances)
    return max(found, key=lambda f: f.score) if found else Floor(0.0, "none")


def _predicted(kind: str, prediction: Any) -> Any:
    """What one prediction says, as a hashable value whose repeats mean the same answer."""
    if kind == "span":
        return prediction[0][0] if prediction else ""
    if kind == "multilabel":
        return tuple(sorted(prediction))
    return prediction


def collapsed(encoder, predictions: Sequence[Any]) -> bool:
    """True where the predictions do not depend on the input (module docstring)."""
    kind = kind_name(encoder.spec)
    if not predictions:
        return False
    if kind == "token":
        return not any(predictions)
    if kind in ("regression", "ranking"):
        values = np.asarray(predictions, dtype=float)
        return bool(np.ptp(values) <= 1e-9 * (1.0 + np.abs(values).max()))
    top = Counter(_predicted(kind, p) for p in predictions).most_common(1)[0][1]
    return top >= COLLAPSE_SHARE * len(predictions)


def learning_state(score: float, floor: Floor, is_collapsed: bool) -> str:
    if is_collapsed:
        return COLLAPSED
    return LEARNED if score > floor.score else AT_FLOOR


def histogram(encoder, predictions: Sequence[Any]) -> dict[str, int]:
    """The HISTOGRAM_ENTRIES most frequent predictions (labels, mention types, score bins) on the test split."""
    kind = kind_name(encoder.spec)
    counts: Counter[str] = Counter()
    if kind == "token":
        for spans in predictions:
            counts.update(s.label for s in spans)
            counts["(no mention)"] += not spans
    elif kind == "multilabel":
        for labels in predictions:
            counts.update(labels)
            counts["(no label)"] += not labels
    elif kind == "span":
        counts.update("answered" if p else "no answer" for p in predictions)
    elif kind in ("regression", "ranking"):
        values = np.asarray(predictions, dtype=float)
        if len(values):
            number, edges = np.histogram(values, bins=10)
            counts.update({f"{lo:.4g}..{hi:.4g}": int(n) for lo, hi, n in zip(edges, edges[1:], number) if n})
    else:
        counts.update(str(p) for p in predictions)
    return dict(counts.most_common(HISTOGRAM_ENTRIES))

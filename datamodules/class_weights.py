"""Class weights for a class-weighted ("balanced") loss, computed from a training split.

Bio-ELECTRA weights its yes/no classifier's and answer ranker's loss. "Balanced" is scikit-learn's
`compute_class_weight("balanced")`: n_samples / (n_classes * count_c), so every class weighs the same.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from bioablate_core.errors import ConfigError
from datamodules.instances import Instance
from datamodules.task_types import TASK_TYPES


def balanced_class_weights(labels: Sequence[str], classes: Sequence[str]) -> tuple[float, ...]:
    """One weight per class of `classes`, in that order; an absent class or an unknown label raises."""
    if not classes:
        raise ValueError("classes must name at least one class")
    counts = Counter(labels)
    unknown = sorted(set(counts) - set(classes))
    if unknown:
        raise ValueError(f"labels {unknown} are not among the classes {list(classes)}")
    absent = [c for c in classes if not counts[c]]
    if absent:
        raise ValueError(f"classes {absent} do not occur in the training labels: their balanced weight is undefined")
    n_samples = len(labels)
    return tuple(n_samples / (len(classes) * counts[c]) for c in classes)


def training_class_weights(train: Sequence[Instance], classes: Sequence[str]) -> tuple[float, ...]:
    """Balanced weights from a split of single-label instances."""
    labels = []
    for instance in train:
        label = getattr(instance, "label", None)
        if label is None:
            text_labels = getattr(instance, "labels", ())
            if len(text_labels) != 1:
                raise ValueError(f"instance {instance.id} has {len(text_labels)} labels; balanced weights need one")
            label = text_labels[0]
        labels.append(label)
    return balanced_class_weights(labels, classes)


KEY = "finetune.class_weights"


def check_class_weights(value, spec) -> None:
    """`finetune.class_weights` (None, `balanced`, a weight per class in label order, or class -> weight,
    unnamed classes 1) checked against dataset `spec` before any data is read."""
    if value is None:
        return
    if not TASK_TYPES.of(spec.task_type).class_weights or spec.multi_label:
        what = "multi-label classification" if spec.multi_label else f"task type {spec.task_type}"
        weighted = TASK_TYPES.names(lambda t: t.class_weights)  # a cross-entropy over one class per example
        raise ConfigError(f"{KEY} applies to single-label classification ({', '.join(weighted)}), "
                          f"not to {spec.name} ({what}); drop the override")
    if isinstance(value, str):
        if value != "balanced":
            raise ConfigError(f"{KEY} = {value!r}: give `balanced`, a list of {len(spec.labels)} weights "
                              f"(in the order {list(spec.labels)}) or a mapping class -> weight")
        return
    items = list(value.items()) if isinstance(value, dict) else list(zip(spec.labels, value))
    if isinstance(value, (list, tuple)) and len(value) != len(spec.labels):
        raise ConfigError(f"{KEY}: {len(value)} weights for {len(spec.labels)} classes of {spec.name} "
                          f"({list(spec.labels)}); give one per class, in that order")
    for label, weight in items:
        if isinstance(label, bool):
            raise ConfigError(f"{KEY}: YAML reads yes/no/true/false as booleans, not as classes; quote them, "
                              "e.g. {'no': 4}")
        if str(label) not in spec.labels:
            raise ConfigError(f"{KEY}: '{label}' is not a class of {spec.name} ({list(spec.labels)})")
        # NaN passes `weight <= 0` (every comparison with it is False) and trains on a NaN loss; inf too
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < math.inf:
            raise ConfigError(f"{KEY}: the weight of '{label}' must be a positive finite number, got {weight!r}")


def resolve_class_weights(value, spec, train: Sequence[Instance]) -> tuple[float, ...] | None:
    """The loss's weight per class in `spec.labels` order for `value` (`finetune.class_weights`), or None;
    `balanced` comes from `train`."""
    check_class_weights(value, spec)
    if value is None:
        return None
    if value == "balanced":
        try:
            return training_class_weights(train, spec.labels)
        except ValueError as e:
            raise ConfigError(f"{KEY} = balanced on {spec.name}: {e}; give the weights explicitly") from None
    if isinstance(value, dict):
        given = {str(k): float(v) for k, v in value.items()}
        return tuple(given.get(label, 1.0) for label in spec.labels)
    return tuple(float(w) for w in value)

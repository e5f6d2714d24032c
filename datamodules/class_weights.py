"""Class weights for a class-weighted ("balanced") loss, computed from a training split.

Bio-ELECTRA trains its yes/no classifier (80% yes) and answer-candidate ranker (about 1 relevant per 99)
with a weighted loss. "Balanced" weights are scikit-learn's `compute_class_weight("balanced")`:
weight_c = n_samples / (n_classes * count_c), so every class contributes the same total weight and
the weights average to 1 over the samples. A pure function of the data, so it lives in the data layer;
the loss that uses the weights is the model's business.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from datamodules.instances import Instance


def balanced_class_weights(labels: Sequence[str], classes: Sequence[str]) -> tuple[float, ...]:
    """One weight per class of `classes`, in that order (the order of the classifier's outputs).

    A class that never occurs in `labels` has no defined weight (its count is 0), and a label outside
    `classes` would be silently unweighted: both raise `ValueError`.
    """
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
    """Balanced weights from a split of single-label instances (relation, pair, or text instances with
    one label each); e.g. `training_class_weights(spec.read(d)["train"], spec.labels)`."""
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

"""The metric registry and the arithmetic every metric module shares. Metrics register here
(`datamodules.metrics` for BLURB's and the seed papers', `datamodules.qa_metrics` for extractive QA);
`datamodules.metrics` imports both, so importing it registers them all."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bioablate_core.registry import Registry

Metric = Callable[..., dict[str, float]]
METRICS: Registry[Metric] = Registry("metric")
# Each metric's primary number ("score") as people name it, for figures' axes and model cards (the
# registry's names are for configs)
METRIC_NAMES: dict[str, str] = {}


@dataclass(frozen=True)
class Additive:
    """How a metric's result follows from counts that add up over instances (integers; per-question floats where
    not `exact`): `count(gold, pred,
    **args)` (the metric's own arguments) gives the counts of the instances given, `finish(counts, **args)`
    the metric's result (its headline keys at least) from counts summed over any collection of instances.
    Resampling a test set (ablations/tables/scored_units.py) counts each unit once and sums a draw's rows
    instead of rescoring the draw: the same numbers, bit for bit where `exact` (integer sums, the same arithmetic
    after)."""

    count: Callable[..., tuple[float, ...]]  # integers where `exact`
    finish: Callable[..., dict[str, float]]
    # True: integer counts, so a draw's result is the scorer's own, bit for bit. False: a mean over questions
    # (QA, answer ranking), whose per-question values are floats: a draw's sums are added in another order than
    # the scorer adds them, so a result agrees with rescoring to the last bits only (~1e-15 relative)
    exact: bool = True


# metric name -> its decomposition, for the metrics that have one (the others are rescored per resample)
ADDITIVE: dict[str, Additive] = {}


def check_lengths(gold: Sequence, pred: Sequence, what: str = "pred") -> None:
    if len(gold) != len(pred):
        raise ValueError(f"gold has {len(gold)} instances but {what} has {len(pred)}")


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0

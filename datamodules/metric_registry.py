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
    """A metric's result from counts that add up over instances: `count(gold, pred, **args)` counts the
    instances given, `finish(counts, **args)` scores counts summed over any collection, so a resample sums
    its units' rows instead of rescoring (bit for bit where `exact`)."""

    count: Callable[..., tuple[float, ...]]  # integers where `exact`
    finish: Callable[..., dict[str, float]]
    # False: per-question floats summed in another order, so a draw agrees with rescoring to the last bits only
    exact: bool = True


# metric name -> its decomposition, for the metrics that have one (the others are rescored per resample)
ADDITIVE: dict[str, Additive] = {}


def check_lengths(gold: Sequence, pred: Sequence, what: str = "pred") -> None:
    if len(gold) != len(pred):
        raise ValueError(f"gold has {len(gold)} instances but {what} has {len(pred)}")


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0

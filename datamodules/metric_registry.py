"""The metric registry and the arithmetic every metric module shares. Metrics register here
(`datamodules.metrics` for BLURB's and the seed papers', `datamodules.qa_metrics` for extractive QA);
`datamodules.metrics` imports both, so importing it registers them all."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bioablate_core.registry import Registry

Metric = Callable[..., dict[str, float]]
METRICS: Registry[Metric] = Registry("metric")
# Each metric's primary number ("score") as people name it, for figures' axes and model cards (the
# registry's names are for configs)
METRIC_NAMES: dict[str, str] = {}


def check_lengths(gold: Sequence, pred: Sequence, what: str = "pred") -> None:
    if len(gold) != len(pred):
        raise ValueError(f"gold has {len(gold)} instances but {what} has {len(pred)}")


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0

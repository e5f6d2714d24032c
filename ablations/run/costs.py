"""What a run cost, logged at its end: `system/compute/*` metrics (model FLOPs, tokens, device-seconds, peak
memory; counted by lightning_modules.compute.ComputeCounter) and the tag `system/compute/device` naming the
device. Tables read them back beside the scores (ablations/tables/cost.py)."""

from __future__ import annotations

from ablations.run.lifecycle import TrackedRun
from bioablate_core.hardware import COMPUTE_PREFIX
from lightning_modules.compute import ComputeCounter


def log_compute(run: TrackedRun, counter: ComputeCounter) -> None:
    """The counter's metrics and the device, on the run (nothing in a DDP worker: rank 0 reports)."""
    from bioablate_core.hardware import machine

    run.log_metrics(counter.metrics())
    run.set_tags({f"{COMPUTE_PREFIX}device": machine()})

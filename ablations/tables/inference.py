"""The two statsmodels calls behind a table's significance marks and its seeds-needed figures:

- `correct`: p values corrected for the many comparisons of one table (statsmodels.stats.multitest
  .multipletests; Holm by default, any of results.CORRECTIONS);
- `seeds_needed`: the seeds a two-sided paired t-test over seeds needs to detect a difference at
  alpha = 0.05 with power 0.8, given the standard deviation of the per-seed differences
  (statsmodels.stats.power.TTestPower, the one-sample test of the paired differences).
"""

from __future__ import annotations

import math
from typing import Sequence

from ablations.results import CORRECTIONS

ALPHA = 0.05  # significance threshold of every test
POWER = 0.8  # the seeds-needed figures' power
MIN_SEEDS = 3  # below this many seeds a seed-level test is not shown as significant ("n too small")


def correct(p_values: Sequence[float], method: str = "holm") -> list[float]:
    """The p values corrected by `method` (a key of results.CORRECTIONS; "none": unchanged), in order."""
    if method not in CORRECTIONS:
        raise ValueError(f"unknown correction {method!r}; known: {', '.join(CORRECTIONS)}")
    if not p_values or method == "none":
        return [float(p) for p in p_values]
    import gc

    from statsmodels.stats.multitest import multipletests

    # statsmodels' Holm branch ends in a full gc.collect() (multitest.py, statsmodels 0.15): 0.5 s in a
    # process holding torch and transformers, paid by every corrected family of every rendered table, to
    # free a few arrays of len(p_values). Skipped for the call (a statement's worth of time, one thread
    # renders); the corrected values are the same.
    collect, gc.collect = gc.collect, _no_collection
    try:
        return [float(p) for p in multipletests(list(p_values), alpha=ALPHA, method=method)[1]]
    finally:
        gc.collect = collect


def _no_collection(generation: int = 2) -> int:
    return 0


def seeds_needed(effect: float, sd: float, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """Seeds (pairs) for a two-sided paired t-test to detect a mean difference `effect` when the per-seed
    differences have standard deviation `sd`, rounded up; at least 2 (a t-test needs them). None where it is
    undefined (no spread, or no difference to detect)."""
    if not (sd > 0 and abs(effect) > 0) or not (math.isfinite(sd) and math.isfinite(effect)):
        return None
    from statsmodels.stats.power import TTestPower

    try:
        n = TTestPower().solve_power(effect_size=abs(effect) / sd, nobs=None, alpha=alpha, power=power,
                                     alternative="two-sided")
    except (ValueError, RuntimeError):  # the root finder found no n: far beyond any seed budget
        return None
    n = float(n[0] if hasattr(n, "__len__") else n)
    return max(2, math.ceil(n)) if math.isfinite(n) else None

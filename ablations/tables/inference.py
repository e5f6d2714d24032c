"""The two statsmodels calls behind a table's significance marks and its seeds-needed figures:

- `correct`: p values corrected for the many comparisons of one table (statsmodels.stats.multitest
  .multipletests; Holm by default, any of results.CORRECTIONS);
- `seeds_needed`: the seeds a two-sided paired t-test over seeds needs to detect a difference at
  alpha = 0.05 with power 0.8, given the standard deviation of the per-seed differences
  (statsmodels.stats.power.TTestPower, the one-sample test of the paired differences), and its range over
  the spread's own chi-square interval (`seeds_needed_range`).
"""

from __future__ import annotations

import math
import warnings
from typing import Sequence

from ablations.results import CORRECTIONS

ALPHA = 0.05  # significance threshold of every test
POWER = 0.8  # the seeds-needed figures' power
CONFIDENCE = 0.95  # of the seeds-needed range's interval on the spread
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
    undefined (no spread, or no difference to detect). An effect so large that 2 seeds already reach the
    power needs 2: statsmodels' solver gives NaN there (its bracket starts above the answer). One so small
    that the solver fails needs the normal approximation's ((z_alpha/2 + z_power) / d)^2, which the t-test's
    answer approaches for large n."""
    if not (sd > 0 and abs(effect) > 0) or not (math.isfinite(sd) and math.isfinite(effect)):
        return None
    from scipy.stats import norm
    from statsmodels.stats.power import TTestPower

    d = abs(effect) / sd
    if TTestPower().power(effect_size=d, nobs=2, alpha=alpha, alternative="two-sided") >= power:
        return 2
    try:
        with warnings.catch_warnings():  # a failed solve warns and gives NaN: answered below instead
            warnings.simplefilter("ignore")
            n = TTestPower().solve_power(effect_size=d, nobs=None, alpha=alpha, power=power, alternative="two-sided")
        n = float(n[0] if hasattr(n, "__len__") else n)
    except (ValueError, RuntimeError):
        n = math.nan
    if not math.isfinite(n):
        n = ((norm.ppf(1 - alpha / 2) + norm.ppf(power)) / d) ** 2
    return max(2, math.ceil(n))


def seeds_needed_range(effect: float, sd: float, df: int, alpha: float = ALPHA,
                       power: float = POWER) -> tuple[int, int] | None:
    """`seeds_needed` over the 95% interval of the standard deviation `sd` estimated with `df` degrees of
    freedom (the chi-square interval: sd x sqrt(df / chi2 quantile)): with 3 seeds (df 2) the sd is known to
    within a factor of about 0.52 to 6.3, so the seeds needed only to within a factor of 0.27 to 40."""
    if df < 1 or seeds_needed(effect, sd, alpha, power) is None:
        return None
    from scipy.stats import chi2

    low_sd = sd * math.sqrt(df / chi2.ppf(1 - (1 - CONFIDENCE) / 2, df))
    high_sd = sd * math.sqrt(df / chi2.ppf((1 - CONFIDENCE) / 2, df))
    return seeds_needed(effect, low_sd, alpha, power), seeds_needed(effect, high_sd, alpha, power)

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
CHECKED_SEEDS = 100  # up to this many, seeds_needed checks the solver's answer by the power of each count
MIN_SEEDS = 3  # below this many seeds a seed-level test is not shown as significant ("n too small")


def correct(p_values: Sequence[float], method: str = "holm") -> list[float]:
    """The p values corrected by `method` (a key of results.CORRECTIONS; "none": unchanged), in order."""
    if method not in CORRECTIONS:
        raise ValueError(f"unknown correction {method!r}; known: {', '.join(CORRECTIONS)}")
    if not p_values or method == "none":
        return [float(p) for p in p_values]
    import gc

    from statsmodels.stats.multitest import multipletests

    # statsmodels' Holm branch ends in a full gc.collect(), which in a process holding torch and transformers
    # walks every object they made: frozen for the call, the collection scans only what the call made
    gc.freeze()
    try:
        return [float(p) for p in multipletests(list(p_values), alpha=ALPHA, method=method)[1]]
    finally:
        gc.unfreeze()


def paired_power(effect_size: float, nobs: int, alpha: float = ALPHA) -> float:
    """The power of a two-sided one-sample (paired) t-test with `nobs` pairs at standardized `effect_size`:
    statsmodels' TTestPower, or where its noncentral t gives NaN (scipy's nct with 1 or 2 degrees of freedom
    and a large noncentrality) the same probability integrated over the chi-square of the variance."""
    from statsmodels.stats.power import TTestPower

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        power = float(TTestPower().power(effect_size=effect_size, nobs=nobs, alpha=alpha, alternative="two-sided"))
    if math.isfinite(power):
        return power
    from scipy import integrate
    from scipy.stats import chi2, norm, t

    df, shift = nobs - 1, effect_size * math.sqrt(nobs)
    critical = t.ppf(1 - alpha / 2, df)

    def rejected(v: float) -> float:  # P(|Z + shift| > critical x sqrt(v / df)), weighted by v's density
        bound = critical * math.sqrt(v / df)
        return (norm.sf(bound - shift) + norm.cdf(-bound - shift)) * chi2.pdf(v, df)
    return float(integrate.quad(rejected, chi2.ppf(1e-12, df), chi2.ppf(1 - 1e-12, df), limit=200)[0])


def seeds_needed(effect: float, sd: float, alpha: float = ALPHA, power: float = POWER) -> int | None:
    """Seeds (pairs) for a two-sided paired t-test to detect a mean difference `effect` when the per-seed
    differences have standard deviation `sd`: the smallest whole number of seeds, at least 2, whose power
    reaches `power`. None where it is undefined (no spread, or no difference to detect). statsmodels'
    solve_power gives the start; it returns NaN for a large effect (its bracket starts above the answer) and
    2.0 for some whose answer is 3, so a small answer is checked seed by seed (`paired_power`); where its
    solver fails for a tiny effect, the normal approximation ((z_alpha/2 + z_power) / d)^2 starts instead,
    which the t-test's answer approaches for many seeds."""
    if not (sd > 0 and abs(effect) > 0) or not (math.isfinite(sd) and math.isfinite(effect)):
        return None
    from scipy.stats import norm
    from statsmodels.stats.power import TTestPower
    from statsmodels.tools import sm_exceptions  # noqa: F401 -- see below

    d = abs(effect) / sd
    try:
        # a failed solve warns and gives NaN: answered below instead. statsmodels imports sm_exceptions at its
        # first failed solve, and that import puts an "always" filter for the warning in front of this one
        # (the warning reached the user's terminal): imported above, before the filter is set
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            n = TTestPower().solve_power(effect_size=d, nobs=None, alpha=alpha, power=power, alternative="two-sided")
        n = float(n[0] if hasattr(n, "__len__") else n)
    except (ValueError, RuntimeError):
        n = math.nan
    if not math.isfinite(n):
        n = ((norm.ppf(1 - alpha / 2) + norm.ppf(power)) / d) ** 2
    seeds = max(2, math.ceil(n))
    if seeds <= CHECKED_SEEDS:
        while paired_power(d, seeds, alpha) < power:
            seeds += 1
        while seeds > 2 and paired_power(d, seeds - 1, alpha) >= power:
            seeds -= 1
    return seeds


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

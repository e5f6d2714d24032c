"""How uncertain a score is over its test examples, by resampling them (scored_units.py's units: sentences,
questions or instances), the metric being the task's own scorer on each resample:

- `interval`: the percentile bootstrap 95% confidence interval (scipy.stats.bootstrap) of a run's score, or
  of a cell's mean over seeds (each seed's test set resampled on its own: a stratified bootstrap);
- `paired_test`: the two-sided paired permutation test (scipy.stats.permutation_test, permutation_type
  "samples": each unit's two predictions swapped between the two cells at random) of the difference between
  two cells on the same test units, for one seed or pooled over seeds (the mean of the per-seed differences).

`ResamplingCache` keeps each result in the work directory, keyed by the runs' ids, the metric key and the
number of resamples, so re-rendering a table recomputes nothing it computed before.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ablations.tables.inference import ALPHA
from ablations.tables.scored_units import ScoredUnits
from bioablate_core.fingerprints import digest as value_digest

# Bootstrap resamples and permutations: N_RESAMPLES for test sets of up to WORK // N_RESAMPLES units, fewer
# for larger ones (never below MIN_RESAMPLES), so that one resampling scores at most about WORK units and a
# 27-run table renders in well under a minute on 2 cores (the task's own scorer runs once per resample)
N_RESAMPLES = 1000
MIN_RESAMPLES = 100
WORK = 250_000
POLICY = f"{N_RESAMPLES}/{MIN_RESAMPLES}/{WORK}"  # in the cache keys: another policy computes anew
CONFIDENCE = 0.95
SEED = 0  # the resampling is seeded: the same runs give the same interval and p value


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    resamples: int


def resamples_for(units: int, comparisons: int = 1) -> int:
    """How many resamples a test set of `units` units gets (see WORK). A permutation test corrected together
    with `comparisons` - 1 others gets at least 4 x comparisons / ALPHA, up to N_RESAMPLES: its smallest
    two-sided p is 2 / (n + 1), and the correction multiplies it by up to `comparisons`, so with fewer
    permutations no difference could ever be marked (250 permutations under Holm over 18 tests: 18 x 2 / 251
    = 0.14). Up to 25 comparisons this leaves every clear difference markable; beyond, N_RESAMPLES caps it."""
    floor = min(N_RESAMPLES, math.ceil(4 * comparisons / ALPHA)) if comparisons > 1 else MIN_RESAMPLES
    return max(MIN_RESAMPLES, min(N_RESAMPLES, WORK // max(1, units)), floor)


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def interval(replicates: Sequence[Sequence[ScoredUnits]], key: str = "score", n_resamples: int | None = None,
             seed: int = SEED) -> Interval | None:
    """The bootstrap CI of the mean over `replicates` (seeds) of the mean over each one's runs (tasks) of
    `key`, every run's units resampled independently; None where it is undefined (a constant score).
    `n_resamples` None: `resamples_for` the largest test set."""
    from scipy.stats import bootstrap

    runs = [units for replicate in replicates for units in replicate]
    n_resamples = n_resamples or resamples_for(max((len(u) for u in runs), default=0))
    shape = [len(replicate) for replicate in replicates]

    def statistic(*indices: np.ndarray) -> float:
        scores, start = [], 0
        for size in shape:
            scores.append(np.mean([runs[start + j].score(indices[start + j], key) for j in range(size)]))
            start += size
        return float(np.mean(scores))

    if any(len(u) < 2 for u in runs):
        return None
    with warnings.catch_warnings():  # a degenerate distribution warns and gives nan: reported as None
        warnings.simplefilter("ignore")
        result = bootstrap(tuple(np.arange(len(u)) for u in runs), statistic, n_resamples=n_resamples,
                           vectorized=False, paired=False, method="percentile", confidence_level=CONFIDENCE,
                           rng=np.random.default_rng(seed))
    low, high = _finite(result.confidence_interval.low), _finite(result.confidence_interval.high)
    return None if low is None or high is None else Interval(low, high, n_resamples)


@dataclass(frozen=True)
class PairedTest:
    difference: float  # mean over seeds of (a - b), on the units both runs scored
    p_value: float
    units: int  # units compared per seed (summed over seeds)
    resamples: int


def _aligned(a: ScoredUnits, b: ScoredUnits) -> tuple[ScoredUnits, ScoredUnits]:
    """The units both runs scored, in one order (the same test examples: same seed and subsample)."""
    by_id = {u.id: u for u in b.units}
    shared = [u for u in a.units if u.id in by_id]
    return ScoredUnits(a.metric, a.metric_args, shared, a.unit_name), \
        ScoredUnits(b.metric, b.metric_args, [by_id[u.id] for u in shared], b.unit_name)


def paired_test(pairs: Sequence[Sequence[tuple[ScoredUnits, ScoredUnits]]], key: str = "score",
                n_resamples: int | None = None, seed: int = SEED, comparisons: int = 1) -> PairedTest | None:
    """The paired permutation test of cell a against cell b: `pairs[s]` holds seed s's (a, b) runs, one pair
    per task. Statistic: mean over seeds of the mean over tasks of score(a) - score(b). None when a run
    shares no unit with its pair, or fewer than two units are shared in all (nothing to permute: a micro
    ranking cell can hold one question). `comparisons`: how many tests one correction covers (resamples_for)."""
    from scipy.stats import permutation_test

    blocks = [_aligned(a, b) for replicate in pairs for a, b in replicate]
    if not blocks or any(len(a) == 0 for a, _ in blocks) or sum(len(a) for a, _ in blocks) < 2:
        return None
    n_resamples = n_resamples or resamples_for(max(len(a) for a, _ in blocks), comparisons)
    pool = blocks[0][0]
    offsets_a, offsets_b, pool_units = [], [], []
    for a, b in blocks:  # every unit of every run in one list: x and y index into it
        offsets_a.append(len(pool_units))
        pool_units += a.units
        offsets_b.append(len(pool_units))
        pool_units += b.units
    pool = ScoredUnits(pool.metric, pool.metric_args, pool_units, pool.unit_name)
    x = np.concatenate([o + np.arange(len(a)) for o, (a, _) in zip(offsets_a, blocks)])
    y = np.concatenate([o + np.arange(len(b)) for o, (_, b) in zip(offsets_b, blocks)])
    slices, start = [], 0
    for a, _ in blocks:
        slices.append(slice(start, start + len(a)))
        start += len(a)
    shape = [len(replicate) for replicate in pairs]

    def statistic(xs: np.ndarray, ys: np.ndarray) -> float:
        differences, k = [], 0
        for size in shape:
            differences.append(np.mean([pool.score(xs[slices[k + j]], key) - pool.score(ys[slices[k + j]], key)
                                        for j in range(size)]))
            k += size
        return float(np.mean(differences))

    result = permutation_test((x, y), statistic, permutation_type="samples", vectorized=False,
                              n_resamples=n_resamples, alternative="two-sided", rng=np.random.default_rng(seed))
    return PairedTest(float(result.statistic), float(min(1.0, result.pvalue)), len(x), n_resamples)


class ResamplingCache:
    """Results in `<folder>/<digest>.json`, the digest of what they were computed from (the runs' ids, the
    metric key, the resampling policy, the kind of result): runs are immutable once FINISHED, so a hit is
    current. With `collect`, a miss is queued (after `prepare`, which reads what the computation needs, runs)
    instead of computed: `run_pending` then computes the queue on the machine's cores (two on the 2-core CI
    machine), each result an independent resampling."""

    def __init__(self, folder: Path | None, collect: bool = False):
        self.folder = Path(folder) if folder is not None else None
        self.collect = collect
        self.memory: dict[str, dict | None] = {}
        self.pending: list[tuple[str, list, Callable[[], dict | None]]] = []
        self.hits = self.misses = 0

    def _path(self, digest: str) -> Path | None:
        return self.folder / f"{digest}.json" if self.folder is not None else None

    def get(self, parts: Sequence, compute: Callable[[], dict | None],
            prepare: Callable[[], object] | None = None) -> dict | None:
        parts = [str(p) for p in parts]
        digest = value_digest(parts, length=24)
        path = self._path(digest)
        if digest in self.memory:
            return self.memory[digest]
        if path is not None and path.is_file():
            self.hits += 1
            self.memory[digest] = json.loads(path.read_text())["value"]
            return self.memory[digest]
        if self.collect:
            if prepare is not None:
                prepare()
            if all(d != digest for d, _, _ in self.pending):
                self.misses += 1
                self.pending.append((digest, parts, compute))
            return None
        self.misses += 1
        return self._store(digest, parts, compute())

    def _store(self, digest: str, parts: list, value: dict | None) -> dict | None:
        self.memory[digest] = value
        path = self._path(digest)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"parts": parts, "value": value}))
            tmp.replace(path)
        return value

    def run_pending(self) -> None:
        """Compute the queued results, in forked worker processes where there are several and the machine
        has several cores (they inherit what `prepare` read), and keep them."""
        global _PENDING
        workers = min(len(self.pending), len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else os.cpu_count() or 1)
        _PENDING = [compute for _, _, compute in self.pending]
        try:
            if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
                pool = multiprocessing.get_context("fork").Pool(workers, initializer=_default_signals)
                try:
                    values = pool.map(_compute, range(len(_PENDING)), chunksize=1)
                    pool.close()  # the workers leave on their own once the queue is empty
                except BaseException:
                    pool.terminate()
                    raise
                finally:
                    pool.join()
            else:
                values = [_compute(i) for i in range(len(_PENDING))]
        finally:
            _PENDING = []
        for (digest, parts, _), value in zip(self.pending, values):
            self._store(digest, parts, value)
        self.pending = []
        self.collect = False


_PENDING: list[Callable[[], dict | None]] = []  # the queue `run_pending` hands to its forked workers


def _default_signals() -> None:
    """A pool worker's SIGINT / SIGTERM: the default (exit), not the handlers the fork copied from the CLI
    (bioablate_core.interrupts). A worker holding those outlived the pool's terminate(), and its join waited forever:
    a `bioablate run` under test hung rendering its table, its one live worker blocked on the task queue."""
    import signal

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def _compute(index: int) -> dict | None:
    return _PENDING[index]()

"""How uncertain a score is, by resampling its scored units (scored_units.py) with the task's own scorer.

- `hierarchical`: the two-level bootstrap of a cell's mean, or a difference, over seeds then test units,
  one draw of unit indices shared by every seed and both cells. It covers both the training randomness
  and the test set. Hand-written, as scipy.stats.bootstrap resamples one level only.
- `paired_test`: the paired permutation test (scipy.stats.permutation_test, "samples") of two cells on the
  same units: a test of these trained models, the seeds held fixed.

`ResamplingCache` keys each result by the runs' ids, the metric and the resamples, so a re-render
recomputes nothing.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ablations.tables.inference import ALPHA
from ablations.tables.scored_units import ScoredUnits
from bioablate_core.fingerprints import digest as value_digest

# Bootstrap resamples and permutations: N_RESAMPLES, or for a test among `comparisons` corrected together
# enough that its smallest p (2 / (n + 1)) survives the correction (resamples_for). A metric with counts
# (scored_units.py) sums count rows per resample, so a table's thousands of resamples cost seconds.
N_RESAMPLES = 1000
POLICY = f"{N_RESAMPLES}/shared-units"  # in the cache keys: another policy computes anew
CONFIDENCE = 0.95
PERMUTATION_BATCH = 256  # permutations scored at once (bounds the index arrays' memory)
SEED = 0  # the resampling is seeded: the same runs give the same interval and p value


def resamples_for(comparisons: int = 1) -> int:
    """Resamples for a test corrected with `comparisons` - 1 others: N_RESAMPLES, or 4 x comparisons / ALPHA
    where more, since the smallest p is 2 / (n + 1) and Holm multiplies it by the family's size."""
    return max(N_RESAMPLES, math.ceil(4 * comparisons / ALPHA))


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


@dataclass(frozen=True)
class Hierarchical:
    """A two-level bootstrap (seeds, then test units) of a cell's mean or of a difference between cells."""

    estimate: float  # mean over seeds of the mean over tasks of score (a - b for a difference), all units
    low: float  # percentile interval, seeds and test units resampled
    high: float
    p_value: float  # two-sided, of a difference against zero (a cell's own is not used)
    sd: float  # standard deviation of the statistic over the resamples (seeds and units)
    unit_sd: float  # standard deviation over resamples of test units alone, the seeds held fixed
    seeds: int
    units: int  # test units shared by every run compared, summed over tasks
    resamples: int


def _shared_positions(runs: Sequence[ScoredUnits]) -> np.ndarray:
    """Per run, the positions in its units of the units every run has, in the first run's order (runs x
    shared): seeds and cells of one task predict the same test set, so every unit is shared."""
    common = set.intersection(*({u.id for u in r.units} for r in runs))
    order = [u.id for u in runs[0].units if u.id in common]
    out = np.empty((len(runs), len(order)), dtype=np.intp)
    for i, run in enumerate(runs):
        where = {u.id: j for j, u in enumerate(run.units)}
        out[i] = [where[unit_id] for unit_id in order]
    return out


_SCORED: dict[tuple, tuple[ScoredUnits, np.ndarray]] = {}  # see _run_scores
_SCORED_LIMIT = 2048


def _run_scores(memo: tuple, run: ScoredUnits, drawn: Callable[[], np.ndarray], key: str) -> np.ndarray:
    """A run's scores on a task's unit draws, kept for this process: the draws follow from the seed, the
    number of resamples and the test-set sizes (`memo`), so the run's interval, its cell's and each
    difference it is in score it once."""
    found = _SCORED.get(memo)
    if found is not None and found[0] is run:
        return found[1]
    if len(_SCORED) >= _SCORED_LIMIT:
        _SCORED.clear()
    scores = run.scores(drawn(), key)
    _SCORED[memo] = (run, scores)
    return scores


def hierarchical(replicates: Sequence[Sequence[Sequence[ScoredUnits]]], key: str = "score",
                 n_resamples: int | None = None, seed: int = SEED, comparisons: int = 1) -> Hierarchical | None:
    """The two-level bootstrap of `replicates[s][t]` (seed s's runs of task t: one for a cell, two for a
    difference a - b) of the mean over seeds of the mean over tasks. The unit draws have their own random
    stream, so k identical seeds give one seed's interval. None where a task shares fewer than two units."""
    k = len(replicates)
    if k == 0 or any(len(tasks) != len(replicates[0]) for tasks in replicates):
        return None
    tasks = len(replicates[0])
    n = n_resamples or resamples_for(comparisons)
    unit_stream, seed_stream = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    positions = []  # per task: (seed, side) x shared units
    for t in range(tasks):
        found = _shared_positions([run for tasks_of in replicates for run in tasks_of[t]])
        if found.shape[1] < 2:
            return None
        positions.append(found)
    draws = [unit_stream.integers(0, p.shape[1], size=(n, p.shape[1]), dtype=np.int32) for p in positions]
    sides = len(replicates[0][0])
    per_seed = np.zeros((k, n))  # resampled statistic of each seed, units drawn
    observed = np.zeros(k)
    for t in range(tasks):
        for s in range(k):
            for side, run in enumerate(replicates[s][t]):
                where = positions[t][s * sides + side]
                sign = 1.0 if side == 0 else -1.0
                memo = (id(run), key, seed, n, tuple(p.shape[1] for p in positions[:t + 1]), where.tobytes())
                per_seed[s] += sign * _run_scores(memo, run, lambda: where[draws[t]], key) / tasks
                observed[s] += sign * run.score(where, key) / tasks
    chosen = seed_stream.integers(0, k, size=(n, k))
    # means taken about the first seed's value: exact where the seeds agree (k copies of x average to x)
    statistic = per_seed[0] + (per_seed[chosen, np.arange(n)[:, None]] - per_seed[0][:, None]).mean(axis=1)
    low, high = np.percentile(statistic, [100 * (1 - CONFIDENCE) / 2, 100 * (1 + CONFIDENCE) / 2])
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    below, above = int(np.sum(statistic <= 0)), int(np.sum(statistic >= 0))
    p = min(1.0, 2 * (1 + min(below, above)) / (n + 1))
    units_only = per_seed[0] + (per_seed - per_seed[0]).mean(axis=0)
    return Hierarchical(float(observed[0] + (observed - observed[0]).mean()), float(low), float(high), p,
                        float(np.std(statistic, ddof=1)),
                        float(np.std(units_only, ddof=1)), k,
                        sum(shared.shape[1] for shared in positions), n)


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
    """The paired permutation test of cell a against b; `pairs[s]` holds seed s's (a, b) runs per task, and
    `comparisons` sizes the resamples (resamples_for). None where fewer than two units are shared."""
    from scipy.stats import permutation_test

    blocks = [_aligned(a, b) for replicate in pairs for a, b in replicate]
    if not blocks or any(len(a) == 0 for a, _ in blocks) or sum(len(a) for a, _ in blocks) < 2:
        return None
    n_resamples = n_resamples or resamples_for(comparisons)
    offsets_a, offsets_b, size = [], [], 0
    for a, b in blocks:  # every unit of every run in one numbering: x and y index into it, pair by pair
        offsets_a.append(size)
        offsets_b.append(size + len(a))
        size += len(a) + len(b)
    pools = [a + b for a, b in blocks]  # a pair's units in that numbering, less its offset
    x = np.concatenate([o + np.arange(len(a)) for o, (a, _) in zip(offsets_a, blocks)])
    y = np.concatenate([o + np.arange(len(b)) for o, (_, b) in zip(offsets_b, blocks)])
    slices, start = [], 0
    for a, _ in blocks:
        slices.append(slice(start, start + len(a)))
        start += len(a)
    shape = [len(replicate) for replicate in pairs]

    def statistic(xs: np.ndarray, ys: np.ndarray, axis: int = -1) -> np.ndarray | float:
        # vectorized: a batch of permutations (rows) at once, each run's units scored by ScoredUnits.scores
        xs2, ys2 = np.atleast_2d(xs), np.atleast_2d(ys)
        out, k = np.zeros(len(xs2)), 0
        for size in shape:
            for j in range(size):
                # a block's indices all fall in its own pair's units: scored on those alone, not the whole pool
                block, start = pools[k + j], offsets_a[k + j]
                out += (block.scores(xs2[:, slices[k + j]] - start, key)
                        - block.scores(ys2[:, slices[k + j]] - start, key)) / size
            k += size
        out /= len(shape)
        return out if np.ndim(xs) > 1 else out[0]

    result = permutation_test((x, y), statistic, permutation_type="samples", vectorized=True, batch=PERMUTATION_BATCH,
                              n_resamples=n_resamples, alternative="two-sided", rng=np.random.default_rng(seed))
    return PairedTest(float(result.statistic), float(min(1.0, result.pvalue)), len(x), n_resamples)


class ResamplingCache:
    """Results in `<folder>/<digest>.json`, keyed by what they came from; FINISHED runs are immutable, so a
    hit is current. With `collect`, a miss is queued (after `prepare`) for `run_pending`."""

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
        """Compute the queue: the first here, timed; the rest in forked workers only where there are cores and
        the work outweighs a fork's cost (POOL_WORTH_S). The workers inherit what `prepare` read."""
        global _PENDING
        _PENDING = [compute for _, _, compute in self.pending]
        try:
            values = []
            if _PENDING:
                started = time.perf_counter()
                values.append(_compute(0))
                left = range(1, len(_PENDING))
                workers = min(len(left), len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                              else os.cpu_count() or 1)
                worth = (time.perf_counter() - started) * len(left) > POOL_WORTH_S
                if worth and workers > 1 and "fork" in multiprocessing.get_all_start_methods():
                    values += _in_workers(workers, left)
                else:
                    values += [_compute(i) for i in left]
        finally:
            _PENDING = []
        for (digest, parts, _), value in zip(self.pending, values):
            self._store(digest, parts, value)
        self.pending = []
        self.collect = False


POOL_WORTH_S = 3.0  # queued work (estimated from the first result) below this is computed in-process


def _in_workers(workers: int, indices: range) -> list[dict | None]:
    """`_compute` of each of `indices`, in a pool of `workers` forked processes, in order."""
    pool = multiprocessing.get_context("fork").Pool(workers, initializer=_default_signals, initargs=(os.getpid(),))
    try:
        values = pool.map(_compute, indices, chunksize=1)
        pool.close()  # the workers leave on their own once the queue is empty
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
    return values


_PENDING: list[Callable[[], dict | None]] = []  # the queue `run_pending` hands to its forked workers


def _default_signals(parent: int) -> None:
    """A pool worker gets the default SIGINT / SIGTERM, not the CLI's handlers the fork copied, which would
    outlive the pool's terminate(); it also gets SIGTERM when `parent` dies (Linux's parent-death signal)."""
    import ctypes
    import signal

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: such a worker still prints its traceback
        return
    if os.getppid() != parent:  # the parent died before the signal was armed
        os.kill(os.getpid(), signal.SIGTERM)


def _compute(index: int) -> dict | None:
    return _PENDING[index]()

"""What a table's cells get from their runs' test predictions: `annotate(data, tracking_uri, cache_dir)`
adds each cell's two-level bootstrap interval (resampling.hierarchical) and, against the baseline, the
difference's interval and corrected p, which decides the mark from MIN_SEEDS seeds on. The fixed-model
permutation test (a family of its own, identical predictions left out) is shown by `--stats` and the CSV,
never as a mark. A run whose predictions cannot be read leaves its cell without a CI, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from ablations.results import BLURB_ROW, CellRun
from ablations.tables.inference import MIN_SEEDS, correct
from ablations.tables.resampling import POLICY, ResamplingCache, hierarchical, paired_test
from ablations.tables.scored_units import NoPredictions, ScoredUnits, load_units, unit_of
from ablations.tables.stats import SCALE, Cell, TableData, assign_states


def metric_key(data: TableData, cell: Cell) -> str:
    """The metric's key a cell shows: the table's metric, or the cell's own on a metric axis."""
    layout = data.layout
    if layout.metrics:
        return cell.row if layout.rows == "metric" else cell.column
    return layout.metric


Units = str | Mapping[str, ScoredUnits]  # a tracking store's URI, or the test units by run id (a table's bundle)


class _Runs:
    """Each run's test units, read from the store (or taken from a bundle's) once, and only when a result is not
    cached."""

    def __init__(self, source: Units):
        self.source = source
        self.loaded: dict[str, ScoredUnits | NoPredictions] = {}
        self.resamples: set[int] = set()  # the resamples the results shown used

    def units(self, run: CellRun) -> ScoredUnits:
        if run.run_id not in self.loaded:
            if not isinstance(self.source, str):
                found = self.source.get(run.run_id)
                self.loaded[run.run_id] = found if found is not None else \
                    NoPredictions(f"the bundle holds no test units of run {run.run_id}")
            else:
                try:
                    self.loaded[run.run_id] = load_units(self.source, run.run_id, run.task)
                except NoPredictions as e:
                    self.loaded[run.run_id] = e
        found = self.loaded[run.run_id]
        if isinstance(found, NoPredictions):
            raise found
        return found


def _scaled(value: dict | None) -> tuple[float, float] | None:
    return None if value is None else (SCALE * value["low"], SCALE * value["high"])


def _resampled(cache: ResamplingCache, runs: _Runs, test: Callable, groups: list[list[tuple[CellRun, ...]]],
               key: str, n: int | None, comparisons: int, fields: dict[str, str]) -> dict | None:
    """`test` (resampling.hierarchical or paired_test) of `groups` (per seed, per task, one run or an (a, b)
    pair), cached by the runs' ids; its result's `fields` (our name -> its attribute) and its resamples."""
    kind = "hierarchical" if test is hierarchical else "paired"
    # the ids as each test's cache entries have always been keyed: groups as lists for one, tuples for the other
    as_id = list if test is hierarchical else tuple
    ids = [[as_id(r.run_id for r in group) for group in replicate] for replicate in groups]

    def compute() -> dict | None:
        found = test([[tuple(runs.units(r) for r in group) for group in replicate] for replicate in groups], key, n,
                     comparisons=comparisons)
        return None if found is None else {name: getattr(found, attr) for name, attr in fields.items()}
    policy = n or (POLICY if comparisons == 1 else f"{POLICY}/{comparisons}")
    found = cache.get([kind, ids, key, policy], compute,
                      lambda: [runs.units(r) for replicate in groups for group in replicate for r in group])
    if found is not None:
        runs.resamples.add(found["resamples"])
    return found


def _bootstrap(cache: ResamplingCache, runs: _Runs, replicates: list[list[tuple[CellRun, ...]]], key: str,
               n: int | None, comparisons: int = 1) -> dict | None:
    """The two-level bootstrap (resampling.hierarchical) of `replicates`, cached."""
    return _resampled(cache, runs, hierarchical, replicates, key, n, comparisons,
                      {"estimate": "estimate", "low": "low", "high": "high", "p": "p_value", "unit_sd": "unit_sd",
                       "units": "units", "resamples": "resamples"})


def _pairs(cell: Cell, base: Cell, seeds: list) -> list[list[tuple[CellRun, CellRun]]]:
    """Per seed, the (cell's, base's) runs of each task both have."""
    out = []
    for seed in seeds:
        theirs = {r.task: r for r in base.runs[seed]}
        out.append([(r, theirs[r.task]) for r in cell.runs[seed] if r.task in theirs])
    return out


def compare(cache: ResamplingCache, runs: _Runs, pairs: list[list[tuple[CellRun, CellRun]]], key: str,
            n: int | None, comparisons: int = 1) -> dict | None:
    """The fixed-model paired permutation test of the runs in `pairs` (per seed, one (a, b) per task),
    cached; `comparisons`: how many tests its correction covers (resampling.resamples_for)."""
    return _resampled(cache, runs, paired_test, pairs, key, n, comparisons,
                      {"difference": "difference", "p": "p_value", "units": "units", "resamples": "resamples"})


def _guarded(what: Callable[[], None], cell: Cell) -> None:
    try:
        what()
    except NoPredictions as e:  # predictions not logged by an older run
        cell.ci_note = f"no test predictions to resample ({e})"


def annotate(data: TableData, tracking_uri: Units, cache_dir: Path | None = None,
             n_resamples: int | None = None) -> TableData:
    """Add the bootstrap intervals and the tests over test units to `data`'s cells (in place; returned): a
    first pass reads what is cached and queues the rest, which is computed on every core, then a second pass
    fills the cells."""
    cache, runs = ResamplingCache(cache_dir, collect=True), _Runs(tracking_uri)
    _fill_cells(data, cache, runs, n_resamples)
    if cache.pending:
        cache.run_pending()
        _fill_cells(data, cache, runs, n_resamples)
    from datamodules.registry import get_dataset

    tasks = {t for _, cells in data.body_rows() for c in cells if c.runs for t in c.tasks}
    shown = sorted(runs.resamples)
    data.resampling = {"n_resamples": "–".join(map(str, shown[::max(1, len(shown) - 1)])) if shown else "no",
                       "units": {t: unit_of(get_dataset(t)) for t in sorted(tasks)},
                       "cached": cache.hits, "computed": cache.misses}
    return data


def family_size(data: TableData) -> int:
    """How many tests one correction can cover in `data` (at most): the cells tested against the baseline,
    or the pairs of the paper's cells (agreement.py), whichever are more. Their resamples are counted from
    it (resampling.resamples_for)."""
    against_baseline = paper_pairs = 0
    for row, cells in data.body_rows():
        if row == BLURB_ROW:
            continue
        against_baseline += sum(1 for c in cells if c.column != data.layout.baseline and c.runs)
        papers = [c.paper for c in cells if c.paper is not None and c.runs]
        paper_pairs += len(papers) * (len(papers) - 1) // 2
    return max(1, against_baseline, paper_pairs)


def _fill_cells(data: TableData, cache: ResamplingCache, runs: _Runs, n_resamples: int | None) -> None:
    baseline = data.layout.baseline
    comparisons = family_size(data)
    runs.resamples.clear()
    for row, cells in data.body_rows():
        if row == BLURB_ROW:  # a score over task types: no resampling unit of its own
            for cell in cells:
                cell.ci_note = "the BLURB score is not resampled"
            continue
        base = next((c for c in cells if c.column == baseline), None)
        for cell in cells:
            key = metric_key(data, cell)
            cell.ci, cell.ci_note, cell.run_cis, cell.seed_tests = None, None, {}, {}
            cell.fixed_diff = cell.fixed_p = cell.fixed_p_corrected = None
            cell.diff_ci = cell.diff_p = cell.diff_p_corrected = cell.diff_unit_sd = None

            def intervals(cell: Cell = cell, key: str = key) -> None:
                if not cell.runs:
                    return
                if all(len(done) == 1 for done in cell.runs.values()):
                    for seed, done in cell.runs.items():
                        cell.run_cis[seed] = _scaled(_bootstrap(cache, runs, [[(r,) for r in done]], key, n_resamples))
                replicates = [[(r,) for r in done] for done in cell.runs.values()]
                cell.ci = _scaled(_bootstrap(cache, runs, replicates, key, n_resamples))
                if cell.ci is None and not cache.collect:
                    cell.ci_note = "the score is constant under resampling"
            _guarded(intervals, cell)
            if base is None or cell is base or not cell.runs:
                continue
            seeds = sorted(set(cell.runs) & set(base.runs))
            if not seeds:
                continue

            def tests(cell: Cell = cell, key: str = key, seeds: list = seeds) -> None:
                pairs = _pairs(cell, base, seeds)
                difference = _bootstrap(cache, runs, pairs, key, n_resamples, comparisons)
                if difference is not None:
                    cell.diff_ci = _scaled(difference)
                    cell.diff_p, cell.diff_unit_sd = difference["p"], SCALE * difference["unit_sd"]
                for seed, replicate in zip(seeds, pairs):
                    found = compare(cache, runs, [replicate], key, n_resamples)
                    if found is not None:
                        cell.seed_tests[seed] = (SCALE * found["difference"], found["p"])
                pooled = compare(cache, runs, pairs, key, n_resamples, comparisons)
                if pooled is not None:
                    cell.fixed_diff, cell.fixed_p = SCALE * pooled["difference"], pooled["p"]
            _guarded(tests, cell)
    assign_states(data)  # with the intervals: a cell whose interval reaches its floor is at floor
    _correct_families(data)


def _correct_families(data: TableData) -> None:
    """The two-level bootstrap's p values of the cells on at least MIN_SEEDS seeds, corrected together (the
    BLURB row, scored from the same runs, is not among them); the fixed-model tests apart, without the
    degenerate ones (p = 1: identical predictions, nothing to permute), which would only dilute them."""
    cells = [c for row, cells in data.body_rows() if row != BLURB_ROW for c in cells]
    for cell in cells:
        cell.diff_p_corrected = cell.fixed_p_corrected = None
    family = [c for c in cells if c.diff_p is not None and not c.n_too_small and c.learned]
    for cell, p in zip(family, correct([c.diff_p for c in family], data.layout.correction)):
        cell.diff_p_corrected = p
    fixed = [c for c in cells if c.fixed_p is not None and c.fixed_p < 1.0 and c.learned]
    for cell, p in zip(fixed, correct([c.fixed_p for c in fixed], data.layout.correction)):
        cell.fixed_p_corrected = p


@dataclass(frozen=True)
class Evidence:
    """What our runs say of the difference a - b between two cells of a row (agreement.py), ×100."""

    method: str  # resampling.hierarchical's ("seeds and test units") or the fixed-model test's
    difference: float
    p_value: float
    low: float | None = None  # the two-level bootstrap's 95% interval (None for the fixed-model test)
    high: float | None = None


SEEDS_AND_UNITS, FIXED_MODELS = "seeds and test units", "fixed models, test units"


def pair_tester(data: TableData, tracking_uri: Units, cache_dir: Path | None = None,
                n_resamples: int | None = None) -> Callable[[Cell, Cell], Evidence | None]:
    """The evidence on any two cells (agreement.py), sharing annotate's cache: the bootstrap from MIN_SEEDS
    shared seeds, else the permutation test; None without a shared seed. Its `cache` collects misses: call,
    run `test.cache.run_pending()`, call again."""
    cache, runs = ResamplingCache(cache_dir, collect=True), _Runs(tracking_uri)
    comparisons = family_size(data)

    def test(a: Cell, b: Cell) -> Evidence | None:
        if a.row == BLURB_ROW:
            return None
        sign = 1.0
        if a.column == data.layout.baseline:  # the order annotate cached it in: (cell, baseline)
            a, b, sign = b, a, -1.0
        seeds = sorted(set(a.runs) & set(b.runs))
        if not seeds:
            return None
        pairs, key = _pairs(a, b, seeds), metric_key(data, a)
        try:
            if len(seeds) >= MIN_SEEDS:
                found = _bootstrap(cache, runs, pairs, key, n_resamples, comparisons)
                if found is None:
                    return None
                low, high = sorted((sign * SCALE * found["low"], sign * SCALE * found["high"]))
                return Evidence(SEEDS_AND_UNITS, sign * SCALE * found["estimate"], found["p"], low, high)
            found = compare(cache, runs, pairs, key, n_resamples, comparisons)
        except NoPredictions:
            return None
        return None if found is None else Evidence(FIXED_MODELS, sign * SCALE * found["difference"], found["p"])
    test.cache = cache  # type: ignore[attr-defined]
    return test

"""The numbers of a table: `table_data(layout, cell_runs)` makes cells of mean ± sd (ddof=1) over seeds,
×100 as the paper reports, the best per row, the per-seed difference to the baseline with a paired t-test
(scipy.stats.ttest_rel, corrected by `layout.correction`; below MIN_SEEDS never marked), the seeds needed
(inference.py) and the BLURB row. A missing run is kept with its reason for the footnotes. What needs test
predictions is added by significance.py.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from ablations.results import BLOCKED, BLURB_ROW, FAILED, FINISHED, NOT_RUN, RUNNING, CellRun, TableLayout
from ablations.tables.inference import ALPHA, MIN_SEEDS, correct, seeds_needed, seeds_needed_range
from bioablate_core.errors import ConfigError
from datamodules.floors import AT_FLOOR, COLLAPSED, LEARNED

SCALE = 100.0  # the paper reports every metric, Pearson included, as a percentage
DIGITS = 2  # decimals of the paper's numbers, which the agreement with it and --stats compare and show
# decimals a table's cells show: every metric is shown ×100 (F1, accuracy, Pearson, MRR), where one decimal
# is a tenth of a point, finer than the seed spreads of these tables; bold goes by the shown means
SHOWN_DIGITS = 1
STATUSES = (FINISHED, FAILED, RUNNING, NOT_RUN, BLOCKED)  # every CellRun.status, in the order tables count them


@dataclass
class Cell:
    """One table cell: per-seed values (×100) and everything shown beside them."""

    row: str
    column: str
    tasks: tuple[str, ...] = ()
    values: dict[int, float] = field(default_factory=dict)  # seed -> value ×100 (mean over the cell's tasks)
    planned_seeds: tuple[int, ...] = ()
    missing: list[CellRun] = field(default_factory=list)  # runs without a value, with their reasons
    paper: float | None = None
    p_value: float | None = None
    untested: str | None = None  # why no significance test was made (None: tested, or the baseline)
    best: bool = False
    mean_override: float | None = None  # the BLURB row: score of the per-task means, not a mean of seeds
    partial: str | None = None  # the BLURB row: which planned tasks it leaves out
    runs: dict = field(default_factory=dict)  # seed (or (seed, fold)) -> its finished runs, one per task
    p_corrected: float | None = None  # p_value corrected across the table (layout.correction)
    n_too_small: bool = False  # tested on fewer than MIN_SEEDS seeds: never shown as significant
    diff_sd: float | None = None  # std (ddof=1) of the per-seed differences to the baseline
    effect: float | None = None  # the difference (x100) seeds_needed is solved for
    seeds_needed: int | None = None
    diff_mean: float | None = None  # mean over common seeds of the per-seed difference to the baseline
    seeds_range: tuple[int, int] | None = None  # seeds_needed over the 95% interval of diff_sd (inference.py)
    # filled by significance.py from the runs' test predictions (x100)
    ci: tuple[float, float] | None = None  # two-level bootstrap 95% interval of the mean over seeds
    ci_note: str | None = None  # why there is none
    run_cis: dict = field(default_factory=dict)  # seed -> bootstrap interval of that run (cells of one task)
    diff_ci: tuple[float, float] | None = None  # two-level bootstrap 95% interval of the difference to the baseline
    diff_p: float | None = None  # its two-sided p value
    diff_p_corrected: float | None = None  # corrected across the table; decides the mark from MIN_SEEDS seeds on
    diff_unit_sd: float | None = None  # the difference's spread over test units alone, the seeds held fixed
    fixed_diff: float | None = None  # fixed models: paired difference on the same test units, pooled over seeds
    fixed_p: float | None = None  # its permutation-test p value
    fixed_p_corrected: float | None = None
    seed_tests: dict = field(default_factory=dict)  # seed -> (difference, p) of the per-seed permutation test
    cost: Any = None  # cost.Cost of the cell's runs (cost.add_costs)
    # what its runs would score had they learned nothing (datamodules.floors), x100; None: a run lacks it
    floor: float | None = None
    floor_kind: str | None = None  # the best trivial baseline ("all positive"; "per task" for several tasks)
    collapsed_seeds: int = 0  # seeds whose runs mostly collapsed (one prediction for every test instance)
    state: str | None = None  # learned / at floor / collapsed (assign_states); None: no floor known

    @property
    def learned(self) -> bool:
        """Not at its floor and not collapsed (or not known to be): the cells a table compares."""
        return self.state not in (AT_FLOOR, COLLAPSED)

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def n_planned(self) -> int:
        return len(self.planned_seeds)

    @property
    def mean(self) -> float | None:
        if self.mean_override is not None:
            return self.mean_override
        return statistics.fmean(self.values.values()) if self.values else None

    @property
    def std(self) -> float | None:
        return statistics.stdev(self.values.values()) if self.n >= 2 else None

    @property
    def significant(self) -> bool:
        """The table's one mark: the variant differs from the baseline, by the test that includes the seeds'
        variance -- the two-level bootstrap of the difference (significance.py) where the runs' predictions
        were resampled, else the paired t-test over seeds -- corrected, on at least MIN_SEEDS seeds."""
        if self.n_too_small or not self.learned:
            return False
        p = self.diff_p_corrected if self.diff_p_corrected is not None else self.p_corrected
        return p is not None and p < ALPHA

    @property
    def mark_test(self) -> str | None:
        """Which test decides `significant` (None: no test)."""
        if self.diff_p_corrected is not None:
            return "two-level bootstrap (seeds, test units)"
        return "paired t-test over seeds" if self.p_corrected is not None else None

    @property
    def fixed_significant(self) -> bool:
        """The fixed-model paired test over test units (pooled over seeds), corrected: these models differ."""
        return self.fixed_p_corrected is not None and self.fixed_p_corrected < ALPHA


@dataclass
class TableData:
    layout: TableLayout
    rows: list[str]
    columns: list[str]
    cells: dict[tuple[str, str], Cell]
    blurb: dict[str, Cell] | None = None  # column -> BLURB score cell
    notes: list[str] = field(default_factory=list)  # general notes (no marker)
    resampling: dict = field(default_factory=dict)  # significance.annotate: resamples, units per task, cache use
    costs: dict = field(default_factory=dict)  # column -> cost.ColumnCost (cost.add_costs)
    agreement: Any = None  # agreement.Agreement with the paper's numbers

    def cell(self, row: str, column: str) -> Cell:
        return self.cells[(row, column)]

    def body_rows(self) -> list[tuple[str, list[Cell]]]:
        out = [(row, [self.cells[(row, c)] for c in self.columns]) for row in self.rows]
        if self.blurb is not None:
            out.append((BLURB_ROW, [self.blurb[c] for c in self.columns]))
        return out

    @property
    def has_paper(self) -> bool:
        return any(cell.paper is not None for _, cells in self.body_rows() for cell in cells)

    def column_label(self, column: str) -> str:
        return self.layout.column_labels.get(column, column)


def _ordered(preferred: Sequence[str], seen: Iterable[str]) -> list[str]:
    """The layout's order first; anything the runs have beyond it after, in order of appearance."""
    out = list(dict.fromkeys(preferred))
    return out + [v for v in dict.fromkeys(seen) if v not in out]


def _paper(layout: TableLayout, row: str, column: str) -> float | None:
    value = layout.paper.get(row, {}).get(column)
    return None if value is None else float(value)


def _replicate(run: CellRun, single_task: bool) -> int | tuple[int, int]:
    """What a cell's mean and ± run over: its seeds, or, for one cross-validated task, its (seed, fold)
    pairs (so the ± is over folds and seeds, and a paired test pairs equal folds and seeds)."""
    return run.seed if run.fold is None or not single_task else (run.seed, run.fold)


def _mean_of(done: list[CellRun], attribute: str = "value") -> float:
    """The mean over tasks of the runs' `attribute`; a cross-validated task in a cell of several tasks counts by
    its folds' mean."""
    if all(r.fold is None for r in done):
        return statistics.fmean(getattr(r, attribute) for r in done)
    by_task: dict[str, list[float]] = {}
    for r in done:
        by_task.setdefault(r.task, []).append(getattr(r, attribute))
    return statistics.fmean(statistics.fmean(values) for values in by_task.values())


def _fill_floor(cell: Cell) -> None:
    """The cell's floor: per seed the mean over its tasks of the runs' floors (what the cell's value would be
    had every run learned nothing), averaged over seeds; a seed is collapsed where most of its runs are."""
    done = [r for runs in cell.runs.values() for r in runs]
    if not done or any(r.floor is None for r in done):
        return
    cell.floor = statistics.fmean(SCALE * _mean_of(runs, "floor") for runs in cell.runs.values())
    kinds = {r.floor_kind for r in done}
    cell.floor_kind = kinds.pop() if len(kinds) == 1 else "per task"
    cell.collapsed_seeds = sum(2 * sum(r.state == COLLAPSED for r in runs) > len(runs) for runs in cell.runs.values())


def _fill(cell: Cell, runs: list[CellRun]) -> None:
    """Per seed, the mean over the cell's tasks (one task for a task row) when all of them finished; per
    (seed, fold) for a task with folds alone in its cell."""
    cell.tasks = tuple(dict.fromkeys(r.task for r in runs))
    by_seed: dict[int | tuple[int, int], list[CellRun]] = {}
    for run in runs:
        by_seed.setdefault(_replicate(run, len(cell.tasks) == 1), []).append(run)
    cell.planned_seeds = tuple(sorted(by_seed))
    for seed in cell.planned_seeds:
        seed_runs = by_seed[seed]
        done = [r for r in seed_runs if r.status == FINISHED and r.value is not None]
        cell.missing += [r for r in seed_runs if not (r.status == FINISHED and r.value is not None)]
        if done and {r.task for r in done} == set(cell.tasks):
            cell.values[seed] = SCALE * _mean_of(done)
            cell.runs[seed] = done
    _fill_floor(cell)


def _paired_test(cell: Cell, base: Cell) -> None:
    from scipy.stats import ttest_rel

    seeds = sorted(set(cell.values) & set(base.values))
    cell.n_too_small = len(seeds) < MIN_SEEDS
    if seeds:
        cell.diff_mean = statistics.fmean(cell.values[s] - base.values[s] for s in seeds)
    if len(seeds) < 2:
        cell.untested = "fewer than 2 seeds finished in both this cell and the baseline"
        return
    ours, theirs = [cell.values[s] for s in seeds], [base.values[s] for s in seeds]
    differences = [a - b for a, b in zip(ours, theirs)]
    cell.diff_mean, cell.diff_sd = statistics.fmean(differences), statistics.stdev(differences)
    if max(differences) == min(differences):  # t is undefined (0/0) or infinite: no meaningful p
        cell.untested = "identical differences to the baseline on every seed"
        return
    p = float(ttest_rel(ours, theirs).pvalue)
    if math.isnan(p):
        cell.untested = "the paired t-test is undefined for these values"
    else:
        cell.p_value = p


def _seeds_needed(layout: TableLayout, cell: Cell, base: Cell) -> None:
    """Seeds to detect `layout.effect`, else the paper's difference to the baseline, given this cell's spread."""
    if layout.effect is not None:
        cell.effect = float(layout.effect)
    elif cell.paper is not None and base.paper is not None:
        cell.effect = cell.paper - base.paper
    if cell.effect is not None and cell.diff_sd is not None:
        cell.seeds_needed = seeds_needed(cell.effect, cell.diff_sd)
        cell.seeds_range = seeds_needed_range(cell.effect, cell.diff_sd, len(set(cell.values) & set(base.values)) - 1)


def _correct(data: TableData) -> None:
    """Correct the seed-level p values of the table's tested cells (those on at least MIN_SEEDS seeds)
    together; the BLURB row's apart (a score of the same runs: it would count their evidence twice)."""
    for _, cells in data.body_rows():
        for cell in cells:
            cell.p_corrected = None
    tested = [(row, c) for row, cells in data.body_rows() for c in cells
              if c.p_value is not None and not c.n_too_small and c.learned]
    for family in ([c for row, c in tested if row != BLURB_ROW], [c for row, c in tested if row == BLURB_ROW]):
        for cell, p in zip(family, correct([c.p_value for c in family], data.layout.correction)):
            cell.p_corrected = p


def _blurb_cells(layout: TableLayout, runs: list[CellRun], columns: list[str]) -> dict[str, Cell]:
    """The BLURB score per column: the mean within each task type of the per-task means over seeds, then
    the mean over types (datamodules.metrics.blurb_score). Its ± and significance use the per-seed
    BLURB score over the seeds on which every task of the column finished."""
    from datamodules.metrics import blurb_score
    from datamodules.registry import get_dataset

    out = {}
    for column in columns:
        col_runs = [r for r in runs if r.column == column]
        tasks = list(dict.fromkeys(r.task for r in col_runs))
        types = {t: get_dataset(t).task_type for t in tasks}
        per_task: dict[str, dict[int, float]] = {t: {} for t in tasks}
        for r in col_runs:
            if r.status == FINISHED and r.value is not None:
                per_task[r.task][_replicate(r, True)] = SCALE * r.value
        cell = Cell(BLURB_ROW, column, tuple(tasks), planned_seeds=tuple(sorted({r.seed for r in col_runs})),
                    paper=_paper(layout, BLURB_ROW, column))
        means = {t: statistics.fmean(v.values()) for t, v in per_task.items() if v}
        if means:
            cell.mean_override = blurb_score(means, types)["score"]
            left_out = [t for t in tasks if t not in means]
            if left_out:
                cell.partial = f"{len(means)}/{len(tasks)} tasks (no finished run: {', '.join(left_out)})"
        complete_seeds = set(cell.planned_seeds)
        for values in per_task.values():
            complete_seeds &= set(values)
        for seed in sorted(complete_seeds):
            cell.values[seed] = blurb_score({t: v[seed] for t, v in per_task.items()}, types)["score"]
        floors = {r.task: SCALE * r.floor for r in col_runs if r.status == FINISHED and r.floor is not None}
        if means and set(floors) == set(means):  # the BLURB score of the tasks' floors
            cell.floor, cell.floor_kind = blurb_score(floors, types)["score"], "per task"
        if not means:
            cell.missing = [r for r in col_runs if r.status != FINISHED or r.value is None]
        out[column] = cell
    return out


def assign_states(data: TableData) -> None:
    """Each cell's state against its floor, then what depends on it: a cell is collapsed where most of its
    seeds are, at floor where its interval (its mean, without one) does not clear the floor, else learned.
    Only learned cells are corrected together, marked, bold, and given the seeds a test would need."""
    for _, cells in data.body_rows():
        for cell in cells:
            cell.state = None
            if cell.mean is None or cell.floor is None:
                continue
            low = cell.ci[0] if cell.ci is not None else cell.mean
            cell.state = COLLAPSED if 2 * cell.collapsed_seeds > cell.n else AT_FLOOR if low <= cell.floor else LEARNED
    _correct(data)
    layout, baseline = data.layout, data.layout.baseline
    for _, cells in data.body_rows():
        base = next((c for c in cells if c.column == baseline), None)
        for cell in cells:
            if not cell.learned or (base is not None and not base.learned):
                cell.seeds_needed = cell.seeds_range = None
    # Bold the best of the alternatives compared: along each row, or down each column when the columns
    # are tasks (Table 14: variants as rows; numbers of different tasks are not comparable).
    lines = ([[data.cells[(r, c)] for r in data.rows] for c in data.columns] if layout.columns in ("task", "metric")
             and layout.rows != "task" else [row_cells for _, row_cells in data.body_rows()])
    for line in lines:
        # a BLURB score over fewer tasks is not comparable; a lone number is not "best" of anything; a cell
        # that did not learn is best of nothing
        comparable = [c for c in line if c.mean is not None and c.partial is None and c.learned]
        shown = [round(c.mean, SHOWN_DIGITS) for c in comparable]
        for cell in line:
            cell.best = len(shown) >= 2 and any(cell is c for c in comparable) and \
                round(cell.mean, SHOWN_DIGITS) == max(shown)


def table_data(layout: TableLayout, runs: Sequence[CellRun]) -> TableData:
    """The table's numbers: cells, best per row, paired tests against the baseline, the BLURB row."""
    runs = list(runs)
    for run in runs:
        if run.status not in STATUSES:
            raise ValueError(f"cell run {run.row}/{run.column} seed {run.seed}: unknown status {run.status!r}")
    rows = _ordered(layout.row_order, (r.row for r in runs))
    columns = _ordered(layout.column_order, (r.column for r in runs))
    if layout.baseline is not None and layout.baseline not in columns:
        raise ConfigError(f"table baseline '{layout.baseline}' is not one of the table's columns "
                          f"({', '.join(columns)}); set table.baseline to one of them")
    grouped: dict[tuple[str, str], list[CellRun]] = {}
    for run in runs:
        grouped.setdefault((run.row, run.column), []).append(run)
    cells = {}
    for row in rows:
        for column in columns:
            cell = Cell(row, column, paper=_paper(layout, row, column))
            _fill(cell, grouped.get((row, column), []))
            cells[(row, column)] = cell
    data = TableData(layout, rows, columns, cells)
    if layout.blurb_row:
        if layout.rows != "task":
            raise ConfigError(f"table.blurb_row needs `rows: task` (this table's rows are '{layout.rows}')")
        data.blurb = _blurb_cells(layout, runs, columns)

    for row, row_cells in data.body_rows():
        if layout.baseline is not None:
            base = row_cells[columns.index(layout.baseline)]
            for cell in row_cells:
                if cell is not base and cell.mean is not None:
                    _paired_test(cell, base)
                    _seeds_needed(layout, cell, base)
    assign_states(data)

    folded = sorted({(r.task, r.fold) for r in runs if r.fold is not None})
    for task in dict.fromkeys(t for t, _ in folded):
        data.notes.append(f"Task '{task}' is cross-validated: each seed runs {sum(t == task for t, _ in folded)} "
                          "folds; its cells give the mean ± sd over its fold runs (folds × seeds).")
    for row in rows:  # several tasks under one row label (not a row of tasks-as-columns)
        tasks = {t for c in columns if len(cells[(row, c)].tasks) > 1 for t in cells[(row, c)].tasks}
        if tasks:
            data.notes.append(f"Row '{row}' combines {len(tasks)} tasks ({', '.join(sorted(tasks))}): per seed, "
                              "the mean over them.")
    return data


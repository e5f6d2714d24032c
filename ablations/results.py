"""The contract between the experiment planner (ablations/experiment/), which knows which runs make up
each table cell, and the table renderer (ablations/tables/), which turns them into the paper's layout.

`ablations.experiment.collect(experiment, tracking_uri)` returns one `CellRun` per planned (row, column,
task, seed) run -- found in the tracking store by fingerprint, or marked missing with the reason -- and
`ablations.tables.render(layout, cell_runs, fmt)` renders them. Neither side needs the other's internals.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The status of a planned run (CellRun.status, and ablations.experiment's PlannedRun.status)
FINISHED = "FINISHED"  # value is the run's test metric
FAILED = "FAILED"      # the run raised; reason holds the error
RUNNING = "RUNNING"    # started and not finished (in progress, or killed: rerun the experiment)
NOT_RUN = "NOT_RUN"    # never started: run the experiment
BLOCKED = "BLOCKED"    # cannot be identified yet, e.g. its pretraining stage has not finished
# What one `bioablate run` did with a planned run (ablations/experiment/runner.py): computed it, reused a FINISHED
# one, or it ended FAILED / BLOCKED
COMPUTED = "COMPUTED"
REUSED = "REUSED"
HELD = "HELD"  # another live process holds it and the invocation said --no-wait: left to that process

# The multiple-comparison corrections a table may use (`table.correction`, `--correction`): statsmodels'
# `multipletests` method -> the name its footnote gives
CORRECTIONS = {"holm": "Holm", "bonferroni": "Bonferroni", "holm-sidak": "Holm-Šidák", "sidak": "Šidák",
               "hommel": "Hommel", "simes-hochberg": "Simes-Hochberg", "fdr_bh": "Benjamini-Hochberg FDR",
               "fdr_by": "Benjamini-Yekutieli FDR", "none": "no"}

BLURB_ROW = "BLURB score"  # the BLURB score row of a table; also its key in the paper's numbers (table.paper)


@dataclass(frozen=True)
class TableLayout:
    """How an experiment's runs are laid out as a table (the experiment YAML's `table:` section)."""

    title: str
    rows: str                      # axis whose values are the rows: "task", "model", or a `vary` axis name
    columns: str                   # axis whose values are the columns
    metric: str = "score"          # test metric (the task's own metric when "score")
    baseline: str | None = None    # column that the others are tested against (paired over seeds)
    row_order: tuple[str, ...] = ()
    column_order: tuple[str, ...] = ()
    column_labels: dict[str, str] = field(default_factory=dict)  # column value -> header shown
    paper: dict[str, dict[str, float]] = field(default_factory=dict)  # paper[row][column], as reported
    blurb_row: bool = False        # add the BLURB score row (rows must be tasks)
    caption: str = ""              # the experiment's text under the title (for this profile)
    setup: str = ""                # what the runs were, written from their resolved configs (tables/report.py)
    metrics: tuple[str, ...] = ()  # the `metric` axis's values (rows or columns), each a test metric
    paper_source: str = "Gu et al."  # who reported the `paper` numbers (named in the table's notes)
    correction: str = "holm"       # multiple-comparison correction of the table's tests (statsmodels' method name)
    effect: float | None = None    # difference (x100) the seeds needed are solved for; None: the paper's
    cost: bool = False             # show each column's compute beside its scores
    paper_std: dict[str, dict[str, float]] = field(default_factory=dict)  # the paper's reported std, where given
    paper_noise: float = 0.5       # a paper gap (x100) at or below this is a tie, where it gives no std (agreement.py)
    differences: bool = False      # show each cell's difference to the baseline with its interval (not only in the CSV)
    paper_scale: bool = False      # the runs are at the paper's scale (profile base): its seed spreads are
                                   # the paper's models'


@dataclass
class CellRun:
    """One run of one table cell: a (row, column) pair, on a task, with a seed."""

    row: str
    column: str
    task: str
    seed: int
    status: str
    value: float | None = None     # test metric in [0, 1] (Pearson in [-1, 1]) when FINISHED
    reason: str | None = None      # why it is missing (status other than FINISHED)
    run_id: str | None = None
    fingerprint: str | None = None
    wall_time_s: float | None = None
    fold: int | None = None        # the fold (1-based) of a cross-validated task; None: the task has no folds
    compute: dict[str, float | str] = field(default_factory=dict)  # the run's `system/compute/*` metrics and device
    floor: float | None = None     # the best trivial baseline's test score, in `value`'s units (metric test/floor)
    floor_kind: str | None = None  # what that baseline predicts ("all positive", "all O"; tag test_floor_kind)
    state: str | None = None       # learned / at floor / collapsed (tag test_state); None: not recorded

    @property
    def seed_label(self) -> str:
        """The seed as a table's notes name it: `3`, or `3 fold 2` for one fold of a cross-validated task."""
        return f"{self.seed}" if self.fold is None else f"{self.seed} fold {self.fold}"

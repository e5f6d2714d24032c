"""Paper-style tables from an experiment's runs: `render(layout, cell_runs, fmt)` for markdown, LaTeX or
CSV, `plot(...)` for a grouped bar chart, and `render_experiment(...)`, which collects an experiment's runs
from the tracking store (ablations/experiment.py), writes table.md / .tex / .csv / .png and logs them to one
MLflow run per experiment (tagged `kind=table`).

Every cell is the mean ± sample standard deviation (ddof=1) over seeds of the runs' test metric, ×100 as
the paper reports it (BIOSSES' Pearson too), with the number of seeds; the best mean of each row is bold
(of each column when the columns are tasks);
a cell differing from the baseline column at p < 0.05 in a two-sided paired t-test over seeds
(scipy.stats.ttest_rel) gets a dagger; the paper's number is shown beside ours. A cell or seed without a
finished run is never dropped: it is shown as missing, with a footnote giving the reason.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from ablations.hardware import machine
from ablations.results import BLOCKED, FAILED, FINISHED, NOT_RUN, RUNNING, CellRun, TableLayout
from core.errors import ConfigError, UnknownNameError

FORMATS = ("markdown", "latex", "csv")
FILE_SUFFIX = {"markdown": "md", "latex": "tex", "csv": "csv"}
SCALE = 100.0  # the paper reports every metric, Pearson included, as a percentage
ALPHA = 0.05  # significance threshold of the paired t-test
DIGITS = 2  # decimals shown, as in the paper's tables
BLURB_ROW = "BLURB score"
TABLE_KIND = "table"  # `kind` tag of the MLflow run holding an experiment's rendered table
TABLE_MLFLOW_EXPERIMENT = "tables"
DAGGER = "†"

_STATUS_WORDS = {FAILED: "failed", NOT_RUN: "not run", RUNNING: "running", BLOCKED: "blocked",
                 FINISHED: "no value"}
_DEFAULT_REASONS = {
    FAILED: "the run raised an error (none recorded)",
    NOT_RUN: "never started: run the experiment",
    RUNNING: "started but not finished (still running, or killed: rerun the experiment)",
    BLOCKED: "cannot be identified yet (an earlier stage, e.g. pretraining, has not finished)",
    FINISHED: "finished without the table's test metric",
}


# ---------------------------------------------------------------------------------------------------
# the numbers


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
        return self.p_value is not None and self.p_value < ALPHA


@dataclass
class TableData:
    layout: TableLayout
    rows: list[str]
    columns: list[str]
    cells: dict[tuple[str, str], Cell]
    blurb: dict[str, Cell] | None = None  # column -> BLURB score cell
    notes: list[str] = field(default_factory=list)  # general notes (no marker)

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


def _fill(cell: Cell, runs: list[CellRun]) -> None:
    """Per seed, the mean over the cell's tasks (one task for a task row) when all of them finished."""
    cell.tasks = tuple(dict.fromkeys(r.task for r in runs))
    by_seed: dict[int, list[CellRun]] = {}
    for run in runs:
        by_seed.setdefault(run.seed, []).append(run)
    cell.planned_seeds = tuple(sorted(by_seed))
    for seed in cell.planned_seeds:
        seed_runs = by_seed[seed]
        done = [r for r in seed_runs if r.status == FINISHED and r.value is not None]
        cell.missing += [r for r in seed_runs if not (r.status == FINISHED and r.value is not None)]
        if done and {r.task for r in done} == set(cell.tasks):
            cell.values[seed] = SCALE * statistics.fmean(r.value for r in done)


def _paired_test(cell: Cell, base: Cell) -> None:
    from scipy.stats import ttest_rel

    seeds = sorted(set(cell.values) & set(base.values))
    if len(seeds) < 2:
        cell.untested = "fewer than 2 seeds finished in both this cell and the baseline"
        return
    ours, theirs = [cell.values[s] for s in seeds], [base.values[s] for s in seeds]
    differences = [a - b for a, b in zip(ours, theirs)]
    if max(differences) == min(differences):  # t is undefined (0/0) or infinite: no meaningful p
        cell.untested = "identical differences to the baseline on every seed"
        return
    p = float(ttest_rel(ours, theirs).pvalue)
    if math.isnan(p):
        cell.untested = "the paired t-test is undefined for these values"
    else:
        cell.p_value = p


def _blurb_cells(layout: TableLayout, runs: list[CellRun], columns: list[str]) -> dict[str, Cell]:
    """The BLURB score per column: the mean within each task type of the per-task means over seeds, then
    the mean over types (lightning_modules.metrics.blurb_score). Its ± and significance use the per-seed
    BLURB score over the seeds on which every task of the column finished."""
    from datamodules.registry import get_dataset
    from lightning_modules.metrics import blurb_score

    out = {}
    for column in columns:
        col_runs = [r for r in runs if r.column == column]
        tasks = list(dict.fromkeys(r.task for r in col_runs))
        types = {t: get_dataset(t).task_type for t in tasks}
        per_task: dict[str, dict[int, float]] = {t: {} for t in tasks}
        for r in col_runs:
            if r.status == FINISHED and r.value is not None:
                per_task[r.task][r.seed] = SCALE * r.value
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
        if not means:
            cell.missing = [r for r in col_runs if r.status != FINISHED or r.value is None]
        out[column] = cell
    return out


def summarize(layout: TableLayout, runs: Sequence[CellRun]) -> TableData:
    """The table's numbers: cells, best per row, paired tests against the baseline, the BLURB row."""
    runs = list(runs)
    statuses = {FINISHED, FAILED, RUNNING, NOT_RUN, BLOCKED}
    for run in runs:
        if run.status not in statuses:
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
    # Bold the best of the alternatives compared: along each row, or down each column when the columns
    # are tasks (Table 14: variants as rows; numbers of different tasks are not comparable).
    lines = ([[data.cells[(r, c)] for r in rows] for c in columns] if layout.columns == "task" and
             layout.rows != "task" else [row_cells for _, row_cells in data.body_rows()])
    for line in lines:
        # a BLURB score over fewer tasks is not comparable; a lone number is not "best" of anything
        comparable = [c for c in line if c.mean is not None and c.partial is None]
        shown = [round(c.mean, DIGITS) for c in comparable]
        if len(shown) >= 2:
            for cell in comparable:
                cell.best = round(cell.mean, DIGITS) == max(shown)

    for row in rows:  # several tasks under one row label (not a row of tasks-as-columns)
        tasks = {t for c in columns if len(cells[(row, c)].tasks) > 1 for t in cells[(row, c)].tasks}
        if tasks:
            data.notes.append(f"Row '{row}' combines {len(tasks)} tasks ({', '.join(sorted(tasks))}): per seed, "
                              "the mean over them.")
    return data


# ---------------------------------------------------------------------------------------------------
# rendering


class _Footnotes:
    """Numbered footnotes, one per distinct text, in order of first use."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def mark(self, text: str) -> int:
        if text not in self.texts:
            self.texts.append(text)
        return self.texts.index(text) + 1


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _missing_marks(cell: Cell, notes: _Footnotes) -> list[tuple[str, int]]:
    """(status word, footnote number) per distinct reason of the cell's missing runs."""
    if not cell.planned_seeds and cell.mean is None:
        return [("no runs", notes.mark("No run of this cell is in the experiment's plan."))]
    out = []
    for run in cell.missing:
        reason = _one_line(run.reason or _DEFAULT_REASONS[run.status])
        entry = (_STATUS_WORDS[run.status], notes.mark(f"{run.status}: {reason}"))
        if entry not in out:
            out.append(entry)
    return out


@dataclass
class _Shown:
    """A cell's parts as text, shared by the markdown and LaTeX writers."""

    mean: str | None
    std: str | None
    dagger: bool
    best: bool
    count: str | None  # "n=5", "n=1/2"
    missing: list[tuple[str, int]]  # (status word, footnote)
    marks: list[int]  # other footnotes (untested, partial BLURB)
    paper: str | None


def _fmt(value: float | None) -> str | None:
    return None if value is None else f"{value:.{DIGITS}f}"


def _general_notes(data: TableData, footnotes: _Footnotes) -> tuple[list[str], dict[tuple[str, str], _Shown]]:
    layout = data.layout
    metric = "score (each task's primary metric)" if layout.metric == "score" else f"'{layout.metric}'"
    notes = [f"Each cell: mean ± sample standard deviation (ddof=1) over seeds of the test {metric} ×100 "
             "(Pearson for BIOSSES too), n = seeds with a finished run (n=k/m: k of m planned seeds). "
             + ("Best mean per column (task) in bold." if layout.columns == "task" and layout.rows != "task"
                else "Best mean per row in bold.")]
    if data.has_paper:
        notes.append("'paper': the number reported by Gu et al. for the same cell.")
    untested = {c.untested for _, cells in data.body_rows() for c in cells if c.untested}
    per_cell_untested = len(untested) > 1 or any(
        c.p_value is not None for _, cells in data.body_rows() for c in cells)
    if layout.baseline is not None:
        notes.append(f"{DAGGER} p < {ALPHA} against the baseline column "
                     f"'{data.column_label(layout.baseline)}': two-sided paired t-test over the seeds finished "
                     "in both cells (scipy.stats.ttest_rel); p values are in the CSV.")
        if untested and not per_cell_untested:
            notes.append(f"No cell was tested against the baseline: {untested.pop()}.")
    if data.blurb is not None:
        notes.append(f"{BLURB_ROW}: mean over task types of the mean over each type's tasks of the per-task "
                     "means (lightning_modules.metrics.blurb_score); its ± and test use the per-seed BLURB "
                     "score over the seeds on which every task of the column finished.")
    notes += data.notes

    shown = {}
    for row, cells in data.body_rows():
        for cell in cells:
            marks = []
            if cell.untested and per_cell_untested:
                marks.append(footnotes.mark(f"No significance test: {cell.untested}."))
            if cell.partial:
                marks.append(footnotes.mark(f"BLURB score over {cell.partial}."))
            count = None
            if cell.mean is not None and cell.mean_override is None:
                count = f"n={cell.n}" if cell.n == cell.n_planned else f"n={cell.n}/{cell.n_planned}"
            elif cell.mean_override is not None:
                count = f"n={cell.n}" if cell.n else None
            shown[(row, cell.column)] = _Shown(_fmt(cell.mean), _fmt(cell.std), cell.significant, cell.best,
                                               count, _missing_marks(cell, footnotes), marks, _fmt(cell.paper))
    return notes, shown


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|")


def _markdown(data: TableData) -> str:
    footnotes = _Footnotes()
    notes, shown = _general_notes(data, footnotes)
    layout = data.layout
    lines = [f"**{_md_escape(layout.title)}**", ""]
    if layout.caption:
        lines += [_md_escape(_one_line(layout.caption, 2000)), ""]
    header = [layout.rows] + [_md_escape(data.column_label(c)) for c in data.columns]
    lines += ["| " + " | ".join(header) + " |", "|---|" + "---:|" * len(data.columns)]
    for row, cells in data.body_rows():
        texts = []
        for cell in cells:
            s = shown[(row, cell.column)]
            extras = [s.count] if s.count else []
            if s.mean is None:
                text = "—"
                extras = [", ".join(f"{word} [{n}]" for word, n in s.missing)] if s.missing else []
            else:
                text = s.mean + (f" ± {s.std}" if s.std else "")
                text = (f"**{text}**" if s.best else text) + (DAGGER if s.dagger else "")
            if s.paper is not None:
                extras.append(f"paper {s.paper}")
            text += f" ({'; '.join(extras)})" if extras else ""
            marks = ([n for _, n in s.missing] if s.mean is not None else []) + s.marks
            text += "".join(f" [{n}]" for n in marks)
            texts.append(_md_escape(text))
        label = f"**{BLURB_ROW}**" if row == BLURB_ROW else _md_escape(row)
        lines.append("| " + " | ".join([label] + texts) + " |")
    lines.append("")
    # one paragraph per note: consecutive markdown lines would be joined into one
    for note in notes + [f"[{i}] {t}" for i, t in enumerate(footnotes.texts, 1)]:
        lines += [_md_escape(note), ""]
    return "\n".join(lines).rstrip() + "\n"


_LATEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                   "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                   "±": r"$\pm$", "†": r"$^\dagger$", "—": "---", "…": r"\ldots{}", "×": r"$\times$",
                   "≥": r"$\geq$", "✓": r"\checkmark{}", "<": r"$<$", ">": r"$>$"}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIALS.get(ch, ch) for ch in str(text))


def _latex(data: TableData) -> str:
    footnotes = _Footnotes()
    notes, shown = _general_notes(data, footnotes)
    layout = data.layout
    paper = data.has_paper
    per_col = 2 if paper else 1
    spec = "l" + ("rr" if paper else "r") * len(data.columns)
    caption = latex_escape(layout.title) + (f". {latex_escape(_one_line(layout.caption, 2000))}"
                                            if layout.caption else "")
    lines = [r"\begin{table}[t]", r"\centering", rf"\caption{{{caption}}}", rf"\begin{{tabular}}{{{spec}}}",
             r"\hline"]
    heads = [rf"\multicolumn{{{per_col}}}{{c}}{{{latex_escape(data.column_label(c))}}}" if paper
             else latex_escape(data.column_label(c)) for c in data.columns]
    lines.append(" & ".join([latex_escape(layout.rows)] + heads) + r" \\")
    if paper:
        lines.append(" & ".join([""] + ["ours & paper"] * len(data.columns)) + r" \\")
    lines.append(r"\hline")

    def sup(numbers: list[int]) -> str:
        return rf"\textsuperscript{{{','.join(map(str, numbers))}}}" if numbers else ""

    for row, cells in data.body_rows():
        if row == BLURB_ROW:
            lines.append(r"\hline")
        parts = [latex_escape(row)]
        for cell in cells:
            s = shown[(row, cell.column)]
            if s.mean is None:
                text = "---"
                if s.missing:
                    text += " {\\scriptsize " + ", ".join(latex_escape(w) for w, _ in s.missing) + "}"
                text += sup([n for _, n in s.missing] + s.marks)
            else:
                number = s.mean + (rf" $\pm$ {s.std}" if s.std else "")
                text = (rf"\textbf{{{number}}}" if s.best else number) + (r"$^\dagger$" if s.dagger else "")
                if s.count:
                    text += rf" {{\scriptsize {s.count}}}"
                text += sup([n for _, n in s.missing] + s.marks)
            parts.append(text)
            if paper:
                parts.append(s.paper or "")
        lines.append(" & ".join(parts) + r" \\")
    lines += [r"\hline", r"\end{tabular}", r"\par\smallskip", r"\begin{minipage}{\linewidth}\footnotesize"]
    lines += [latex_escape(n) + r"\\" for n in notes]
    lines += [rf"\textsuperscript{{{i}}} {latex_escape(t)}\\" for i, t in enumerate(footnotes.texts, 1)]
    lines += [r"\end{minipage}", r"\end{table}"]
    return "\n".join(lines) + "\n"


CSV_FIELDS = ("row", "column", "tasks", "metric", "mean", "std", "n", "n_planned", "p_value", "significant",
              "best", "paper", "missing")


def _number(value: float | None) -> str:
    return "" if value is None else repr(round(float(value), 6))


def _csv(data: TableData) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    metric = f"{data.layout.metric} x100"
    for row, cells in data.body_rows():
        for cell in cells:
            seeds_by_reason: dict[str, list[str]] = {}
            for r in cell.missing:
                reason = f"{r.status}: {_one_line(r.reason or _DEFAULT_REASONS[r.status])}"
                seeds_by_reason.setdefault(reason, []).append(
                    f"{r.seed}" + (f" ({r.task})" if len(cell.tasks) > 1 else ""))
            missing = "; ".join(f"seed(s) {', '.join(seeds)} {reason}"
                                for reason, seeds in seeds_by_reason.items())
            if cell.partial:
                missing = "; ".join(filter(None, [missing, f"BLURB over {cell.partial}"]))
            writer.writerow([row, cell.column, " ".join(cell.tasks), metric, _number(cell.mean),
                             _number(cell.std), cell.n, cell.n_planned, _number(cell.p_value),
                             "" if cell.p_value is None else str(cell.significant).lower(),
                             str(cell.best).lower(), _number(cell.paper), missing])
    return out.getvalue()


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise UnknownNameError("table format", fmt, FORMATS)


def render_data(data: TableData, fmt: str = "markdown") -> str:
    _check_format(fmt)
    return {"markdown": _markdown, "latex": _latex, "csv": _csv}[fmt](data)


def render(layout: TableLayout, runs: Sequence[CellRun], fmt: str = "markdown") -> str:
    """The table of `runs` laid out by `layout`, as markdown, latex or csv."""
    _check_format(fmt)
    return render_data(summarize(layout, runs), fmt)


# ---------------------------------------------------------------------------------------------------
# the plot


def bar_figure(data: TableData, ylabel: str | None = None):
    """Grouped bars, one group per row (the BLURB row included), one bar per column, std as error bars.
    Missing cells get no bar and an 'x' on the axis. Uses matplotlib's object API (Agg canvas) so it
    neither needs a display nor changes pyplot's backend in a notebook."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    groups = data.body_rows()
    n_cols = len(data.columns)
    width = 0.8 / max(n_cols, 1)
    fig = Figure(figsize=(min(16.0, max(6.0, 0.3 * len(groups) * max(n_cols, 1) + 2)), 4.5),
                 layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    values = [v for _, cells in groups for c in cells for v in (c.mean, c.paper) if v is not None]
    labelled = {"missing": False, "paper": False}
    for j, column in enumerate(data.columns):
        xs, heights, errors, missing_xs, paper_xs, papers = [], [], [], [], [], []
        for i, (_, cells) in enumerate(groups):
            x = i + (j - (n_cols - 1) / 2) * width
            cell = cells[j]
            if cell.paper is not None:
                paper_xs.append(x)
                papers.append(cell.paper)
            if cell.mean is None:
                missing_xs.append(x)
                continue
            xs.append(x)
            heights.append(cell.mean)
            errors.append(cell.std or 0.0)
        bars = ax.bar(xs, heights, width, yerr=errors if any(errors) else None, capsize=2, color=f"C{j}",
                      label=data.column_label(column))
        ax.bar_label(bars, fmt="%.1f", fontsize=6, rotation=90, padding=2)  # a 0.0 bar is not a missing one
        if missing_xs:
            ax.plot(missing_xs, [0.0] * len(missing_xs), "x", color=f"C{j}", markersize=8, clip_on=False,
                    label=None if labelled["missing"] else "missing (see table)")
            labelled["missing"] = True
        if paper_xs:
            ax.hlines(papers, [x - width / 2 for x in paper_xs], [x + width / 2 for x in paper_xs],
                      color="black", linewidth=2, label=None if labelled["paper"] else "paper")
            labelled["paper"] = True
    ax.set_xticks(range(len(groups)), [row for row, _ in groups], rotation=30, ha="right")
    ax.set_ylabel(ylabel or f"test {data.layout.metric} ×100 (mean ± std over seeds)")
    ax.set_title(data.layout.title)
    if values:
        ax.set_ylim(min(0.0, min(values) * 1.1), max(values) * 1.15 if max(values) > 0 else 1.0)
    ax.axhline(0.0, color="black", linewidth=0.5)
    fig.legend(loc="outside right upper", fontsize="small")  # beside the axes: never over a bar
    return fig


def plot(data: TableData, path: Path, ylabel: str | None = None) -> Path:
    """`bar_figure` saved as a PNG."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    bar_figure(data, ylabel).savefig(path, dpi=110)
    return path


# ---------------------------------------------------------------------------------------------------
# provenance: the header block of a rendered results file


def _run_times(tracking_uri: str, run_ids: list[str]) -> dict[str, Any]:
    """Total and span of the runs' wall times, from MLflow's start/end times; their code commits."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    total, starts, ends, commits = 0.0, [], [], []
    for run_id in run_ids:
        try:
            run = client.get_run(run_id)
        except MlflowException:
            continue
        if run.info.start_time and run.info.end_time:
            total += (run.info.end_time - run.info.start_time) / 1000
            starts.append(run.info.start_time)
            ends.append(run.info.end_time)
        commit = run.data.tags.get("git_commit")
        if commit and commit not in commits:
            commits.append(commit)
    span = (max(ends) - min(starts)) / 1000 if starts else 0.0
    return {"total_s": total, "span_s": span, "commits": commits, "timed": len(starts)}


CODE_DIRS = ("ablations", "lightning_modules", "datamodules", "experiments")


def code_state() -> str:
    """The commit, and the code files that differ from it (modified or untracked), if any: numbers
    rendered from a dirty tree are not reproducible from the commit alone."""
    import subprocess

    from ablations.config import REPO_ROOT
    from ablations.tracking import git_commit

    commit = git_commit()
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", *CODE_DIRS], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return f"{commit} (working tree state unknown)"
    changed = [line[3:] for line in out.stdout.splitlines()] if out.returncode == 0 else []
    if not changed:
        return commit
    shown = ", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
    return f"{commit} plus uncommitted changes to {shown}"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def _status_counts(statuses: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    order = (FINISHED, FAILED, RUNNING, NOT_RUN, BLOCKED)
    return ", ".join(f"{counts[s]} {s.lower().replace('_', ' ')}" for s in order if s in counts) or "none"


def provenance(name: str, profile: str | None, runs: Sequence[CellRun], tracking_uri: str,
               stages: Sequence[tuple[str, str, str | None]] = ()) -> list[str]:
    """Lines saying what produced a table: experiment, profile, runs by status (fine-tuning runs, and the
    pretraining stages as (name, status, MLflow run id)), wall time, machine, code."""
    finetune_ids = list(dict.fromkeys(r.run_id for r in runs if r.run_id))
    stage_ids = list(dict.fromkeys(run_id for _, _, run_id in stages if run_id))
    finetune, pretrain = _run_times(tracking_uri, finetune_ids), _run_times(tracking_uri, stage_ids)
    both = _run_times(tracking_uri, finetune_ids + stage_ids)
    counts = f"{len(runs)} fine-tuning runs planned ({_status_counts(r.status for r in runs)})"
    if stages:
        counts += f"; {len(stages)} pretraining stage(s) ({_status_counts(status for _, status, _ in stages)})"
    split = (f" (pretraining {_duration(pretrain['total_s'])}, fine-tuning {_duration(finetune['total_s'])})"
             if stages else "")
    return [
        f"experiment: {name}",
        f"profile: {profile or 'unknown'}",
        f"runs: {counts}",
        f"wall time: {_duration(both['total_s'])} summed over {both['timed']} runs{split}; first start to last "
        f"end {_duration(both['span_s'])} (MLflow's start/end times)",
        f"machine (rendering host): {machine()}",
        f"code: rendered at commit {code_state()}; runs logged at commit(s) "
        f"{', '.join(c[:12] for c in both['commits']) or 'unknown'}",
        f"tracking store: {tracking_uri}",
    ]


def _header(lines: list[str], fmt: str) -> str:
    if fmt == "markdown":
        return "\n".join(f"- {line}" for line in lines) + "\n\n"
    if fmt == "latex":
        return "\n".join(f"% {line}" for line in lines) + "\n"
    return ""  # csv stays plain csv


# ---------------------------------------------------------------------------------------------------
# vocabulary tables (Tables 1 and 8): computed from the staged vocabularies, not from runs


@dataclass
class Grid:
    """A table of text cells (no seeds, no tests): the vocabulary tables. `records` is its CSV form."""

    title: str
    header: list[str]
    body: list[list[str]]
    notes: list[str]
    records: list[dict[str, Any]]
    figure_data: TableData | None = None  # numbers to plot
    ylabel: str = ""
    align: str = ""  # LaTeX column spec; all left-aligned when empty


def _grid_markdown(grid: Grid) -> str:
    align = grid.align or "l" * len(grid.header)
    lines = [f"**{_md_escape(grid.title)}**", "", "| " + " | ".join(map(_md_escape, grid.header)) + " |",
             "|" + "".join("---:|" if a == "r" else "---|" for a in align)]
    lines += ["| " + " | ".join(map(_md_escape, row)) + " |" for row in grid.body]
    lines.append("")
    for note in grid.notes:
        lines += [_md_escape(note), ""]
    return "\n".join(lines).rstrip() + "\n"


def _grid_latex(grid: Grid) -> str:
    checks = any("✓" in cell for row in grid.body for cell in row)
    needs = ["% \\checkmark needs \\usepackage{amssymb}"] if checks else []
    lines = [*needs, r"\begin{table}[t]", r"\centering", rf"\caption{{{latex_escape(grid.title)}}}",
             rf"\begin{{tabular}}{{{grid.align or 'l' * len(grid.header)}}}", r"\hline",
             " & ".join(map(latex_escape, grid.header)) + r" \\", r"\hline"]
    lines += [" & ".join(map(latex_escape, row)) + r" \\" for row in grid.body]
    lines += [r"\hline", r"\end{tabular}", r"\par\smallskip", r"\begin{minipage}{\linewidth}\footnotesize"]
    lines += [latex_escape(n) + r"\\" for n in grid.notes]
    lines += [r"\end{minipage}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def _grid_csv(grid: Grid) -> str:
    out = io.StringIO()
    fields = list(dict.fromkeys(k for record in grid.records for k in record))
    writer = csv.DictWriter(out, fields, lineterminator="\n")
    writer.writeheader()
    for record in grid.records:
        writer.writerow({k: _number(v) if isinstance(v, float) else ("" if v is None else v)
                         for k, v in record.items()})
    return out.getvalue()


def render_grid(grid: Grid, fmt: str = "markdown") -> str:
    _check_format(fmt)
    return {"markdown": _grid_markdown, "latex": _grid_latex, "csv": _grid_csv}[fmt](grid)


def table1_grid(rows: list) -> Grid:
    """Table 1 (ablations.vocab_compare.table1): each term's word pieces per vocabulary, with the paper's
    split beside ours where they differ; the plot counts the pieces."""
    from ablations.vocab_compare import CHECK, _same

    vocabs = list(rows[0].splits) if rows else []
    body, records = [], []
    figure = TableData(TableLayout(title="Table 1: word pieces per term", rows="term", columns="vocabulary"),
                       [r.term for r in rows], vocabs, {})
    for row in rows:
        cells = [row.term, row.category]
        for v in vocabs:
            ours, paper = row.splits[v], row.paper.get(v)
            same = None if paper is None else _same(ours, paper)
            cells.append(ours if same in (None, True) else f"{ours} (paper: {paper})")
            pieces = 1 if ours == CHECK else ours.count("-") + 1
            records.append({"row": row.term, "column": v, "category": row.category, "ours": ours,
                            "paper": paper, "match": "" if same is None else str(same).lower(),
                            "pieces": pieces})
            figure.cells[(row.term, v)] = Cell(row.term, v, values={0: float(pieces)}, planned_seeds=(0,))
        body.append(cells)
    compared = [r for r in records if r["match"]]
    notes = ["Word pieces joined by '-' ('##' dropped); ✓: the term is one vocabulary entry. The paper prints "
             "original casing; uncased vocabularies are compared case-insensitively."]
    if compared:
        notes.append(f"Matches the paper: {sum(r['match'] == 'true' for r in compared)}/{len(compared)} cells.")
    return Grid("Table 1: how vocabularies split biomedical terms", ["term", "category", *vocabs], body, notes,
                records, figure, "word pieces")


def table8_grid(rows: list, general_vocab: str, domain_vocab: str) -> Grid:
    """Table 8 (ablations.vocab_compare.table8): average input length in word pieces per dataset."""
    def f1(x: float | None) -> str:
        return "" if x is None else f"{x:.1f}"

    body, records = [], []
    figure = TableData(TableLayout(title="Table 8: average input length", rows="task", columns="vocabulary"),
                       [r.dataset for r in rows], [general_vocab, domain_vocab], {})
    for r in rows:
        body.append([r.dataset, f1(r.general), f1(r.paper_general), f1(r.domain), f1(r.paper_domain),
                     f"{r.ratio:.3f}", "" if r.paper_ratio is None else f"{r.paper_ratio:.3f}"])
        for vocab, ours, paper in ((general_vocab, r.general, r.paper_general),
                                   (domain_vocab, r.domain, r.paper_domain)):
            records.append({"row": r.dataset, "column": vocab, "mean": ours, "paper": paper,
                            "deviation_pct": None if paper is None else 100 * (ours - paper) / paper})
            figure.cells[(r.dataset, vocab)] = Cell(r.dataset, vocab, values={0: ours}, planned_seeds=(0,),
                                                    paper=paper)
    notes = ["Mean number of word pieces of the fine-tuning input (special tokens included, relation entities "
             "dummified, no truncation) over all splits; 'paper': Gu et al., Table 8."]
    return Grid("Table 8: average input length in word pieces, general vs in-domain vocabulary",
                ["dataset", general_vocab, "paper", domain_vocab, "paper", "ratio", "paper ratio"], body, notes,
                records, figure, "word pieces per input", "l" + "r" * 6)


# ---------------------------------------------------------------------------------------------------
# publishing: files under <work_dir>/tables/<name>/ and one MLflow run per experiment


TABLE_FILES = ("table.md", "table.tex", "table.csv", "table.png")


@dataclass
class Published:
    """What `publish` wrote: the folder, the MLflow table run, and the table in each format."""

    out_dir: Path
    run_id: str
    texts: dict[str, str]  # fmt -> rendered table (without the provenance header)
    header: list[str]


def _filter_value(value: str) -> str:
    return value.replace("'", "\\'")


def find_table_run(tracking_uri: str, name: str):
    """The MLflow run holding experiment `name`'s rendered table, or None."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name(TABLE_MLFLOW_EXPERIMENT)
    if experiment is None:
        return None
    found = client.search_runs([experiment.experiment_id],
                               f"tags.kind = '{TABLE_KIND}' and tags.experiment = '{_filter_value(name)}'",
                               order_by=["attributes.start_time DESC"], max_results=1)
    return found[0] if found else None


def log_table_run(tracking_uri: str, name: str, files: list[Path], tags: dict[str, str],
                  metrics: dict[str, float], artifact_root: Path | None) -> str:
    """Log the rendered files to experiment `name`'s table run: created once, updated on every re-render
    (same run, artifacts overwritten, tags and metrics refreshed)."""
    from mlflow.entities import RunStatus

    from ablations.tracking import Tracker

    tracker = Tracker(tracking_uri, TABLE_MLFLOW_EXPERIMENT, artifact_root=artifact_root)
    client = tracker.client
    all_tags = {"kind": TABLE_KIND, "experiment": name, **tags}
    previous = find_table_run(tracking_uri, name)
    if previous is None:
        run_id = tracker.create(f"table-{name}", all_tags, {})
    else:
        run_id = previous.info.run_id
        client.update_run(run_id, status="RUNNING")
        for key, value in all_tags.items():
            client.set_tag(run_id, key, value)
    try:
        for path in files:
            client.log_artifact(run_id, str(path))
        tracker.log_metrics(run_id, metrics)
    except BaseException:
        client.set_terminated(run_id, RunStatus.to_string(RunStatus.FAILED))
        raise
    client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))
    return run_id


def _write_all(out_dir: Path, texts: dict[str, str], header: list[str], figure: TableData,
               ylabel: str | None) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt, text in texts.items():
        path = out_dir / f"table.{FILE_SUFFIX[fmt]}"
        path.write_text(_header(header, fmt) + text, encoding="utf-8")
        paths.append(path)
    paths.append(plot(figure, out_dir / "table.png", ylabel))
    return paths


def publish(name: str, texts: dict[str, str], figure: TableData, header: list[str], tracking_uri: str,
            out_dir: Path, artifact_root: Path | None, tags: dict[str, str], metrics: dict[str, float],
            ylabel: str | None = None) -> Published:
    """Write table.md / .tex / .csv (with the provenance header; CSV stays plain) and table.png to
    `out_dir`, and log them to the experiment's MLflow table run."""
    paths = _write_all(Path(out_dir), texts, header, figure, ylabel)
    run_id = log_table_run(tracking_uri, name, paths, tags, metrics, artifact_root)
    return Published(Path(out_dir), run_id, texts, header)


def publish_runs(name: str, layout: TableLayout, runs: Sequence[CellRun], tracking_uri: str, out_dir: Path,
                 artifact_root: Path | None = None, profile: str | None = None,
                 tags: dict[str, str] | None = None,
                 stages: Sequence[tuple[str, str, str | None]] = ()) -> Published:
    """A fine-tuning experiment's table from its cell runs: rendered in every format, plotted, logged.
    `stages` (name, status, MLflow run id) are its pretraining stages, for the header."""
    from ablations.tracking import git_commit

    data = summarize(layout, runs)
    texts = {fmt: render_data(data, fmt) for fmt in FORMATS}
    header = provenance(name, profile, runs, tracking_uri, stages)
    counts = {status: sum(r.status == status for r in runs)
              for status in (FINISHED, FAILED, RUNNING, NOT_RUN, BLOCKED)}
    cells = [c for _, row_cells in data.body_rows() for c in row_cells]
    metrics = {"runs_planned": len(runs), **{f"runs_{s.lower()}": n for s, n in counts.items()},
               "cells": len(cells), "cells_with_values": sum(c.mean is not None for c in cells)}
    all_tags = {"profile": profile or "", "title": layout.title, "git_commit": git_commit(),
                "table_kind": "finetune", **(tags or {})}
    return publish(name, texts, data, header, tracking_uri, out_dir, artifact_root, all_tags, metrics)


def publish_grid(name: str, grid: Grid, tracking_uri: str, out_dir: Path, artifact_root: Path | None = None,
                 profile: str | None = None, tags: dict[str, str] | None = None,
                 seconds: float | None = None) -> Published:
    """A vocabulary table (Table 1 or 8), computed in `seconds`: rendered, plotted and logged like a
    fine-tuning table."""
    from ablations.tracking import git_commit

    texts = {fmt: render_grid(grid, fmt) for fmt in FORMATS}
    header = [f"experiment: {name}",
              "profile: none applies (no runs: computed from the staged vocabularies and datasets)",
              *([f"wall time: {_duration(seconds)} to compute"] if seconds is not None else []),
              f"machine: {machine()}", f"code: commit {code_state()}"]
    all_tags = {"profile": profile or "", "title": grid.title, "git_commit": git_commit(), "table_kind": "vocab",
                **(tags or {})}
    return publish(name, texts, grid.figure_data, header, tracking_uri, out_dir, artifact_root, all_tags,
                   {"rows": len(grid.body)}, grid.ylabel)


# ---------------------------------------------------------------------------------------------------
# reading back: what the notebook shows


@dataclass
class StoredTable:
    """An experiment's table run in a tracking store, with its rendered markdown and plot."""

    experiment: str
    run_id: str
    title: str
    profile: str
    rendered_at: str  # the run's end time, UTC
    markdown: str
    png: bytes | None


def stored_tables(tracking_uri: str) -> list[StoredTable]:
    """Every table run in the store (one per experiment), newest first, with its markdown and PNG read
    back from the run's artifacts."""
    from mlflow.tracking import MlflowClient

    from ablations.tracking import preserved_tracking_env

    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name(TABLE_MLFLOW_EXPERIMENT)
    if experiment is None:
        return []
    runs = client.search_runs([experiment.experiment_id], f"tags.kind = '{TABLE_KIND}'",
                              order_by=["attributes.end_time DESC"])
    with _env(MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR="false"), preserved_tracking_env():  # no progress bars
        return [_stored_table(run, tracking_uri) for run in runs]


@contextmanager
def _env(**values: str) -> Iterator[None]:
    import os

    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _stored_table(run, tracking_uri: str) -> StoredTable:
    import datetime
    import tempfile

    from mlflow.artifacts import download_artifacts
    from mlflow.exceptions import MlflowException

    files: dict[str, bytes | None] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("table.md", "table.png"):
            try:
                files[name] = Path(download_artifacts(run_id=run.info.run_id, artifact_path=name, dst_path=tmp,
                                                      tracking_uri=tracking_uri)).read_bytes()
            except (MlflowException, OSError):  # the run lacks the file: show what exists
                files[name] = None
    end = run.info.end_time or run.info.start_time
    when = datetime.datetime.fromtimestamp(end / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    markdown = files["table.md"].decode("utf-8") if files["table.md"] else "(table.md missing from the run)"
    return StoredTable(run.data.tags.get("experiment", ""), run.info.run_id, run.data.tags.get("title", ""),
                       run.data.tags.get("profile", ""), when, markdown, files["table.png"])


def experiments_in_store(tracking_uri: str) -> list[dict[str, Any]]:
    """One entry per experiment seen in the store: its `bioablate run` invocations (parent runs tagged
    `kind=experiment`), the newest one's profile and status, and its table run if it was rendered."""
    from mlflow.tracking import MlflowClient

    from ablations.experiment import PARENT_KIND

    client = MlflowClient(tracking_uri)
    ids = [e.experiment_id for e in client.search_experiments()]
    summary: dict[str, dict[str, Any]] = {}

    def entry(name: str) -> dict[str, Any]:
        return summary.setdefault(name, {"experiment": name, "invocations": 0, "last_profile": "",
                                         "last_status": "", "table_run": None, "table_profile": ""})

    for kind in (PARENT_KIND, TABLE_KIND):
        runs = client.search_runs(ids, f"tags.kind = '{kind}'", order_by=["attributes.start_time DESC"],
                                  max_results=5000) if ids else []
        for run in runs:
            e = entry(run.data.tags.get("experiment") or run.info.run_name)
            if kind == TABLE_KIND:
                e["table_run"], e["table_profile"] = run.info.run_id, run.data.tags.get("profile", "")
                continue
            if not e["invocations"]:  # newest first
                e["last_profile"], e["last_status"] = run.data.tags.get("profile", ""), run.info.status
            e["invocations"] += 1
    return sorted(summary.values(), key=lambda e: e["experiment"])


def experiments_markdown(tracking_uri: str) -> str:
    rows = experiments_in_store(tracking_uri)
    if not rows:
        return f"No experiments in {tracking_uri} yet: run `bioablate run EXPERIMENT.yaml` first."
    lines = ["| experiment | `bioablate run` invocations | newest (profile, status) | table run (profile) |",
             "|---|---:|---|---|"]
    for r in rows:
        newest = f"{r['last_profile']}, {r['last_status']}" if r["invocations"] else ""
        table = f"`{r['table_run']}` ({r['table_profile']})" if r["table_run"] else "(not rendered)"
        lines.append(f"| {_md_escape(r['experiment'])} | {r['invocations']} | {newest} | {table} |")
    return "\n".join(lines) + "\n"


def report_tracking_uri(explicit: str | None = None) -> str:
    """The store the report notebook reads: `explicit`, else $BIOABLATE_TRACKING_URI, else
    $MLFLOW_TRACKING_URI, else the default work directory's store (<repo>/outputs/mlruns.db)."""
    import os

    from ablations.config import REPO_ROOT

    return (explicit or os.environ.get("BIOABLATE_TRACKING_URI") or os.environ.get("MLFLOW_TRACKING_URI")
            or f"sqlite:///{REPO_ROOT / 'outputs' / 'mlruns.db'}")


# ---------------------------------------------------------------------------------------------------
# an experiment (ablations/experiment.py) end to end


def vocab_grid(experiment) -> Grid:
    """A `kind: vocab` experiment's table, computed from the staged vocabularies (and, for input lengths,
    the staged datasets) by ablations/vocab_compare.py."""
    from ablations.config import resolve_data_dir
    from ablations.vocab_compare import table1, table8

    vocab = experiment.vocab
    data_dir = resolve_data_dir(experiment.data_dir)
    if vocab.table == "terms":
        grid = table1_grid(table1(list(vocab.vocabs), data_dir))
    else:
        grid = table8_grid(table8(vocab.general, vocab.domain, data_dir, list(experiment.tasks)), vocab.general,
                           vocab.domain)
    if experiment.layout.title and experiment.layout.title != experiment.name:
        grid.title = experiment.layout.title
    return grid


def render_experiment(experiment, tracking_uri: str | None = None, fmt: str = "markdown",
                      out_dir: Path | str | None = None) -> str:
    """Collect the experiment's runs from the store (ablations.experiment.collect; nothing is run), render
    its table, write table.md / .tex / .csv / .png to `out_dir` (default <work_dir>/tables/<name>/), log
    them to the experiment's MLflow table run, and return the table in `fmt`. A `kind: vocab` experiment
    is computed from the staged vocabularies instead."""
    _check_format(fmt)
    work_dir, store_uri = experiment.store()
    tracking_uri = tracking_uri or store_uri
    out = Path(out_dir) if out_dir is not None else work_dir / "tables" / experiment.name
    tags = {"experiment_file": str(experiment.path)}
    if experiment.kind == "vocab":
        import time

        start = time.perf_counter()
        grid = vocab_grid(experiment)
        published = publish_grid(experiment.name, grid, tracking_uri, out, work_dir / "mlartifacts",
                                 experiment.profile, tags, time.perf_counter() - start)
    else:
        from ablations.experiment import Store, collect, stage_states

        runs = collect(experiment, tracking_uri)
        stages = [(s.name, s.status, s.run_id) for s in stage_states(experiment, Store(tracking_uri)).values()]
        published = publish_runs(experiment.name, experiment.layout, runs, tracking_uri, out,
                                 work_dir / "mlartifacts", experiment.profile, tags, stages)
    return published.texts[fmt]

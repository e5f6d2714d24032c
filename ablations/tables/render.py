"""Tables as text: markdown, LaTeX or CSV, of a fine-tuning experiment's numbers (`render_data` of a
stats.TableData, `render` straight from cell runs) and of a grid of text cells (`render_grid`: the vocabulary
tables, Tables 1 and 8, built by ablations/tables/vocab_grids.py). This
is the one renderer of every table: `bioablate table`, `bioablate run` and `bioablate vocab compare` print
what it writes.

A missing cell or seed is shown as missing, with a numbered footnote giving the reason; the paper's number
is shown beside ours; the CSV carries the exact numbers (p values included).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from typing import Any, Sequence

import ablations.tables.annotations as annotations
from ablations.results import BLOCKED, BLURB_ROW, FAILED, FINISHED, NOT_RUN, RUNNING, CellRun, TableLayout
from ablations.tables.cost import COST_FIELDS
from ablations.tables.latex import (
    ONE_LINE_CHARS,
    latex_close,
    latex_escape,
    latex_header,
    latex_open,
    latex_row,
    stacked,
    wrap_words,
)
from ablations.tables.stats import DIGITS, Cell, TableData, table_data
from bioablate_core.console import one_line
from bioablate_core.errors import UnknownNameError

FORMATS = ("markdown", "latex", "csv")
FILE_SUFFIX = {"markdown": "md", "latex": "tex", "csv": "csv"}
DAGGER = "†"
REASON_LIMIT = 300  # characters of a missing run's reason shown in a footnote or CSV cell

_STATUS_WORDS = {FAILED: "failed", NOT_RUN: "not run", RUNNING: "running", BLOCKED: "blocked",
                 FINISHED: "no value"}
_DEFAULT_REASONS = {
    FAILED: "the run raised an error (none recorded)",
    NOT_RUN: "never started: run the experiment",
    RUNNING: "started but not finished (still running, or killed: rerun the experiment)",
    BLOCKED: "cannot be identified yet (an earlier stage, e.g. pretraining, has not finished)",
    FINISHED: "finished without the table's test metric",
}


def _reason(run: CellRun) -> str:
    """Why a run has no value, as footnotes and the CSV give it: its status and reason, on one line."""
    return f"{run.status}: {one_line(run.reason or _DEFAULT_REASONS[run.status], REASON_LIMIT)}"


class _Footnotes:
    """Numbered footnotes, one per distinct text, in order of first use."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def mark(self, text: str) -> int:
        if text not in self.texts:
            self.texts.append(text)
        return self.texts.index(text) + 1


def _missing_marks(cell: Cell, notes: _Footnotes) -> list[tuple[str, int]]:
    """(status word, footnote number) per distinct reason of the cell's missing runs."""
    if not cell.planned_seeds and cell.mean is None:
        return [("no runs", notes.mark("No run of this cell is in the experiment's plan."))]
    out = []
    for run in cell.missing:
        entry = (_STATUS_WORDS[run.status], notes.mark(_reason(run)))
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
    extras: list[str]  # CI, the difference to the baseline, "n too small" (annotations.cell_extras)
    seeds: str | None  # "~12 seeds"
    ci_half: str | None  # the CI's half-width, LaTeX's second ±
    floor_mark: bool = False  # did not learn (annotations.FLOOR_MARK)


def _fmt(value: float | None) -> str | None:
    return None if value is None else f"{value:.{DIGITS}f}"


def _general_notes(data: TableData, footnotes: _Footnotes) -> tuple[list[str], dict[tuple[str, str], _Shown]]:
    layout = data.layout
    metric = "score (each task's primary metric)" if layout.metric == "score" else f"'{layout.metric}'"
    biosses = " (Pearson for BIOSSES too)" if annotations.has_biosses(data) else ""
    notes = [f"Each cell: mean ± sample standard deviation (ddof=1) over seeds of the test {metric} ×100"
             f"{biosses}, n = seeds with a finished run (n=k/m: k of m planned seeds). "
             + ("Best mean per column (task) in bold." if layout.columns in ("task", "metric") and layout.rows != "task"
                else "Best mean per row in bold.")]
    if data.has_paper:
        notes.append(f"'paper': the number reported by {layout.paper_source} for the same cell.")
    untested = {c.untested for _, cells in data.body_rows() for c in cells if c.untested}
    per_cell_untested = len(untested) > 1 or any(
        c.p_value is not None for _, cells in data.body_rows() for c in cells)
    if layout.baseline is not None:
        notes.append(f"Baseline column: '{data.column_label(layout.baseline)}'.")
    notes += annotations.stats_notes(data)
    if layout.baseline is not None:
        if untested and not per_cell_untested:
            notes.append(f"No cell was tested against the baseline: {untested.pop()}.")
    if data.blurb is not None:
        notes.append(f"{BLURB_ROW}: mean over task types of the mean over each type's tasks of the per-task "
                     "means (datamodules.metrics.blurb_score); its ± and test use the per-seed BLURB "
                     "score over the seeds on which every task of the column finished.")
    notes += data.notes
    notes += [legend for legend in [annotations.floor_note(data)] if legend]
    summary = annotations.seeds_summary(data)
    notes += [summary] if summary else []

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
            half = None if cell.ci is None else _fmt((cell.ci[1] - cell.ci[0]) / 2)
            shown[(row, cell.column)] = _Shown(_fmt(cell.mean), _fmt(cell.std), cell.significant, cell.best,
                                               count, _missing_marks(cell, footnotes), marks, _fmt(cell.paper),
                                               annotations.cell_extras(data, cell),
                                               annotations.seeds_text(cell), half,
                                               cell.mean is not None and not cell.learned)
    return notes, shown


def md_escape(text: str) -> str:
    return str(text).replace("|", "\\|")


def _md_close(lines: list[str], notes: list[str]) -> str:
    """The table's lines, then one paragraph per note: consecutive markdown lines would be joined into one."""
    lines = [*lines, ""]
    for note in notes:
        lines += [md_escape(note), ""]
    return "\n".join(lines).rstrip() + "\n"


def _markdown(data: TableData) -> str:
    footnotes = _Footnotes()
    notes, shown = _general_notes(data, footnotes)
    layout = data.layout
    lines = [f"**{md_escape(layout.title)}**", ""]
    for text in (layout.caption, layout.setup):
        if text:
            lines += [md_escape(one_line(text, 2000)), ""]
    floors = annotations.row_floors(data)
    header = [layout.rows] + [md_escape(data.column_label(c)) for c in data.columns] + \
        [annotations.FLOOR_LABEL] * bool(floors)
    lines += ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(data.columns) + bool(floors))]
    for row, cells in data.body_rows():
        texts = []
        for cell in cells:
            s = shown[(row, cell.column)]
            extras = [*([s.count] if s.count else []), *s.extras, *([s.seeds] if s.seeds else [])]
            if s.mean is None:
                text = "—"
                extras = [", ".join(f"{word} [{n}]" for word, n in s.missing)] if s.missing else []
            else:
                text = s.mean + (f" ± {s.std}" if s.std else "")
                text = (f"**{text}**" if s.best else text) + (DAGGER if s.dagger else "") + \
                    (annotations.FLOOR_MARK if s.floor_mark else "")
            if s.paper is not None:
                extras.append(f"paper {s.paper}")
            text += f" ({'; '.join(extras)})" if extras else ""
            marks = ([n for _, n in s.missing] if s.mean is not None else []) + s.marks
            text += "".join(f" [{n}]" for n in marks)
            texts.append(md_escape(text))
        label = f"**{BLURB_ROW}**" if row == BLURB_ROW else md_escape(row)
        floor = [md_escape(annotations.floor_text(*floors[row]))] if floors else []  # floors: every row's
        lines.append("| " + " | ".join([label, *texts, *floor]) + " |")
    lines += ["| " + " | ".join(md_escape(t) for t in [f"*{label}*", *texts, *[""] * bool(floors)]) + " |"
              for label, texts in _extra_rows(data)]
    return _md_close(lines, notes + [f"[{i}] {t}" for i, t in enumerate(footnotes.texts, 1)]
                     + annotations.closing_notes(data))


def _latex(data: TableData) -> str:
    """The narrow layout: one column per condition; under each row's numbers a second line with the CI, n
    and "n too small" in small print, and a row with the paper's numbers; the seeds a test would need are in
    the notes' summary line, not in the cells."""
    footnotes = _Footnotes()
    notes, shown = _general_notes(data, footnotes)
    layout, floors = data.layout, annotations.row_floors(data)
    caption = latex_escape(layout.title)
    for text in (layout.caption, layout.setup):
        if text:
            caption += ("" if caption.endswith(".") else ".") + f" {latex_escape(one_line(text, 2000))}"

    def sup(numbers: list[int]) -> str:
        return rf"\textsuperscript{{{','.join(map(str, numbers))}}}" if numbers else ""

    def small(parts: list[str]) -> str:
        return rf"{{\scriptsize {'; '.join(parts)}}}" if parts else ""

    def body_and_widths(one_per_line: bool) -> tuple[list[list[str]], list[int]]:
        body, widths = [], [len(layout.rows)] + [0] * (len(data.columns) + bool(floors))
        for row, cells in data.body_rows():
            first, below, paper = [latex_escape(row)], [[]], [r"{\scriptsize\itshape paper}"]
            widths[0] = max(widths[0], len(row))
            for i, cell in enumerate(cells, 1):
                s = shown[(row, cell.column)]
                if s.mean is None:
                    first.append("---" + sup([n for _, n in s.missing] + s.marks))
                    below.append([small([latex_escape(w)]) for w, _ in s.missing])
                    width = 3
                else:
                    std = [rf"$\pm$ {s.std}"] if s.std and one_per_line else []
                    number = s.mean + (rf" $\pm$ {s.std}" if s.std and not one_per_line else "")
                    first.append((rf"\textbf{{{number}}}" if s.best else number) + (r"$^\dagger$" if s.dagger else "")
                                 + (r"$^\bot$" if s.floor_mark else "") + sup([n for _, n in s.missing] + s.marks))
                    ci_and_n = [*([rf"CI $\pm${s.ci_half}"] if s.ci_half else []), *([s.count] if s.count else [])]
                    if one_per_line:  # each its own line: "CI ±10.74" is then the widest, 9 characters
                        parts = [[part] for part in std + ci_and_n]
                        width = max(len(s.mean) + s.dagger, len(s.std) + 2 if std else 0,
                                    len(s.ci_half) + 4 if s.ci_half else 0)
                    else:
                        parts = [ci_and_n] * bool(ci_and_n)
                        width = len(s.mean) + (len(s.std) + 3 if s.std else 0) + s.dagger
                    below.append([small(part) for part in parts]  # "n too small" on a line of its own
                                 + [small([latex_escape(e)]) for e in s.extras if not e.startswith("CI ")])
                paper.append(rf"{{\scriptsize {s.paper}}}" if s.paper is not None else "")
                widths[i] = max(widths[i], width + s.floor_mark)
            if floors:  # the row's floor, its kind on a second line
                value, kind = floors[row]
                first.append(value)
                below.append([small([latex_escape(kind)])] if value else [])
                paper.append("")
                widths[-1] = max(widths[-1], len(value), 5)
            body.append([r"\midrule"] if row == BLURB_ROW else [r"\addlinespace"] if body else [])
            body[-1] += [latex_row(first), *map(latex_row, stacked(below)), *[latex_row(paper)] * any(paper[1:])]
        return body, widths

    labels = [layout.rows] + [data.column_label(c) for c in data.columns] + [annotations.FLOOR_LABEL] * bool(floors)
    body, widths = body_and_widths(one_per_line=False)
    header, chars = latex_header(labels, widths)
    if chars > ONE_LINE_CHARS:  # too wide: the std, CI and n each on a line of their own
        body, widths = body_and_widths(one_per_line=True)
        header, chars = latex_header(labels, widths)
    lines = [*latex_open(caption, "l" + "r" * (len(data.columns) + bool(floors)), chars), *header, r"\midrule",
             *(line for group in body for line in group)]
    extra = [(label, texts + [""] * bool(floors)) for label, texts in _extra_rows(data)]
    if extra:
        lines.append(r"\midrule")
    for label, texts in extra:  # cost rows: "5 PFLOP, 1 device-h [pubmed]" as three lines
        cost_lines = stacked([wrap_words(label, max(widths[0], 8))]
                              + [[small([latex_escape(t)]) for t in re.split(r", | (?=\[)", text)] for text in texts])
        lines += [latex_row([latex_escape(parts[0]), *parts[1:]]) for parts in cost_lines]
    return latex_close(lines, [latex_escape(n) + r"\\" for n in notes]
                       + [rf"\textsuperscript{{{i}}} {latex_escape(t)}\\" for i, t in enumerate(footnotes.texts, 1)]
                       + [latex_escape(n) + r"\\" for n in annotations.closing_notes(data)])


def _extra_rows(data: TableData) -> list[tuple[str, list[str]]]:
    """Rows under the scores: the floor of each task column (tasks as columns), then the cost rows."""
    floor = annotations.floor_row(data)
    return [*([floor] if floor else []), *annotations.extra_rows(data)]


CSV_FIELDS = ("row", "column", "tasks", "metric", "mean", "std", "n", "n_planned", "p_value", "significant",
              "best", "paper", "missing", *annotations.STATS_FIELDS, *COST_FIELDS, *annotations.AGREEMENT_FIELDS)


def _number(value: float | None) -> str:
    return "" if value is None else repr(round(float(value), 6))


def _csv_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return _number(value)
    return "" if value is None else str(value)


def _csv_text(fields: Sequence[str], records: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fields, lineterminator="\n")
    writer.writeheader()
    for record in records:
        writer.writerow({k: _csv_value(v) for k, v in record.items()})
    return out.getvalue()


def _missing_text(cell: Cell) -> str:
    """The CSV's `missing`: the seeds without a value, grouped by reason, and what a BLURB score leaves out."""
    seeds_by_reason: dict[str, list[str]] = {}
    for r in cell.missing:
        task = f" ({r.task})" if len(cell.tasks) > 1 else ""
        seeds_by_reason.setdefault(_reason(r), []).append(r.seed_label + task)
    missing = "; ".join(f"seed(s) {', '.join(seeds)} {reason}" for reason, seeds in seeds_by_reason.items())
    if cell.partial:
        missing = "; ".join(filter(None, [missing, f"BLURB over {cell.partial}"]))
    return missing


def _cell_records(data: TableData) -> list[dict[str, Any]]:
    metric = f"{data.layout.metric} x100"
    return [{"row": row, "column": cell.column, "tasks": " ".join(cell.tasks), "metric": metric, "mean": cell.mean,
             "std": cell.std, "n": cell.n, "n_planned": cell.n_planned, "p_value": cell.p_value,
             "significant": None if cell.p_value is None else cell.significant, "best": cell.best,
             "paper": cell.paper, "missing": _missing_text(cell), **annotations.stats_record(cell),
             **annotations.record_extras(data, row, cell.column)}
            for row, cells in data.body_rows() for cell in cells]


def check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise UnknownNameError("table format", fmt, FORMATS)


def render_data(data: TableData, fmt: str = "markdown") -> str:
    check_format(fmt)
    if fmt == "csv":
        return _csv_text(*records(data))
    return {"markdown": _markdown, "latex": _latex}[fmt](data)


def render(layout: TableLayout, runs: Sequence[CellRun], fmt: str = "markdown") -> str:
    """The table of `runs` laid out by `layout`, as markdown, latex or csv."""
    check_format(fmt)
    return render_data(table_data(layout, runs), fmt)


# ---------------------------------------------------------------------------------------------------
# vocabulary tables (Tables 1 and 8): text cells computed from the staged vocabularies, not from runs


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
    lines = [f"**{md_escape(grid.title)}**", "", "| " + " | ".join(map(md_escape, grid.header)) + " |",
             "|" + "".join("---:|" if a == "r" else "---|" for a in align)]
    lines += ["| " + " | ".join(map(md_escape, row)) + " |" for row in grid.body]
    return _md_close(lines, grid.notes)


def _grid_latex(grid: Grid) -> str:
    checks = any("✓" in cell for row in grid.body for cell in row)
    needs = ["% \\checkmark needs \\usepackage{amssymb}"] if checks else []
    widths = [max((len(row[i]) for row in grid.body), default=0) for i in range(len(grid.header))]
    header, chars = latex_header(grid.header, widths)
    lines = [*needs, *latex_open(latex_escape(grid.title), grid.align or "l" * len(grid.header), chars), *header,
             r"\midrule"]
    lines += [" & ".join(map(latex_escape, row)) + r" \\" for row in grid.body]
    return latex_close(lines, [latex_escape(n) + r"\\" for n in grid.notes])


def records(table: TableData | Grid) -> tuple[list[str], list[dict[str, Any]]]:
    """A table's CSV form, as (fields, one record per cell) with the values unrounded: what table.csv
    holds, and the MLflow table artifact."""
    if isinstance(table, Grid):
        return list(dict.fromkeys(k for record in table.records for k in record)), table.records
    return list(CSV_FIELDS), _cell_records(table)


def render_grid(grid: Grid, fmt: str = "markdown") -> str:
    check_format(fmt)
    if fmt == "csv":
        return _csv_text(*records(grid))
    return {"markdown": _grid_markdown, "latex": _grid_latex}[fmt](grid)

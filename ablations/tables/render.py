"""Tables as text: markdown, LaTeX or CSV, of a fine-tuning experiment's numbers (`render_data` of a
stats.TableData, `render` straight from cell runs) and of a grid of text cells (`render_grid`: the vocabulary
tables, Tables 1 and 8, built by ablations/tables/vocab_grids.py). This
is the one renderer of every table: `bioablate table`, `bioablate run` and `bioablate vocab compare` print
what it writes.

A fine-tuning table's cell is its mean ± sd and its marks; a Δ column per variant gives the difference to
the baseline, a *paper* row under each row the paper's numbers, and the legend one line per symbol. A missing
cell or seed is shown as missing, with a numbered footnote giving the reason; the CSV carries every figure,
unrounded (intervals, p values, seeds needed).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from typing import Any, Sequence

import ablations.tables.annotations as annotations
from ablations.results import BLOCKED, BLURB_ROW, FAILED, FINISHED, NOT_RUN, RUNNING, CellRun, TableLayout
from ablations.tables.annotations import DAGGER
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
from ablations.tables.stats import SHOWN_DIGITS, Cell, TableData, table_data
from bioablate_core.console import one_line
from bioablate_core.errors import UnknownNameError

FORMATS = ("markdown", "latex", "csv")
FILE_SUFFIX = {"markdown": "md", "latex": "tex", "csv": "csv"}
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
class _Value:
    """A score cell's parts, which the markdown and LaTeX writers each set in their own markup."""

    mean: str | None  # None: no value
    std: str | None = None
    best: bool = False
    marks: str = ""  # DAGGER and FLOOR_MARK, as they apply
    notes: tuple[int, ...] = ()  # footnote numbers
    missing: tuple[tuple[str, int], ...] = ()  # a cell without a value: why, as (status word, footnote)
    count: str = ""  # "2/3": finished of planned seeds, where some are missing (a narrow LaTeX table's n)


def _shown(value: float | None) -> str:
    return "" if value is None else f"{value:.{SHOWN_DIGITS}f}"


def _delta(difference: float | None, interval: tuple[float, float] | None = None) -> str:
    if difference is None:
        return ""
    return f"{difference:+.{SHOWN_DIGITS}f}" + (f" [{_shown(interval[0])}, {_shown(interval[1])}]" if interval else "")


def _count(cell: Cell) -> str:
    if cell.mean_override is not None or cell.n == cell.n_planned:
        return str(cell.n) if cell.n else ""
    return f"{cell.n}/{cell.n_planned}"


@dataclass
class _Grid:
    """A fine-tuning table laid out once for both writers: its header, rows (label, cells, kind: "body",
    "paper" or "extra"), the caption under the title and the notes after the table."""

    header: list[str]
    rows: list[tuple[str, list[_Value | str], str]]
    caption: str
    notes: list[str]
    compared: list[str]  # the columns with a Δ column


def _grid(data: TableData) -> _Grid:
    layout, footnotes = data.layout, _Footnotes()
    body = data.body_rows()
    untested = {c.untested for _, cells in body for c in cells if c.untested}
    per_cell_untested = len(untested) > 1 or any(c.p_value is not None for _, cells in body for c in cells)
    compared = [c for c in data.columns if layout.baseline is not None and c != layout.baseline]
    counts = {_count(c) for _, cells in body for c in cells if c.mean is not None}
    n_column = len(counts) > 1 or any("/" in n for n in counts)
    floors = annotations.row_floors(data)
    header = [layout.rows, *(data.column_label(c) for c in data.columns),
              *(f"Δ {data.column_label(c)}" for c in compared), *["n"] * n_column,
              *[annotations.FLOOR_LABEL] * bool(floors)]
    rows: list[tuple[str, list[_Value | str], str]] = []
    for row, cells in body:
        values: list[_Value | str] = []
        for cell in cells:
            marks = [footnotes.mark(f"No significance test: {cell.untested}.")] if cell.untested and \
                per_cell_untested else []
            marks += [footnotes.mark(f"BLURB score over {cell.partial}.")] if cell.partial else []
            missing = _missing_marks(cell, footnotes)
            if cell.mean is None:
                values.append(_Value(None, notes=tuple(marks), missing=tuple(missing)))
                continue
            values.append(_Value(_shown(cell.mean), _shown(cell.std) or None, cell.best,
                                 DAGGER * cell.significant + annotations.FLOOR_MARK * (not cell.learned),
                                 tuple([n for _, n in missing] + marks), count=_count(cell) * ("/" in _count(cell))))
        by_column = {c.column: c for c in cells}
        deltas = [_delta(by_column[c].diff_mean, by_column[c].diff_ci if layout.differences else None)
                  for c in compared]
        shown_n = [", ".join(dict.fromkeys(_count(c) for c in cells if c.mean is not None))] * n_column
        floor = [annotations.floor_text(*floors[row])] if floors else []
        rows.append((row, values + deltas + shown_n + floor, "body"))
        if any(c.paper is not None for c in cells):
            base = by_column.get(layout.baseline)
            paper_deltas = [_delta(by_column[c].paper - base.paper) if by_column[c].paper is not None and
                            base is not None and base.paper is not None else "" for c in compared]
            rows.append(("paper", [_shown(c.paper) for c in cells] + paper_deltas
                         + [""] * (n_column + bool(floors)), "paper"))
    blanks = [""] * (len(compared) + n_column + bool(floors))
    rows += [(label, texts + blanks, "extra") for label, texts in annotations.extra_rows(data)]
    metric = "score ×100 (each task's primary metric" if layout.metric == "score" else f"'{layout.metric}' ×100 ("
    biosses = "; Pearson for BIOSSES" if annotations.has_biosses(data) else ""
    seeds = counts.pop() if not n_column and counts else "n"
    over = f"{seeds} {annotations.counted_unit(data)}{'' if seeds == '1' else 's'}"
    cell = f"Each cell: mean ± sd over {over} of the test {metric}{biosses}), to one decimal."
    notes = annotations.legend(data, bool(compared), n_column)
    if untested and not per_cell_untested and compared:
        notes.append(f"No cell was tested against the baseline: {untested.pop()}.")
    if data.blurb is not None:
        notes.append(f"{BLURB_ROW}: the mean over task types of each type's mean task score "
                     "(datamodules.metrics.blurb_score); its ± over the seeds on which every task finished.")
    notes += data.notes + [f"[{i}] {t}" for i, t in enumerate(footnotes.texts, 1)] + annotations.closing_notes(data)
    return _Grid(header, rows, " ".join(filter(None, [one_line(layout.caption, 2000), cell])), notes, compared)


def md_escape(text: str) -> str:
    return str(text).replace("|", "\\|")


def _md_close(lines: list[str], notes: list[str]) -> str:
    """The table's lines, then one paragraph per note: consecutive markdown lines would be joined into one."""
    lines = [*lines, ""]
    for note in notes:
        lines += [md_escape(note), ""]
    return "\n".join(lines).rstrip() + "\n"


def _md_value(value: _Value | str) -> str:
    if isinstance(value, str):
        return md_escape(value)
    notes = "".join(f" [{n}]" for n in value.notes)
    if value.mean is None:
        words = ", ".join(f"{word} [{n}]" for word, n in value.missing)
        return md_escape("—" + (f" ({words})" if words else "") + notes)
    text = value.mean + (f" ± {value.std}" if value.std else "")
    return md_escape((f"**{text}**" if value.best else text) + value.marks + notes)


def _markdown(data: TableData) -> str:
    grid = _grid(data)
    lines = [f"**{md_escape(data.layout.title)}**", "", md_escape(grid.caption), "",
             "| " + " | ".join(map(md_escape, grid.header)) + " |", "|---|" + "---:|" * (len(grid.header) - 1)]
    for label, values, kind in grid.rows:
        shown = f"**{BLURB_ROW}**" if label == BLURB_ROW else f"*{label}*" if kind != "body" else md_escape(label)
        lines.append("| " + " | ".join([shown, *map(_md_value, values)]) + " |")
    return _md_close(lines, grid.notes)


def _latex_value(value: _Value | str, narrow: bool) -> list[str]:
    """A cell as LaTeX lines: its number (bold, marks and footnotes), and in a narrow table its ± on a second."""
    if isinstance(value, str):
        return [latex_escape(value)]
    numbers = [n for _, n in value.missing] + list(value.notes)
    notes = rf"\textsuperscript{{{','.join(map(str, numbers))}}}" if numbers else ""
    if value.mean is None:
        return ["---" + notes] + [rf"{{\scriptsize {latex_escape(word)}}}" for word, _ in value.missing]
    number = value.mean + (rf" $\pm$ {value.std}" if value.std and not narrow else "")
    first = (rf"\textbf{{{number}}}" if value.best else number) + latex_escape(value.marks) + notes
    return [first] + ([rf"{{\scriptsize $\pm$ {value.std}}}"] if value.std and narrow else []) + \
        ([rf"{{\scriptsize n={value.count}}}"] if value.count and narrow else [])


def _plain_width(value: _Value | str, narrow: bool, kind: str = "body") -> int:
    if isinstance(value, str):  # an extra row's parts go on lines of their own
        return max(map(len, _parts(value))) if kind == "extra" else len(value)
    if value.mean is None:
        return 3
    return len(value.mean) + len(value.marks) + (0 if not value.std else len(value.std) + (0 if narrow else 3))


def _parts(text: str) -> list[str]:
    return re.split(r", | (?=\[)", text) if text else [""]


def _latex(data: TableData) -> str:
    """The markdown's columns; a table too wide for one line per cell puts each ±, Δ and n under its mean."""
    grid = _grid(data)
    caption = latex_escape(data.layout.title)
    caption += ("" if caption.endswith(".") else ".") + " " + latex_escape(grid.caption)
    # in a narrow table, value column i's Δ (an index into a row's values) goes under it
    under = {data.columns.index(c): len(data.columns) + j for j, c in enumerate(grid.compared)}
    for narrow in (False, True):
        keep = [i for i, label in enumerate(grid.header[1:])
                if not (narrow and (i in under.values() or label == "n"))]  # the n under each cell

        def width(values: list, kind: str, i: int) -> int:
            below = len(f"Δ {values[under[i]]}") if narrow and i in under and values[under[i]] else 0
            return max(_plain_width(values[i], narrow, kind), below)
        widths = [max(len(grid.header[0]), *(len(label) for label, _, _ in grid.rows))] + [
            max(width(values, kind, i) for _, values, kind in grid.rows) for i in keep]
        header, chars = latex_header([grid.header[0], *(grid.header[i + 1] for i in keep)], widths)
        if chars <= ONE_LINE_CHARS or narrow:
            break
    lines = [*latex_open(caption, "l" + "r" * len(keep), chars), *header, r"\midrule"]
    for label, values, kind in grid.rows:
        if kind == "body" and label == BLURB_ROW:
            lines.append(r"\midrule")
        elif kind == "body" and lines[-1] != r"\midrule":
            lines.append(r"\addlinespace")
        deltas = {i: [rf"{{\scriptsize $\Delta$ {values[j]}}}"] if narrow and values[j] else []
                  for i, j in under.items()}
        if kind == "paper":
            cells = [[r"{\scriptsize\itshape paper}"], *([rf"{{\scriptsize {latex_escape(values[i])}}}"]
                                                          + deltas.get(i, []) for i in keep)]
        elif kind == "extra":  # cost rows: "5 PFLOP, 1 device-h [pubmed]" as three lines
            cells = [wrap_words(latex_escape(label), max(widths[0], 8)),
                     *([rf"{{\scriptsize {latex_escape(t)}}}" for t in _parts(values[i])] for i in keep)]
        else:
            cells = [[latex_escape(label)], *(_latex_value(values[i], narrow) + deltas.get(i, []) for i in keep)]
        lines += [latex_row(parts) for parts in stacked(cells)]
    return latex_close(lines, [_latex_note(n) + r"\\" for n in grid.notes])


def _latex_note(note: str) -> str:
    """A markdown note in LaTeX: bold, italics and a link's text kept, a footnote's [n] raised (after a line's
    \\\\, "[" would open its optional argument)."""
    text = re.sub(r"^\[(\d+)\] ", r"\\textsuperscript{\1} ", latex_escape(note))
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text)
    return re.sub(r"\*([^*]+)\*", r"\\textit{\1}", re.sub(r"\*\*([^*]+)\*\*", r"\\textbf{\1}", text))


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
    return latex_close(lines, [_latex_note(n) + r"\\" for n in grid.notes])



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

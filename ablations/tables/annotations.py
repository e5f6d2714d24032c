"""What the statistics of a table add to its rendering, as text the renderer (render.py) places: the legend
(one line per symbol, the methods left to docs/statistics.md), the floors, the CSV's fields for every
statistic, the cost rows (cost.py) and the agreement line (agreement.py); the seeds needed for `--stats`."""

from __future__ import annotations

from typing import Any

from ablations.results import CORRECTIONS
from ablations.tables.inference import ALPHA, MIN_SEEDS, POWER
from ablations.tables.stats import SHOWN_DIGITS, Cell, TableData

DAGGER = "†"


def _f(value: float | None) -> str:
    return "" if value is None else f"{value:.{SHOWN_DIGITS}f}"


SEEDS_SHOWN = 1000  # seeds needed above this are shown as "> 1,000": a figure that large only says "not at this n"


def _seeds(count: int) -> str:
    return f"> {SEEDS_SHOWN:,}" if count > SEEDS_SHOWN else f"{count:,}"


def seeds_text(cell: Cell) -> str | None:
    if cell.seeds_needed is None:
        return None
    if cell.seeds_needed > SEEDS_SHOWN:
        return f"{_seeds(cell.seeds_needed)} seeds"
    span = f" ({_seeds(cell.seeds_range[0])}–{_seeds(cell.seeds_range[1])})" if cell.seeds_range else ""
    return f"~{cell.seeds_needed:,} seeds{span}"


FLOOR_MARK = "⊥"  # a cell that did not learn: at its floor, or collapsed
FLOOR_LABEL = "floor"


def tasks_as_columns(data: TableData) -> bool:
    """The columns are tasks (Table 14: variants as rows): a floor is a column's, else a row's."""
    return data.layout.columns in ("task", "metric") and data.layout.rows != "task"


def _floor(cells: list[Cell]) -> tuple[str, str]:
    """The floor of a line of cells (one test set), as ("64.50", "all positive"); ("", "") where none is known."""
    found = next((c for c in cells if c.floor is not None), None)
    return ("", "") if found is None else (_f(found.floor), found.floor_kind or "")


def floor_text(value: str, kind: str) -> str:
    return f"{value} ({kind})" if value else ""


def row_floors(data: TableData) -> dict[str, tuple[str, str]]:
    """Each row's floor (value and kind) for its floor column, where the rows are the tasks (or one task each);
    {} where no cell knows its floor or the columns are the tasks."""
    if tasks_as_columns(data):
        return {}
    found = {row: _floor(cells) for row, cells in data.body_rows()}
    return found if any(value for value, _ in found.values()) else {}


def floor_row(data: TableData) -> tuple[str, list[str]] | None:
    """The floor of each column, as a row under the scores, where the columns are the tasks."""
    if not tasks_as_columns(data):
        return None
    texts = [floor_text(*_floor([data.cells[(r, c)] for r in data.rows])) for c in data.columns]
    return (FLOOR_LABEL, texts) if any(texts) else None


def correction_name(data: TableData) -> str:
    return CORRECTIONS[data.layout.correction]


def legend(data: TableData, delta: bool, n_column: bool) -> list[str]:
    """One line per symbol the table uses, the last naming where the rest is: the CSV and docs/statistics.md."""
    layout, cells = data.layout, [c for _, cells in data.body_rows() for c in cells]
    baseline = data.column_label(layout.baseline) if layout.baseline is not None else None
    lines = []
    if any(c.best for c in cells):
        lines.append(f"**Bold**: the best mean of its {'column' if tasks_as_columns(data) else 'row'}.")
    if baseline is not None:
        compared = [c for c in cells if c.column != layout.baseline and c.mean is not None]
        test = "two-level bootstrap over seeds and test units" if data.resampling else "paired t-test over seeds"
        here = ", as here" if compared and all(c.n_too_small for c in compared) else ""
        lines.append(f"{DAGGER}: differs from {baseline}, p < {ALPHA} {correction_name(data)}-corrected ({test}); "
                     f"never marked below {MIN_SEEDS} seeds{here}.")
    if any(c.mean is not None and not c.learned for c in cells):
        lines.append(f"{FLOOR_MARK}: did not learn (its interval reaches its floor, or its seeds collapsed); never "
                     "bold or marked.")
    if row_floors(data) or floor_row(data):
        lines.append(f"{FLOOR_LABEL}: what the best trivial predictor scores on the same test units.")
    if delta:
        lines.append(f"Δ: our mean per-seed difference to {baseline}" + (", with its 95% interval" if
                     layout.differences else "") + ("; in a *paper* row, the paper's." if data.has_paper else "."))
    if data.has_paper:
        lines.append(f"*paper*: the numbers {layout.paper_source} report for the same cells.")
    if n_column:
        lines.append("n: seeds with a finished run (k/m: k of m planned).")
    lines.append("Intervals, p values and seeds needed: table.csv; the methods: "
                 "[docs/statistics.md](../../statistics.md).")
    return lines


def seeds_summary(data: TableData) -> str | None:
    """One line: the seeds needed to resolve each compared cell's difference."""
    parts = []
    for row, cells in data.body_rows():
        for cell in cells:
            if cell.seeds_needed is not None:
                shown = seeds_text(cell).removesuffix(" seeds").replace(" seeds (", " (")
                parts.append(f"{data.column_label(cell.column)} vs {data.column_label(data.layout.baseline)} "
                             f"on {row} ({'+' if cell.effect > 0 else ''}{_f(cell.effect)}): {shown}")
    if not parts:
        return None
    what = "the given difference" if data.layout.effect is not None else "the paper's difference"
    whose = "" if data.layout.paper_scale else ", from this proxy's seed spread"
    return f"Seeds needed to resolve {what} (α = {ALPHA}, power {POWER}{whose}): " + "; ".join(parts) + "."


def closing_notes(data: TableData) -> list[str]:
    """The notes after the footnotes of the cells: agreement with the paper, and what the cost rows count."""
    from ablations.tables.cost import cost_note

    notes = [data.agreement.line()] if data.agreement is not None else []
    return notes + ([cost_note(data)] if data.layout.cost and data.costs else [])


def extra_rows(data: TableData) -> list[tuple[str, list[str]]]:
    """Rows under the scores: the floor of each task column (tasks as columns), then each column's compute,
    with `table.cost` / `--cost`."""
    from ablations.tables.cost import cost_rows

    floor = floor_row(data)
    return [*([floor] if floor else []), *(cost_rows(data) if data.layout.cost and data.costs else [])]


def record_extras(data: TableData, row: str, column: str) -> dict[str, Any]:
    """A cell's CSV fields beyond its statistics: cost, and its row's agreement with the paper."""
    from ablations.tables.cost import cost_record

    agreement = data.agreement.records().get(row, {}) if data.agreement is not None else {}
    return {**cost_record(data, row, column), **{k: agreement.get(k) for k in AGREEMENT_FIELDS}}


AGREEMENT_FIELDS = ("agreement_tau", "agreement", "agreement_pairs")


def stats_record(cell: Cell) -> dict[str, Any]:
    """The CSV's fields for a cell's statistics, unrounded."""
    ci, diff_ci = cell.ci or (None, None), cell.diff_ci or (None, None)
    seeds_range = cell.seeds_range or (None, None)
    return {"ci_low": ci[0], "ci_high": ci[1], "ci_note": cell.ci_note or "",
            "p_corrected": cell.p_corrected, "n_too_small": cell.n_too_small if cell.p_value is not None or
            cell.untested else None, "mark_test": cell.mark_test or "",
            "diff_mean": cell.diff_mean, "diff_ci_low": diff_ci[0], "diff_ci_high": diff_ci[1],
            "diff_p": cell.diff_p, "diff_p_corrected": cell.diff_p_corrected, "diff_seed_sd": cell.diff_sd,
            "diff_unit_sd": cell.diff_unit_sd,
            "fixed_model_difference": cell.fixed_diff, "fixed_model_p": cell.fixed_p,
            "fixed_model_p_corrected": cell.fixed_p_corrected,
            "fixed_model_significant": None if cell.fixed_p_corrected is None else cell.fixed_significant,
            "effect": cell.effect, "seeds_needed": cell.seeds_needed, "seeds_needed_low": seeds_range[0],
            "seeds_needed_high": seeds_range[1], "floor": cell.floor, "floor_kind": cell.floor_kind or "",
            "cell_state": cell.state or ""}


STATS_FIELDS = ("ci_low", "ci_high", "ci_note", "p_corrected", "n_too_small", "mark_test", "diff_mean", "diff_ci_low",
                "diff_ci_high", "diff_p", "diff_p_corrected", "diff_seed_sd", "diff_unit_sd", "fixed_model_difference",
                "fixed_model_p", "fixed_model_p_corrected", "fixed_model_significant", "effect", "seeds_needed",
                "seeds_needed_low", "seeds_needed_high", "floor", "floor_kind", "cell_state")


def has_biosses(data: TableData) -> bool:
    return "biosses" in data.rows or "biosses" in data.columns or any(
        "biosses" in cell.tasks for _, cells in data.body_rows() for cell in cells)


def counted_unit(data: TableData) -> str:
    """What a cell's count counts: fold runs where a task is cross-validated (runs keyed (seed, fold)), else seeds."""
    return "fold run" if any(isinstance(key, tuple) for cell in data.cells.values() for key in cell.runs) else "seed"

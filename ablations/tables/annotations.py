"""What the statistics of a table add to its rendering, as text the renderer (render.py) places: each cell's
extras (the two-level bootstrap interval, "n too small", the difference to the baseline with its interval
where `table.differences` asks, the seeds needed with their range), the footnotes naming each method, the
table-level seeds-needed line, the CSV's fields for them, the cost rows (cost.py) and the agreement lines
(agreement.py)."""

from __future__ import annotations

from typing import Any

from ablations.results import BLURB_ROW, CORRECTIONS
from ablations.tables.inference import ALPHA, MIN_SEEDS, POWER
from ablations.tables.stats import DIGITS, Cell, TableData


def _f(value: float | None) -> str:
    return "" if value is None else f"{value:.{DIGITS}f}"


def ci_text(cell: Cell) -> str | None:
    return None if cell.ci is None else f"CI {_f(cell.ci[0])}–{_f(cell.ci[1])}"


def difference_text(cell: Cell) -> str | None:
    """"Δ +1.23, CI 0.10–2.40": the difference to the baseline and its two-level bootstrap interval."""
    if cell.diff_mean is None:
        return None
    return f"Δ {cell.diff_mean:+.{DIGITS}f}" + ("" if cell.diff_ci is None else
                                              f", CI {_f(cell.diff_ci[0])}–{_f(cell.diff_ci[1])}")


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


def floor_note(data: TableData) -> str | None:
    """The one-line legend of the floor mark, where a cell carries it."""
    if all(c.learned for _, cells in data.body_rows() for c in cells):
        return None
    return (f"{FLOOR_MARK} did not learn: the cell's interval reaches its floor (what the best trivial predictor "
            "scores on the same test units) or most of its seeds collapsed to one prediction; never bold or marked, "
            "and left out of the agreement with the paper and the seeds needed (docs/statistics.md).")


def cell_extras(data: TableData, cell: Cell) -> list[str]:
    """The parts shown in parentheses after a cell's number, before its n and the paper's number."""
    parts = [t for t in (ci_text(cell),) if t]
    compared = data.layout.baseline is not None and cell.column != data.layout.baseline and cell.mean is not None
    if compared and data.layout.differences and difference_text(cell):
        parts.append(difference_text(cell))
    if compared and cell.n_too_small:
        parts.append("n too small")
    return parts


def correction_name(data: TableData) -> str:
    return CORRECTIONS[data.layout.correction]


def stats_notes(data: TableData) -> list[str]:
    """The footnotes naming each method the cells show."""
    layout, notes = data.layout, []
    method = f"{correction_name(data)}-corrected across the table (statsmodels.stats.multitest, " \
             f"method '{layout.correction}'; the {BLURB_ROW} row, scored from the same runs, corrected apart)"
    resampled = bool(data.resampling)
    if layout.baseline is not None:
        by = ("the two-level bootstrap of the difference to the baseline over seeds and test units (its p: twice "
              "the smaller share of resamples on either side of zero) where the runs' predictions were resampled, "
              "else the two-sided paired t-test over seeds (scipy.stats.ttest_rel)") if resampled else \
            "two-sided paired t-test over the seeds finished in both this cell and the baseline (scipy.stats.ttest_rel)"
        notes.append(f"† p < {ALPHA} {method}: the variant differs from the baseline, by {by}; marked only on at "
                     f"least {MIN_SEEDS} seeds: with fewer a cell says \"n too small\" and is never marked. Raw and "
                     "corrected p values are in the CSV."
                     + (" The fixed-model test (the paired permutation test over the same test units, the seeds held "
                        "fixed: whether these trained models differ, not the variant) is in the CSV (fixed_model_*) "
                        "and `bioablate table --stats`, not marked." if resampled else ""))
    if resampled:
        units = sorted(set(data.resampling["units"].values()))
        notes.append(f"CI: 95% percentile interval of a two-level bootstrap of the cell's mean, "
                     f"{data.resampling['n_resamples']} resamples: each draws the seeds with replacement, then the "
                     f"test units ({', '.join(units)}: what each task's metric scores together, e.g. a sentence for "
                     "entity F1, a question for BioASQ) with replacement, one draw of unit indices shared by every "
                     "seed and column (the same test set), the metric being the task's own scorer. It covers the "
                     "training randomness (which models the seeds gave) and the test set (which examples were "
                     "drawn); with one seed, the test set only. The difference to the baseline has the same interval, "
                     "paired on seeds and units (CSV: diff_ci_low, diff_ci_high"
                     + ("; in the cells: Δ" if layout.differences else "; in the cells with table.differences")
                     + "), beside the seeds' standard deviation of the difference (diff_seed_sd) and its spread over "
                     "test units alone (diff_unit_sd).")
    if any(c.seeds_needed is not None for _, cells in data.body_rows() for c in cells):
        source = f"a difference of {_f(layout.effect)}" if layout.effect is not None else \
            "the paper's difference to the baseline"
        notes.append(f"~N seeds (range): seeds a two-sided paired t-test needs to detect {source} at α = {ALPHA} with "
                     f"power {POWER} (statsmodels.stats.power.TTestPower; 2 where 2 seeds already suffice), given the "
                     "standard deviation of this cell's per-seed differences, and in parentheses the same over that "
                     "standard deviation's 95% chi-square interval (with 3 seeds, 2 degrees of freedom: a factor of "
                     "about 0.27 to 40 in seeds). The spread is these runs' models'" + (
                         "" if layout.paper_scale else
                         ": a proxy's figure, not the paper's models' unless the table runs at the paper's "
                         "scale") + ".")
    return notes


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
    """Rows under the scores: each column's compute, with `table.cost` / `--cost`."""
    from ablations.tables.cost import cost_rows

    return cost_rows(data) if data.layout.cost and data.costs else []


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

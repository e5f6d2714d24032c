"""What the statistics of issue 35 add to a rendered table, as text the renderer (render.py) places: each
cell's extras (bootstrap CI, "n too small", the ‡ mark of the test over test examples, the seeds needed),
the footnotes naming each method, the table-level seeds-needed line, the CSV's fields for them, the cost
rows (cost.py) and the agreement lines (agreement.py)."""

from __future__ import annotations

from typing import Any

from ablations.results import CORRECTIONS
from ablations.tables.inference import ALPHA, MIN_SEEDS, POWER
from ablations.tables.stats import DIGITS, Cell, TableData

DOUBLE_DAGGER = "‡"


def _f(value: float | None) -> str:
    return "" if value is None else f"{value:.{DIGITS}f}"


def ci_text(cell: Cell) -> str | None:
    return None if cell.ci is None else f"CI {_f(cell.ci[0])}–{_f(cell.ci[1])}"


def seeds_text(cell: Cell) -> str | None:
    return None if cell.seeds_needed is None else f"~{cell.seeds_needed} seeds"


def cell_extras(data: TableData, cell: Cell) -> list[str]:
    """The parts shown in parentheses after a cell's number, before its n and the paper's number."""
    parts = [t for t in (ci_text(cell),) if t]
    if data.layout.baseline is not None and cell.column != data.layout.baseline and cell.mean is not None \
            and cell.n_too_small:
        parts.append("n too small")
    return parts


def correction_name(data: TableData) -> str:
    return CORRECTIONS[data.layout.correction]


def stats_notes(data: TableData) -> list[str]:
    """The footnotes naming each method the cells show."""
    layout, notes = data.layout, []
    method = f"{correction_name(data)}-corrected across the table (statsmodels.stats.multitest, " \
             f"method '{layout.correction}')"
    if layout.baseline is not None:
        notes.append(f"† p < {ALPHA} {method}: two-sided paired t-test over the seeds finished in both this cell "
                     f"and the baseline (scipy.stats.ttest_rel); tested only on at least {MIN_SEEDS} seeds: with "
                     "fewer a cell says \"n too small\" and never gets † (the test over test examples ‡ remains); "
                     "raw and corrected p values are in the CSV.")
    if data.resampling:
        units = sorted(set(data.resampling["units"].values()))
        notes.append(f"CI: 95% percentile bootstrap interval of the cell's mean over its test units ({', '.join(units)}: "
                     "what each task's metric scores together, e.g. a sentence for entity F1, a question for BioASQ), "
                     f"{data.resampling['n_resamples']} resamples (scipy.stats.bootstrap; 1000 for test sets of up to 250 "
                     "units, fewer for larger ones, at least 100), each seed's test set resampled on its own, the "
                     "metric being the task's own scorer.")
        if layout.baseline is not None:
            notes.append(f"{DOUBLE_DAGGER} p < {ALPHA} {method}: two-sided paired permutation test "
                         "(scipy.stats.permutation_test, permutation_type='samples', "
                         f"{data.resampling['n_resamples']} permutations) of the difference to the baseline on the "
                         "same test units, pooled over the seeds both cells finished (per-seed tests: "
                         "`bioablate table --stats`).")
    if any(c.seeds_needed is not None for _, cells in data.body_rows() for c in cells):
        source = f"a difference of {_f(layout.effect)}" if layout.effect is not None else \
            "the paper's difference to the baseline"
        notes.append(f"~N seeds: seeds a two-sided paired t-test needs to detect {source} at α = {ALPHA} with "
                     f"power {POWER}, given the spread of this cell's per-seed differences "
                     "(statsmodels.stats.power.TTestPower).")
    return notes


def seeds_summary(data: TableData) -> str | None:
    """One line: the seeds needed to resolve each compared cell's difference."""
    parts = []
    for row, cells in data.body_rows():
        for cell in cells:
            if cell.seeds_needed is not None:
                parts.append(f"{data.column_label(cell.column)} vs {data.column_label(data.layout.baseline)} "
                             f"on {row} ({'+' if cell.effect > 0 else ''}{_f(cell.effect)}): ~{cell.seeds_needed}")
    if not parts:
        return None
    what = "the given difference" if data.layout.effect is not None else "the paper's difference"
    return f"Seeds needed to resolve {what} (α = {ALPHA}, power {POWER}): " + "; ".join(parts) + "."


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
    ci = cell.ci or (None, None)
    return {"ci_low": ci[0], "ci_high": ci[1], "ci_note": cell.ci_note or "",
            "p_corrected": cell.p_corrected, "n_too_small": cell.n_too_small if cell.p_value is not None or
            cell.untested else None,
            "example_difference": cell.example_diff, "example_p": cell.example_p,
            "example_p_corrected": cell.example_p_corrected,
            "example_significant": None if cell.example_p_corrected is None else cell.example_significant,
            "effect": cell.effect, "seeds_needed": cell.seeds_needed}


STATS_FIELDS = ("ci_low", "ci_high", "ci_note", "p_corrected", "n_too_small", "example_difference", "example_p",
                "example_p_corrected", "example_significant", "effect", "seeds_needed")


def has_biosses(data: TableData) -> bool:
    return "biosses" in data.rows or "biosses" in data.columns or any(
        "biosses" in cell.tasks for _, cells in data.body_rows() for cell in cells)

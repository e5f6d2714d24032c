"""`bioablate table --stats`: every statistic behind a table, cell by cell, in plain text -- per run its test
score and bootstrap CI over its test units, the cell's two-level bootstrap interval (seeds and test units),
the difference to the baseline with its two-level interval and p (the test behind the mark), the seeds' and
the test units' spreads of it, the seed-level t-test raw and corrected, the fixed-model permutation tests
(per seed and pooled: whether these trained models differ), the seeds needed with their range, the cost --
then the agreement with the paper."""

from __future__ import annotations

from ablations.results import BLURB_ROW
from ablations.tables.annotations import correction_name, seeds_summary
from ablations.tables.cost import flops_text, memory_text
from ablations.tables.stats import DIGITS, TableData


def _f(value: float | None) -> str:
    return "—" if value is None else f"{value:.{DIGITS}f}"


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def long_form(data: TableData) -> str:
    layout = data.layout
    base = layout.baseline
    out = [f"{layout.title}: statistics (corrections: {correction_name(data)}; "
           f"{data.resampling.get('n_resamples', '—')} resamples; resampling results cached: "
           f"{data.resampling.get('cached', 0)}, computed: {data.resampling.get('computed', 0)})", ""]
    for row, cells in data.body_rows():
        for cell in cells:
            label = data.column_label(cell.column)
            out.append(f"{row} / {label}: mean {_f(cell.mean)} ± {_f(cell.std)} (n={cell.n}/{cell.n_planned})"
                       + (f", 95% CI {_f(cell.ci[0])}–{_f(cell.ci[1])}" if cell.ci else
                          f", no CI ({cell.ci_note})" if cell.ci_note else ""))
            for seed, value in sorted(cell.values.items(), key=lambda kv: str(kv[0])):
                ci = cell.run_cis.get(seed)
                line = f"  seed {seed}: {_f(value)}" + (f", CI {_f(ci[0])}–{_f(ci[1])}" if ci else "")
                if seed in cell.seed_tests:
                    difference, p = cell.seed_tests[seed]
                    line += (f"; fixed-model test vs {data.column_label(base)} on the same test units: "
                             f"{difference:+.{DIGITS}f}, p {_p(p)}")
                out.append(line)
            if base is not None and cell.column != base and row != BLURB_ROW or (row == BLURB_ROW and cell.p_value):
                if cell.diff_mean is not None:
                    out.append(f"  difference to {data.column_label(base)}: {cell.diff_mean:+.{DIGITS}f}"
                               + (f", two-level bootstrap 95% CI {_f(cell.diff_ci[0])}–{_f(cell.diff_ci[1])}, p "
                                  f"{_p(cell.diff_p)}, corrected {_p(cell.diff_p_corrected)}" if cell.diff_ci else "")
                               + f"; sd over seeds {_f(cell.diff_sd)}, over test units {_f(cell.diff_unit_sd)}")
                out.append(f"  seed-level paired t-test vs {data.column_label(base)}: p {_p(cell.p_value)}, corrected "
                           f"{_p(cell.p_corrected)}" + (" (n too small: not shown as significant)" if cell.n_too_small
                                                        else "") + (f" [{cell.untested}]" if cell.untested else ""))
                out.append(f"  mark decided by: {cell.mark_test or 'no test'}"
                           + (": significant" if cell.significant else ""))
                if cell.fixed_p is not None:
                    out.append(f"  fixed-model test (these trained models, test units resampled, seeds held), pooled: "
                               f"{cell.fixed_diff:+.{DIGITS}f}, p {_p(cell.fixed_p)}, "
                               f"corrected {_p(cell.fixed_p_corrected)}")
                if cell.effect is not None:
                    span = f" (range {cell.seeds_range[0]:,}–{cell.seeds_range[1]:,})" if cell.seeds_range else ""
                    out.append(f"  seeds needed for {cell.effect:+.{DIGITS}f}: "
                               + (f"~{cell.seeds_needed:,}{span}" if cell.seeds_needed
                                  else "— (needs 2 seeds with spread)"))
            if cell.cost is not None and cell.cost.known:
                out.append(f"  compute: {flops_text(cell.cost.flops)}, {cell.cost.device_seconds:.1f} device-s, "
                           f"peak {memory_text(cell.cost.peak_memory_bytes)} ({cell.cost.counted} runs)")
    summary = seeds_summary(data)
    if summary:
        out += ["", summary]
    for column, cost in data.costs.items():
        if cost.stages:
            out.append(f"pretraining of {data.column_label(column)} ({', '.join(cost.stages)}): "
                       + (f"{flops_text(cost.pretrain.flops)}, {cost.pretrain.device_seconds:.1f} device-s"
                          if cost.pretrain.known else "unknown"))
    if data.agreement is not None:
        out += ["", data.agreement.line()]
        for r in data.agreement.rows:
            for p in r.pairs:
                relation = ">" if p.paper_says == "conclusion" else "~ (tie)"
                interval = "" if p.low is None else f", CI {_f(p.low)}–{_f(p.high)}"
                out.append(f"  {r.row}: paper {p.better} {relation} {p.worse} ({p.paper_gap:+.{DIGITS}f}); ours "
                           f"{p.ours:+.{DIGITS}f}{interval}: {p.verdict} ({p.method}, p {_p(p.p_value)}, corrected "
                           f"{_p(p.p_corrected)})")
    return "\n".join(out) + "\n"

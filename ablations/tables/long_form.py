"""`bioablate table --stats`: every statistic behind a table, cell by cell, in plain text -- per run its test
score and bootstrap CI, per seed the paired permutation test against the baseline, the pooled test, the
seed-level t-test raw and corrected, the seeds needed, the cost -- then the agreement with the paper."""

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
                    line += f"; vs {data.column_label(base)} on the same test units: {difference:+.{DIGITS}f}, p {_p(p)}"
                out.append(line)
            if base is not None and cell.column != base and row != BLURB_ROW or (row == BLURB_ROW and cell.p_value):
                out.append(f"  seed-level paired t-test vs {data.column_label(base)}: p {_p(cell.p_value)}, corrected "
                           f"{_p(cell.p_corrected)}" + (" (n too small: not shown as significant)" if cell.n_too_small
                                                        else "") + (f" [{cell.untested}]" if cell.untested else ""))
                if cell.example_p is not None:
                    out.append(f"  pooled over seeds, test units: {cell.example_diff:+.{DIGITS}f}, p {_p(cell.example_p)}, "
                               f"corrected {_p(cell.example_p_corrected)}")
                if cell.effect is not None:
                    out.append(f"  seeds needed for {cell.effect:+.{DIGITS}f}: "
                               + (f"~{cell.seeds_needed}" if cell.seeds_needed else "— (needs 2 seeds with spread)"))
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
                out.append(f"  {r.row}: paper {p.better} > {p.worse}; ours {p.ours:+.{DIGITS}f}: {p.verdict} "
                           f"({p.method}, p {_p(p.p_value)}, corrected {_p(p.p_corrected)})")
    return "\n".join(out) + "\n"

"""How far a table's orderings agree with the paper's (issue 34): per row (each task, and the BLURB row),

- Kendall's τ (scipy.stats.kendalltau, τ-b) between our column means and the paper's numbers, over the
  columns that have both;
- for each of the paper's pairwise conclusions (the paper has A above B) whose two cells we have, whether we
  *agree* (A above B, significantly), *disagree* (B above A, significantly) or *cannot tell* at our n. The test
  is the two-sided paired t-test over seeds where both cells have at least MIN_SEEDS common seeds, else the
  paired permutation test over the same test units (significance.py; None: untestable, counted as cannot
  tell); all the table's pairwise p values corrected together (`layout.correction`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from ablations.results import CORRECTIONS
from ablations.tables.inference import ALPHA, MIN_SEEDS, correct
from ablations.tables.stats import DIGITS, Cell, TableData

AGREE, DISAGREE, CANNOT_TELL = "agrees", "disagrees", "cannot tell"
SEEDS, EXAMPLES, UNTESTED = "seeds", "test examples", "untested"

ExampleTest = Callable[[Cell, Cell], Optional[float]]  # p of the pooled paired test over test units


@dataclass
class Pair:
    """One of the paper's conclusions: `better` above `worse` in `row`, and what ours says."""

    row: str
    better: str
    worse: str
    ours: float  # our mean difference better - worse (x100)
    method: str  # SEEDS | EXAMPLES | UNTESTED
    p_value: float | None = None
    p_corrected: float | None = None
    verdict: str = CANNOT_TELL


@dataclass
class RowAgreement:
    row: str
    tau: float | None  # None: fewer than 2 columns with both numbers, or a constant side
    columns: int
    pairs: list[Pair] = field(default_factory=list)

    def count(self, verdict: str) -> int:
        return sum(p.verdict == verdict for p in self.pairs)


@dataclass
class Agreement:
    rows: list[RowAgreement]
    correction: str

    def count(self, verdict: str) -> int:
        return sum(r.count(verdict) for r in self.rows)

    def line(self) -> str:
        """One line: τ per row and the counts, for the terminal and the table's notes."""
        # τ is undefined for a row with fewer than two columns to rank, or one side all tied ("—" is the
        # tables' sign of a missing cell, so it is spelt out here)
        parts = [f"{r.row} τ {'undefined' if r.tau is None else f'= {r.tau:.2f}'} "
                 f"({r.count(AGREE)}/{r.count(DISAGREE)}/{r.count(CANNOT_TELL)})" for r in self.rows]
        methods = sorted({p.method for r in self.rows for p in r.pairs})
        return (f"Agreement with the paper: Kendall's τ of our column means vs the paper's per row, and of the "
                f"paper's pairwise orderings how many we agree with / disagree with (p < {ALPHA}, "
                f"{CORRECTIONS[self.correction]}-corrected; tests: {', '.join(methods) or 'none'}) / cannot tell at "
                f"our n: {'; '.join(parts)}. Overall {self.count(AGREE)} agree, {self.count(DISAGREE)} disagree, "
                f"{self.count(CANNOT_TELL)} cannot tell.")

    def records(self) -> dict[str, dict]:
        """Per row: the CSV's agreement fields."""
        return {r.row: {"agreement_tau": r.tau, "agreement": f"{r.count(AGREE)} agree, {r.count(DISAGREE)} disagree, "
                        f"{r.count(CANNOT_TELL)} cannot tell",
                        "agreement_pairs": "; ".join(
                            f"{p.better}>{p.worse}: {p.verdict} ({p.method}"
                            + ("" if p.p_corrected is None else f", p={p.p_corrected:.3g}") + ")" for p in r.pairs)}
                for r in self.rows}


def _seed_p(a: Cell, b: Cell) -> float | None:
    from scipy.stats import ttest_rel

    seeds = sorted(set(a.values) & set(b.values))
    if len(seeds) < MIN_SEEDS:
        return None
    differences = [a.values[s] - b.values[s] for s in seeds]
    if max(differences) == min(differences):  # t undefined: left to the test over test examples
        return None
    return float(ttest_rel([a.values[s] for s in seeds], [b.values[s] for s in seeds]).pvalue)


def agreement(data: TableData, example_test: ExampleTest | None = None) -> Agreement | None:
    """The table's agreement with the paper's numbers; None where the table has none to compare."""
    from scipy.stats import kendalltau

    if not data.has_paper:
        return None
    rows, tested = [], []
    for row, cells in data.body_rows():
        both = [c for c in cells if c.mean is not None and c.paper is not None]
        tau = None
        if len(both) >= 2:
            value = kendalltau([c.mean for c in both], [c.paper for c in both]).statistic
            tau = None if value != value else float(value)  # nan: one side constant
        found = RowAgreement(row, tau, len(both))
        for a in both:
            for b in both:
                if round(a.paper, DIGITS) <= round(b.paper, DIGITS):
                    continue  # the paper's conclusions: strictly above
                pair = Pair(row, data.column_label(a.column), data.column_label(b.column), a.mean - b.mean, UNTESTED)
                p = _seed_p(a, b)
                if p is not None:
                    pair.method, pair.p_value = SEEDS, p
                elif example_test is not None:
                    p = example_test(a, b)
                    if p is not None:
                        pair.method, pair.p_value = EXAMPLES, p
                found.pairs.append(pair)
                if pair.p_value is not None:
                    tested.append(pair)
        if found.pairs or tau is not None:
            rows.append(found)
    for pair, p in zip(tested, correct([p.p_value for p in tested], data.layout.correction)):
        pair.p_corrected = p
        if p < ALPHA:
            pair.verdict = AGREE if pair.ours > 0 else DISAGREE
    return Agreement(rows, data.layout.correction) if rows else None

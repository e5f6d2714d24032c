"""How far a table's orderings agree with the paper's, per row: Kendall's τ-b (scipy.stats.kendalltau) of
the column means against the paper's numbers, and each pair of cells as the paper states it, a
conclusion where its gap exceeds the paper's noise (`paper_std`, else `paper_noise`), else a tie.

We agree with a conclusion where our difference is significant its way, disagree where our interval lies
wholly the other way, else cannot tell; a tie we agree with where our interval includes zero. The evidence
is significance.pair_tester's (a t-test over seeds for the BLURB row), corrected in separate families.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from ablations.results import BLURB_ROW
from ablations.tables.inference import ALPHA, MIN_SEEDS, correct
from ablations.tables.significance import FIXED_MODELS, Evidence
from ablations.tables.stats import DIGITS, Cell, TableData

AGREE, DISAGREE, CANNOT_TELL = "agrees", "disagrees", "cannot tell"
SEED_T, UNTESTED = "seeds (t-test)", "untested"
CONCLUSION, TIE = "conclusion", "tie"

PairTest = Callable[[Cell, Cell], Optional[Evidence]]  # significance.pair_tester


@dataclass
class Pair:
    """One pair of the paper's cells in `row`: `better` above `worse` (a tie: in the table's column order),
    what the paper says of it, and what ours says."""

    row: str
    better: str
    worse: str
    paper_gap: float  # the paper's better - worse (x100)
    paper_says: str  # CONCLUSION | TIE
    ours: float  # our mean difference better - worse (x100)
    method: str  # SEEDS_AND_UNITS | SEED_T | FIXED_MODELS | UNTESTED
    p_value: float | None = None
    p_corrected: float | None = None  # conclusions only
    low: float | None = None  # our 95% interval of better - worse, where the test gives one
    high: float | None = None
    verdict: str = CANNOT_TELL

    @property
    def family(self) -> str:
        return FIXED_MODELS if self.method == FIXED_MODELS else BLURB_ROW if self.row == BLURB_ROW else "seeds"


@dataclass
class RowAgreement:
    row: str
    tau: float | None  # None: fewer than 2 columns with both numbers, or a constant side
    columns: int
    pairs: list[Pair] = field(default_factory=list)

    def count(self, verdict: str, says: str | None = None) -> int:
        return sum(p.verdict == verdict and says in (None, p.paper_says) for p in self.pairs)


@dataclass
class Agreement:
    rows: list[RowAgreement]
    correction: str
    noise: float  # the paper's noise threshold (points) where it gives no standard deviation

    def count(self, verdict: str, says: str | None = None) -> int:
        return sum(r.count(verdict, says) for r in self.rows)

    def line(self) -> str:
        """One line for the table's notes: τ per row and the verdicts on the paper's pairs (how they are read:
        docs/statistics.md; per row: the CSV)."""
        # τ is undefined for a row with fewer than two columns to rank, or one side all tied
        taus = ", ".join(f"{r.row} {'undefined' if r.tau is None else f'{r.tau:.2f}'}" for r in self.rows)
        return (f"Agreement with the paper: Kendall's τ of our means vs its numbers, {taus}; its conclusions "
                f"{self.count(AGREE, CONCLUSION)} agree, {self.count(DISAGREE, CONCLUSION)} disagree, "
                f"{self.count(CANNOT_TELL, CONCLUSION)} cannot tell at our n; its ties {self.count(AGREE, TIE)} "
                f"agree, {self.count(DISAGREE, TIE)} disagree.")

    def records(self) -> dict[str, dict]:
        """Per row: the CSV's agreement fields."""
        def pair_text(p: Pair) -> str:
            relation = ">" if p.paper_says == CONCLUSION else "~"
            shown = [p.method] + ([] if p.low is None else [f"CI {p.low:.{DIGITS}f}–{p.high:.{DIGITS}f}"]) + \
                ([] if p.p_value is None else [f"p={p.p_value:.3g}"]) + \
                ([] if p.p_corrected is None else [f"corrected {p.p_corrected:.3g}"])
            return f"{p.better}{relation}{p.worse}: {p.verdict} ({', '.join(shown)})"

        return {r.row: {"agreement_tau": r.tau,
                        "agreement": f"{r.count(AGREE, CONCLUSION)} agree, {r.count(DISAGREE, CONCLUSION)} disagree, "
                                     f"{r.count(CANNOT_TELL, CONCLUSION)} cannot tell; ties {r.count(AGREE, TIE)} "
                                     f"agree, {r.count(DISAGREE, TIE)} disagree",
                        "agreement_pairs": "; ".join(pair_text(p) for p in r.pairs)}
                for r in self.rows}


def _seed_t(a: Cell, b: Cell) -> Evidence | None:
    """The paired t-test over the seeds both cells finished, with its 95% t-interval of the mean difference."""
    import statistics

    from scipy.stats import ttest_rel

    seeds = sorted(set(a.values) & set(b.values))
    if len(seeds) < MIN_SEEDS:
        return None
    differences = [a.values[s] - b.values[s] for s in seeds]
    if max(differences) == min(differences):  # t undefined: no evidence either way
        return None
    result = ttest_rel([a.values[s] for s in seeds], [b.values[s] for s in seeds])
    low, high = result.confidence_interval(1 - ALPHA)
    return Evidence(SEED_T, statistics.fmean(differences), float(result.pvalue), float(low), float(high))


def noise(data: TableData, a: Cell, b: Cell) -> float:
    """What the paper treats as noise between cells a and b (x100): the larger of its reported standard
    deviations of the two, where it gives one, else the table's threshold."""
    std = data.layout.paper_std.get(a.row, {})
    given = [float(std[c.column]) for c in (a, b) if c.column in std]
    return max(given) if given else float(data.layout.paper_noise)


def _evidence(a: Cell, b: Cell, test: PairTest | None) -> Evidence | None:
    if a.row != BLURB_ROW and test is not None:
        found = test(a, b)
        if found is not None:
            return found
    return _seed_t(a, b)


def agreement(data: TableData, test: PairTest | None = None) -> Agreement | None:
    """The table's agreement with the paper's numbers; None where the table has none to compare."""
    from scipy.stats import kendalltau

    if not data.has_paper:
        return None
    rows = []
    for row, cells in data.body_rows():
        # a cell at its floor or collapsed says nothing of the paper's ordering: left out of τ and the pairs
        both = [c for c in cells if c.mean is not None and c.paper is not None and c.learned]
        tau = None
        if len(both) >= 2:
            value = kendalltau([c.mean for c in both], [c.paper for c in both]).statistic
            tau = None if value != value else float(value)  # nan: one side constant
        found = RowAgreement(row, tau, len(both))
        for i, first in enumerate(both):
            for second in both[i + 1:]:
                # the paper's higher cell first (names of their own: the loops' cells stay as they are)
                a, b = (second, first) if round(first.paper, DIGITS) < round(second.paper, DIGITS) else (first, second)
                gap = a.paper - b.paper
                says = CONCLUSION if round(gap, DIGITS) > noise(data, a, b) else TIE
                pair = Pair(row, data.column_label(a.column), data.column_label(b.column), gap, says, a.mean - b.mean,
                            UNTESTED)
                evidence = _evidence(a, b, test)
                if evidence is not None:
                    pair.method, pair.p_value, pair.low, pair.high = (evidence.method, evidence.p_value, evidence.low,
                                                                      evidence.high)
                    if evidence.method != SEED_T:
                        pair.ours = evidence.difference
                found.pairs.append(pair)
        if found.pairs or tau is not None:
            rows.append(found)
    _decide(data, [p for r in rows for p in r.pairs])
    return Agreement(rows, data.layout.correction, float(data.layout.paper_noise)) if rows else None


def _decide(data: TableData, pairs: list[Pair]) -> None:
    for pair in pairs:  # a tie: agreed with where our interval (else our test at ALPHA) includes zero
        if pair.paper_says == TIE and pair.p_value is not None:
            includes_zero = pair.low <= 0 <= pair.high if pair.low is not None else pair.p_value >= ALPHA
            pair.verdict = AGREE if includes_zero else DISAGREE
    conclusions = [p for p in pairs if p.paper_says == CONCLUSION and p.p_value is not None
                   and not (p.method == FIXED_MODELS and p.p_value >= 1.0)]
    for family in dict.fromkeys(p.family for p in conclusions):
        members = [p for p in conclusions if p.family == family]
        for pair, p in zip(members, correct([p.p_value for p in members], data.layout.correction)):
            pair.p_corrected = p
            if p < ALPHA:
                pair.verdict = AGREE if pair.ours > 0 else DISAGREE


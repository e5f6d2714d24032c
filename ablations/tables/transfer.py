"""Which of the paper's ablation conclusions (Tables 9, 12, 13, 14) transfer to a cheaper setting, read from
our table's CSV: *holds*, *contradicted* or *cannot tell*.

Each (row, variant) comparison reads the sign of our difference and the table's significance mark:
WORSE / BETTER hold where the mark is in the claimed direction and are contradicted where it is in the
other; TIE holds where no mark is set; NO_GAIN is contradicted only where the variant is marked above.
A conclusion is contradicted where any comparison is, holds where all do, else cannot tell.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Optional

from ablations.results import BLURB_ROW
from ablations.tables.stats import DIGITS
from datamodules.floors import AT_FLOOR, COLLAPSED

WORSE, BETTER, TIE, NO_GAIN = "worse", "better", "tie", "no gain"
HOLDS, CONTRADICTED, CANNOT_TELL, NOT_RUN = "holds", "contradicted", "cannot tell", "not run"
DOES_NOT_APPLY = "does not apply"
DID_NOT_LEARN = "did not learn"  # the table ran, and every comparison has a side at its floor or collapsed
NOT_LEARNED = (AT_FLOOR, COLLAPSED)  # cell states left out of every comparison


@dataclass(frozen=True)
class Conclusion:
    """One of the paper's conclusions, as a claim on the differences `variants` - `baseline` of one table."""

    text: str
    table: str  # the paper's table ("Table 12")
    claim: str  # WORSE | BETTER | TIE | NO_GAIN
    variants: tuple[str, ...]
    baseline: str
    rows: tuple[str, ...] = ()  # the rows it covers; empty: every task row (not the BLURB row)


# Gu et al.'s conclusions of the ablation tables bioablate runs, each as the paper words it (Sections 4.3-4.5);
# the column names are the packaged experiments' (table9_proxy, table12_heads*, table13_tagging*,
# table14_relation*). Table 9's conclusions are about the BLURB score, the paper's summary of the tasks.
CONCLUSIONS: tuple[Conclusion, ...] = (
    Conclusion("PubMed from scratch beats general-domain pretraining continued on PubMed", "Table 9", WORSE,
               ("general-pubmed", "general-pubmed-vocab"), "pubmedbert", (BLURB_ROW,)),
    Conclusion("half the compute on PubMed alone is below the full compute", "Table 9", WORSE, ("pubmed-half",),
               "pubmedbert", (BLURB_ROW,)),
    Conclusion("a Bi-LSTM brings no gain over a linear layer", "Table 12", NO_GAIN, ("bilstm",), "linear"),
    Conclusion("the tagging schemes tie (BIOUL and IO as good as BIO)", "Table 13", TIE, ("bioul", "io"), "bio"),
    Conclusion("original text with [CLS] collapses relation extraction", "Table 14", WORSE, ("original-cls",),
               "dummify-cls"),
    Conclusion("original text with mention pooling is below dummification", "Table 14", WORSE,
               ("original-mention",), "dummify-cls"),
    Conclusion("with dummified entities, mention pooling does as well as [CLS]", "Table 14", TIE,
               ("dummify-mention",), "dummify-cls"),
    Conclusion("entity markers do as well as dummification, with any encoding", "Table 14", TIE,
               ("markers-cls", "markers-mention", "markers-start"), "dummify-cls"),
)


@dataclass(frozen=True)
class Comparison:
    row: str
    variant: str
    difference: float  # variant - baseline, x100, of the cells as the table prints them
    significant: bool  # the table's mark on the variant's cell
    paper_difference: Optional[float] = None


@dataclass(frozen=True)
class Verdict:
    claim: str
    verdict: str  # HOLDS | CONTRADICTED | CANNOT_TELL | NOT_RUN | DOES_NOT_APPLY | DID_NOT_LEARN
    comparisons: tuple[Comparison, ...] = ()
    decided: int = 0  # comparisons that hold or contradict

    def text(self) -> str:
        if self.verdict in (NOT_RUN, DOES_NOT_APPLY, DID_NOT_LEARN):
            return self.verdict
        against = [c for c in self.comparisons if _says(self.claim, c) == CONTRADICTED]
        detail = f"{self.decided} of {len(self.comparisons)}"
        if against:
            detail += "; against: " + ", ".join(f"{c.row} {c.variant} {c.difference:+.2f}" for c in against)
        return f"{self.verdict} ({detail})"


def _says(claim: str, c: Comparison) -> str:
    """What one comparison says of a claim."""
    if claim == TIE:
        return CONTRADICTED if c.significant else HOLDS
    if claim == NO_GAIN:
        return CONTRADICTED if c.significant and c.difference > 0 else HOLDS
    if not c.significant:
        return CANNOT_TELL
    below = c.difference < 0
    return HOLDS if below == (claim == WORSE) else CONTRADICTED


def classify(claim: str, comparisons: Iterable[Comparison]) -> Verdict:
    """The verdict of a conclusion from its comparisons (module docstring)."""
    found = tuple(comparisons)
    if not found:
        return Verdict(claim, NOT_RUN)
    said = [_says(claim, c) for c in found]
    decided = sum(s != CANNOT_TELL for s in said)
    verdict = CONTRADICTED if CONTRADICTED in said else HOLDS if all(s == HOLDS for s in said) else CANNOT_TELL
    return Verdict(claim, verdict, found, decided)


def _float(text: str) -> Optional[float]:
    return float(text) if text not in ("", None) else None


def learned(record: Mapping[str, str], floors: Mapping[str, float] | None = None) -> bool:
    """Whether a cell learned: its `cell_state`, or, in a CSV rendered before cells carried one, its interval's
    lower end (its mean, without one) above the floor of its tasks in `floors` (task -> floor x100; the BLURB
    row's under BLURB_ROW)."""
    if record.get("cell_state"):
        return record["cell_state"] not in NOT_LEARNED
    key = record["row"] if record["row"] == BLURB_ROW else record.get("tasks", "")
    floor = (floors or {}).get(key)
    low = _float(record.get("ci_low", ""))
    low = _float(record["mean"]) if low is None else low
    return floor is None or low > floor


def comparisons(conclusion: Conclusion, records: list[Mapping[str, str]],
                floors: Mapping[str, float] | None = None, keep_floor_cells: bool = False) -> list[Comparison]:
    """The conclusion's comparisons in a table's CSV records (rows missing a mean on either side are left
    out: a cell that did not run says nothing; so are those where either side did not learn, `learned`: a model
    that learned nothing says nothing of the variants)."""
    cells = {(r["row"], r["column"]): r for r in records}
    rows = conclusion.rows or tuple(dict.fromkeys(r["row"] for r in records if r["row"] != BLURB_ROW))
    found = []
    for row in rows:
        base = cells.get((row, conclusion.baseline))
        for variant in conclusion.variants:
            cell = cells.get((row, variant))
            if base is None or cell is None or _float(base["mean"]) is None or _float(cell["mean"]) is None:
                continue
            if not keep_floor_cells and not (learned(base, floors) and learned(cell, floors)):
                continue
            paper = (None if _float(cell.get("paper", "")) is None or _float(base.get("paper", "")) is None
                     else _float(cell["paper"]) - _float(base["paper"]))
            # the difference of the printed cells (rounded as the table prints them), as a reader subtracts them
            difference = round(_float(cell["mean"]), DIGITS) - round(_float(base["mean"]), DIGITS)
            found.append(Comparison(row, variant, difference,
                                    cell.get("significant") == "true", paper))
    return found


def read_records(csv_path: Path) -> list[dict[str, str]]:
    with open(csv_path, newline="") as f:
        return list(csv.DictReader(f))


def transfer_rows(settings: Mapping[str, Mapping[str, Path]], conclusions: Iterable[Conclusion] = CONCLUSIONS,
                  floors: Mapping[str, Mapping[str, float]] | None = None
                  ) -> list[tuple[Conclusion, dict[str, Verdict]]]:
    """For every conclusion, its verdict in each setting. `settings`: setting name -> {paper table ("Table
    13") -> the CSV of our table that tests it}: a table the setting does not name DOES_NOT_APPLY, a CSV not
    rendered yet is NOT_RUN. `floors`: per table folder, its tasks' floors, for CSVs without `cell_state`."""
    out = []
    for conclusion in conclusions:
        verdicts = {}
        for setting, tables in settings.items():
            path = tables.get(conclusion.table)
            if path is None:
                verdicts[setting] = Verdict(conclusion.claim, DOES_NOT_APPLY)
                continue
            records = read_records(path) if path.is_file() else []
            found = comparisons(conclusion, records, (floors or {}).get(path.parent.name))
            verdicts[setting] = classify(conclusion.claim, found)
            if not found and comparisons(conclusion, records, keep_floor_cells=True):
                verdicts[setting] = Verdict(conclusion.claim, DID_NOT_LEARN)
        out.append((conclusion, verdicts))
    return out


def paper_text(conclusion: Conclusion, paper: Mapping[str, Mapping[str, float]]) -> str:
    """The paper's own differences behind a conclusion, from its numbers as printed (row -> column -> value)."""
    rows = conclusion.rows or tuple(r for r in paper if r != BLURB_ROW)
    gaps = [paper[r][v] - paper[r][conclusion.baseline] for r in rows if r in paper and conclusion.baseline in paper[r]
            for v in conclusion.variants if v in paper[r]]
    if not gaps:
        return "—"
    low, high = min(gaps), max(gaps)
    return f"{low:+.2f}" if low == high else f"{low:+.2f} to {high:+.2f}"


def markdown(settings: Mapping[str, Mapping[str, Path]], paper: Mapping[str, Mapping[str, Mapping[str, float]]],
             conclusions: Iterable[Conclusion] = CONCLUSIONS, floors: Mapping[str, Mapping[str, float]] | None = None
             ) -> str:
    """The transfer table: one row per conclusion, the paper's differences (`paper`: paper table -> its numbers,
    row -> column -> value), then each setting's verdict."""
    names = list(settings)
    lines = ["| the paper's conclusion | table | paper's differences | " + " | ".join(names) + " |",
             "|---|---|---|" + "---|" * len(names)]
    for conclusion, verdicts in transfer_rows(settings, conclusions, floors):
        differences = paper_text(conclusion, paper.get(conclusion.table, {}))
        lines.append(f"| {conclusion.text} | {conclusion.table} | {differences}"
                     " | " + " | ".join(verdicts[n].text() for n in names) + " |")
    return "\n".join(lines) + "\n"

"""The transfer classification (ablations/tables/transfer.py) on a table rendered from a small store built by
hand: a real MLflow store of PubMedQA runs with known test predictions over 60 questions and 3 seeds, rendered
to its CSV as `bioablate table --out` does, then classified. Each variant's outcome against the baseline is
known by construction, so each conclusion's verdict is worked out by hand below."""

from __future__ import annotations

import pytest

from ablations.results import TableLayout
from ablations.tables.render import render_data
from ablations.tables.significance import annotate
from ablations.tables.stats import table_data
from ablations.tables.transfer import (
    BETTER,
    CANNOT_TELL,
    CONTRADICTED,
    DOES_NOT_APPLY,
    HOLDS,
    NO_GAIN,
    NOT_RUN,
    TIE,
    WORSE,
    Conclusion,
    comparisons,
    read_records,
    transfer_rows,
)
from tests.ablations.tables.test_agreement import cell_runs, log_runs

QUESTIONS = 60
# questions answered right per seed (the first `right` of 60, gold all "yes"): the baseline's, and variants that
# are far better on every seed (up), far worse (down), the baseline's own predictions (same), and a variant
# whose difference flips sign between seeds (+10, -12, +2 questions: a mean of 0, its interval over seeds spans zero)
RIGHT = {"base": [30, 32, 28], "up": [55, 57, 54], "down": [5, 6, 4], "same": [30, 32, 28], "flip": [40, 20, 30]}


def predictions(right: int) -> list[dict]:
    return [{"id": f"q{i}", "gold": "yes", "prediction": "yes" if i < right else "no"} for i in range(QUESTIONS)]


@pytest.fixture(scope="module")
def table_csv(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("transfer")
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    scores = {c: {"pubmedqa": [100 * r / QUESTIONS for r in rs]} for c, rs in RIGHT.items()}
    log_runs(uri, "transfer", scores, tmp_path, {c: [predictions(r) for r in rs] for c, rs in RIGHT.items()})
    layout = TableLayout(title="transfer", rows="task", columns="model", baseline="base", column_order=tuple(RIGHT))
    data = annotate(table_data(layout, cell_runs(uri, "transfer")), uri, tmp_path / "cache")
    path = tmp_path / "table.csv"
    path.write_text(render_data(data, "csv"))
    return path


def verdict(table_csv, claim: str, *variants: str):
    [(_, verdicts)] = transfer_rows({"ours": {"Table X": table_csv}},
                                    [Conclusion("hand-built", "Table X", claim, variants, "base")])
    return verdicts["ours"]


def test_the_table_marks_what_the_construction_says(table_csv):
    # the premise of the verdicts below: up and down marked, same and flip not
    marks = {c.variant: (c.significant, round(c.difference, 2)) for c in comparisons(
        Conclusion("all", "Table X", TIE, ("up", "down", "same", "flip"), "base"), read_records(table_csv))}
    assert marks == {"up": (True, 42.22), "down": (True, -41.67), "same": (False, 0.0), "flip": (False, 0.0)}


@pytest.mark.parametrize("claim,variants,expected,decided", [
    (WORSE, ("down",), HOLDS, 1),            # marked below the baseline
    (WORSE, ("up",), CONTRADICTED, 1),       # marked above it
    (WORSE, ("flip",), CANNOT_TELL, 0),      # not marked: the seeds disagree
    (WORSE, ("down", "flip"), CANNOT_TELL, 1),  # one holds, one cannot tell
    (BETTER, ("up",), HOLDS, 1),
    (BETTER, ("down", "up"), CONTRADICTED, 2),  # any comparison against it contradicts
    (TIE, ("same", "flip"), HOLDS, 2),       # neither marked: both intervals include zero
    (TIE, ("same", "up"), CONTRADICTED, 2),
    (NO_GAIN, ("down", "same", "flip"), HOLDS, 3),  # none is marked above the baseline
    (NO_GAIN, ("same", "up"), CONTRADICTED, 2),
])
def test_each_conclusions_verdict_is_the_hand_worked_one(table_csv, claim, variants, expected, decided):
    found = verdict(table_csv, claim, *variants)
    assert (found.verdict, found.decided, len(found.comparisons)) == (expected, decided, len(variants))


def test_a_variant_the_table_lacks_is_not_run_and_a_table_the_setting_lacks_does_not_apply(table_csv, tmp_path):
    assert verdict(table_csv, WORSE, "absent").verdict == NOT_RUN
    [(_, verdicts)] = transfer_rows({"none": {}, "unrendered": {"Table X": tmp_path / "no.csv"}},
                                    [Conclusion("c", "Table X", WORSE, ("down",), "base")])
    assert (verdicts["none"].verdict, verdicts["unrendered"].verdict) == (DOES_NOT_APPLY, NOT_RUN)


def test_the_cell_text_names_the_comparisons_against_the_conclusion(table_csv):
    assert verdict(table_csv, TIE, "same", "up").text() == "contradicted (2 of 2; against: pubmedqa up +42.22)"
    assert verdict(table_csv, WORSE, "down", "flip").text() == "cannot tell (1 of 2)"


def test_a_cell_at_its_floor_is_left_out_of_every_comparison(table_csv, tmp_path):
    """The same table with the 'up' cell marked as having learned nothing: the comparison it decided goes, and
    with it the verdict, which only comparisons between learned cells may decide."""
    import csv

    from ablations.tables.transfer import AT_FLOOR

    rows = list(csv.DictReader(table_csv.open()))
    assert verdict(table_csv, BETTER, "up").verdict == HOLDS
    for row in rows:
        if row["column"] == "up":
            row["cell_state"] = AT_FLOOR
    floored = tmp_path / "table.csv"
    with floored.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    found = verdict(floored, BETTER, "up")
    assert not found.comparisons and found.verdict != HOLDS
    assert verdict(floored, WORSE, "down").verdict == HOLDS  # the learned cells still decide

"""Floors in a table (stats.assign_states, render.py, agreement.py, transfer.py) on a real MLflow store built
by hand: PubMedQA runs over 60 questions whose gold is 33 "yes" and 27 "no", so that saying "yes" to every
question (the majority class) scores 55.00. Per column, 3 seeds:
- `base` and `up` learned (about 85% and 93% right);
- `near` right on 33-35 questions: above the floor on average, but its interval reaches 55.00 (at floor);
- `yes` says "yes" to every question: its runs are tagged collapsed (one prediction for every instance).
Each cell's state, mark, boldness and part in the agreement and transfer are known by construction."""

from __future__ import annotations

import csv
import io
import json

import pytest
from mlflow.tracking import MlflowClient

from ablations.results import FINISHED, CellRun, TableLayout
from ablations.tables.publish import table_statistics
from ablations.tables.render import render_data
from ablations.tables.transfer import CONTRADICTED, NO_GAIN, NOT_RUN, Conclusion, classify, comparisons
from datamodules.floors import AT_FLOOR, COLLAPSED, LEARNED

QUESTIONS, YES = 60, 33
FLOOR = 100 * YES / QUESTIONS  # 55.00: "yes" to every question
# questions answered right per seed; "yes" is special: "yes" to all, so right on the 33 "yes" questions
RIGHT = {"base": [51, 50, 52], "up": [56, 55, 57], "near": [34, 33, 35], "yes": [YES, YES, YES]}
PAPER = {"base": 70.0, "up": 75.0, "near": 60.0, "yes": 50.0}


def _records(column: str, right: int) -> list[dict]:
    gold = ["yes"] * YES + ["no"] * (QUESTIONS - YES)
    if column == "yes":
        return [{"id": f"q{i}", "gold": g, "prediction": "yes"} for i, g in enumerate(gold)]
    wrong = {"yes": "no", "no": "yes"}
    return [{"id": f"q{i}", "gold": g, "prediction": g if i < right else wrong[g]} for i, g in enumerate(gold)]


def _store(uri: str, tmp_path, collapsed: dict[tuple[str, int], bool]) -> list[CellRun]:
    """The runs logged as a fine-tuning run logs them (test/score, test/floor, test_state, test_floor_kind,
    predictions) and read back as the planner's cell runs."""
    client = MlflowClient(uri)
    experiment = client.create_experiment("floors", artifact_location=str(tmp_path / "artifacts"))
    out = []
    for column, rights in RIGHT.items():
        for seed, right in enumerate(rights):
            records = _records(column, right)
            score = sum(r["gold"] == r["prediction"] for r in records) / QUESTIONS
            state = COLLAPSED if collapsed.get((column, seed)) else LEARNED if score > FLOOR / 100 else AT_FLOOR
            run = client.create_run(experiment, tags={"test_state": state, "test_floor_kind": "majority class (yes)"})
            client.log_metric(run.info.run_id, "test/score", score)
            client.log_metric(run.info.run_id, "test/floor", YES / QUESTIONS)
            path = tmp_path / f"{column}-{seed}" / "test_predictions.jsonl"
            path.parent.mkdir(parents=True)
            path.write_text("".join(json.dumps(r) + "\n" for r in records))
            client.log_artifact(run.info.run_id, str(path))
            client.set_terminated(run.info.run_id)
            out.append(CellRun("pubmedqa", column, "pubmedqa", seed, FINISHED, score, run_id=run.info.run_id,
                               floor=YES / QUESTIONS, floor_kind="majority class (yes)", state=state))
    return out


LAYOUT = TableLayout(title="floors", rows="task", columns="model", baseline="base", column_order=tuple(RIGHT),
                     paper={"pubmedqa": PAPER})
EVERY_SEED_OF_YES = {("yes", seed): True for seed in range(3)}


def _table(tmp_path, collapsed: dict[tuple[str, int], bool]):
    """The table's numbers with every statistic, as `bioablate table` computes them."""
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    return table_statistics(LAYOUT, _store(uri, tmp_path, collapsed), uri, tmp_path / "cache")


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return _table(tmp_path_factory.mktemp("floors"), EVERY_SEED_OF_YES)


def test_each_cell_has_the_floor_and_the_state_the_construction_gives(table):
    states = {c: table.cell("pubmedqa", c).state for c in RIGHT}
    assert states == {"base": LEARNED, "up": LEARNED, "near": AT_FLOOR, "yes": COLLAPSED}
    assert [table.cell("pubmedqa", c).floor for c in RIGHT] == [pytest.approx(FLOOR)] * len(RIGHT)
    near = table.cell("pubmedqa", "near")
    assert near.mean > FLOOR and near.ci[0] <= FLOOR  # above on average, its interval reaching the floor


def test_cells_that_did_not_learn_are_never_marked_or_bold(table):
    yes, near, up = (table.cell("pubmedqa", c) for c in ("yes", "near", "up"))
    # "yes" is far below the baseline on every seed: a difference the bootstrap resolves, left unmarked
    assert yes.diff_p is not None and yes.diff_p < 0.01 and not yes.significant and yes.diff_p_corrected is None
    assert not near.significant and not near.best and not yes.best
    assert up.best and up.significant  # the one learned variant: bold, and marked against the baseline
    markdown = render_data(table, "markdown")
    row = next(line for line in markdown.splitlines() if line.startswith("| pubmedqa"))
    cells = [c.strip() for c in row.split("|")[2:-1]]
    assert cells[2].startswith("56.7 ± 1.7⊥") and cells[3].startswith("55.0 ± 0.0⊥")
    assert "**" not in cells[2] + cells[3] and "†" not in cells[2] + cells[3]
    assert cells[-1] == "55.0 (majority class (yes))"  # the floor column
    assert sum(line.startswith("⊥: did not learn") for line in markdown.splitlines()) == 1  # a one-line legend
    assert "\\bot" in render_data(table, "latex")


def test_the_csv_carries_floor_kind_and_state(table):
    rows = {r["column"]: r for r in csv.DictReader(io.StringIO(render_data(table, "csv")))}
    assert {c: (r["floor"], r["floor_kind"], r["cell_state"]) for c, r in rows.items()} == {
        c: ("55.0", "majority class (yes)", s) for c, s in
        (("base", LEARNED), ("up", LEARNED), ("near", AT_FLOOR), ("yes", COLLAPSED))}


def test_agreement_leaves_floor_cells_out(table):
    [row] = table.agreement.rows
    assert row.columns == 2  # base and up: near and yes are at their floor
    assert [(p.better, p.worse) for p in row.pairs] == [("up", "base")]


def test_transfer_leaves_floor_cells_out_and_a_collapse_changes_the_cell(table, tmp_path):
    claim = Conclusion("no gain from the variant", "Table X", NO_GAIN, ("near", "yes"), "base")
    records = list(csv.DictReader(io.StringIO(render_data(table, "csv"))))
    assert comparisons(claim, records) == []  # both variants did not learn: nothing to compare
    assert classify(claim.claim, comparisons(claim, records)).verdict == NOT_RUN
    # one run flipped from learned to collapsed: `up` had 1 of 3 seeds collapsed (still learned, marked above the
    # baseline: "no gain" contradicted); with 2 of 3 the cell is collapsed and says nothing of the conclusion
    up = Conclusion("no gain from up", "Table X", NO_GAIN, ("up",), "base")
    verdicts = []
    for collapsed_seeds in ((0,), (0, 1)):
        flipped = _table(tmp_path / f"{len(collapsed_seeds)}", {**EVERY_SEED_OF_YES,
                                                                **{("up", s): True for s in collapsed_seeds}})
        records = list(csv.DictReader(io.StringIO(render_data(flipped, "csv"))))
        verdicts.append((flipped.cell("pubmedqa", "up").state, classify(up.claim, comparisons(up, records)).verdict))
    assert verdicts == [(LEARNED, CONTRADICTED), (COLLAPSED, NOT_RUN)]

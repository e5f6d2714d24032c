"""Agreement with the paper (issue 34, item 2), on a small store built by hand: a real MLflow SQLite store with
runs of known seeds and known scores (and, for the table with too few seeds, their test predictions), read
back as a table's cell runs; Kendall's τ and the agree / disagree / cannot-tell counts checked against
figures worked out by hand below."""

from __future__ import annotations

import json
import math

import pytest
from mlflow.tracking import MlflowClient

from ablations.results import FINISHED, CellRun, TableLayout
from ablations.tables.agreement import AGREE, CANNOT_TELL, DISAGREE, EXAMPLES, SEEDS, agreement
from ablations.tables.render import render_data
from ablations.tables.significance import annotate, example_tester
from ablations.tables.stats import table_data

# x100 per seed 0..3. bc5-chem: ours B > A > C where the paper has A > B > C; gad: ours within noise.
SCORES = {
    "A": {"bc5-chem": [80, 81, 82, 81.5], "gad": [60, 62, 61, 60.5]},
    "B": {"bc5-chem": [85, 86.5, 87.5, 86], "gad": [61, 60, 63, 61.5]},
    "C": {"bc5-chem": [70, 71, 73, 71], "gad": [61, 61, 60, 60]},
}
PAPER = {"bc5-chem": {"A": 90.0, "B": 88.0, "C": 85.0}, "gad": {"A": 80.0, "B": 80.0, "C": 82.0},
         "BLURB score": {"A": 85.0, "B": 84.0, "C": 83.5}}
LAYOUT = TableLayout(title="hand-built", rows="task", columns="model", column_order=("A", "B", "C"),
                     paper=PAPER, blurb_row=True)


def log_runs(uri: str, experiment: str, scores: dict, tmp_path, predictions: dict | None = None) -> None:
    client = MlflowClient(uri)
    experiment_id = client.create_experiment(experiment, artifact_location=str(tmp_path / "artifacts" / experiment))
    for column, by_task in scores.items():
        for task, values in by_task.items():
            for seed, value in enumerate(values):
                run = client.create_run(experiment_id, tags={"task": task, "column": column, "seed": str(seed)})
                client.log_metric(run.info.run_id, "test/score", value / 100)
                if predictions is not None:
                    path = tmp_path / f"{column}-{task}-{seed}" / "test_predictions.jsonl"
                    path.parent.mkdir(parents=True)
                    path.write_text("".join(json.dumps(r) + "\n" for r in predictions[column]))
                    client.log_artifact(run.info.run_id, str(path))
                client.set_terminated(run.info.run_id)


def cell_runs(uri: str, experiment: str) -> list[CellRun]:
    """The store's runs as the table's cell runs (what the planner's `collect` gives for planned cells)."""
    client = MlflowClient(uri)
    found = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    return [CellRun(r.data.tags["task"], r.data.tags["column"], r.data.tags["task"], int(r.data.tags["seed"]),
                    FINISHED, r.data.metrics["test/score"], run_id=r.info.run_id) for r in found]


@pytest.fixture
def uri(tmp_path):
    return f"sqlite:///{tmp_path / 'mlruns.db'}"


def test_tau_and_pairwise_verdicts_over_seeds_match_the_hand_computation(uri, tmp_path):
    log_runs(uri, "by-seeds", SCORES, tmp_path)
    data = table_data(LAYOUT, cell_runs(uri, "by-seeds"))
    found = agreement(data)
    rows = {r.row: r for r in found.rows}
    # bc5-chem: paper A > B > C, ours B (86.25) > A (81.125) > C (71.25): pairs AB discordant, AC and BC
    # concordant -> tau = (2 - 1) / 3
    assert rows["bc5-chem"].tau == pytest.approx(1 / 3)
    # gad: the paper ties A and B (no pair of theirs), C above both; ours C (60.5) < A (60.875) < B (61.375):
    # tau-b = (0 - 2) / sqrt((3 - 0) * (3 - 1))
    assert rows["gad"].tau == pytest.approx(-2 / math.sqrt(6))
    # BLURB (mean of the NER and RE type scores per seed): A 71.0, B 73.81, C 65.88; paper A > B > C
    assert rows["BLURB score"].tau == pytest.approx(1 / 3)
    # eight tested conclusions, Holm over all eight: raw p of bc5-chem's three and BLURB's three are below
    # 0.0065 (x3 at most for the largest: 0.019), gad's two above 0.39 -> per row (agree, disagree, cannot tell)
    verdicts = {r.row: (r.count(AGREE), r.count(DISAGREE), r.count(CANNOT_TELL)) for r in found.rows}
    assert verdicts == {"bc5-chem": (2, 1, 0), "gad": (0, 0, 2), "BLURB score": (2, 1, 0)}
    assert (found.count(AGREE), found.count(DISAGREE), found.count(CANNOT_TELL)) == (4, 2, 2)
    by_pair = {(p.row, p.better, p.worse): p for r in found.rows for p in r.pairs}
    assert by_pair[("bc5-chem", "A", "B")].verdict == DISAGREE and by_pair[("bc5-chem", "A", "B")].method == SEEDS
    assert by_pair[("gad", "C", "A")].verdict == CANNOT_TELL and ("gad", "A", "B") not in by_pair
    # where it shows: one line in the markdown, the fields in every CSV record of the row
    data.agreement = found
    md = render_data(data)
    assert "Overall 4 agree, 2 disagree, 2 cannot tell." in md and "bc5-chem τ = 0.33 (2/1/0)" in md
    csv_text = render_data(data, "csv")
    assert "2 agree, 1 disagree, 0 cannot tell" in csv_text and "A>B: disagrees (seeds" in csv_text


def test_below_three_seeds_the_paired_test_over_test_examples_decides(uri, tmp_path):
    # two seeds of pubmedqa: A answers all 40 right, B gets 10 of them wrong; the paper has A (60) > B (55)
    gold = [{"id": f"q{i}", "gold": "yes" if i % 2 else "no"} for i in range(40)]
    predictions = {"A": [{**g, "prediction": g["gold"]} for g in gold],
                   "B": [{**g, "prediction": ("no" if g["gold"] == "yes" else "yes") if i < 10 else g["gold"]}
                         for i, g in enumerate(gold)]}
    log_runs(uri, "by-examples", {"A": {"pubmedqa": [100, 100]}, "B": {"pubmedqa": [75, 75]}}, tmp_path, predictions)
    layout = TableLayout(title="two seeds", rows="task", columns="model", column_order=("A", "B"), baseline="B",
                         paper={"pubmedqa": {"A": 60.0, "B": 55.0}})
    data = table_data(layout, cell_runs(uri, "by-examples"))
    annotate(data, uri, tmp_path / "cache")
    cell = data.cell("pubmedqa", "A")
    assert cell.n_too_small and not cell.significant and cell.example_significant
    test = example_tester(data, uri, tmp_path / "cache")
    assert not test.cache.pending and agreement(data, test).rows  # baseline pairs: annotate cached them
    found = agreement(data, test)
    [row] = found.rows
    [pair] = row.pairs
    assert row.tau == pytest.approx(1.0) and (pair.verdict, pair.method) == (AGREE, EXAMPLES)
    # 10 differing questions per seed, 20 pooled: of 2^20 swaps only the identity reaches the observed
    # difference, so the p of 1000 random permutations is its floor, two-sided 2 x 1 / (1000 + 1)
    assert pair.p_value == pytest.approx(2 / 1001)

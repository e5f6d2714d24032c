"""Agreement with the paper, on a small store built by hand: a real MLflow SQLite store with runs of known
seeds and known scores (and, for the table with too few seeds, their test predictions), read back as a
table's cell runs; Kendall's τ, the paper's conclusions and ties (its gaps against its own noise), and the
agree / disagree / cannot-tell counts checked against figures worked out by hand below."""

from __future__ import annotations

import json
import math

import pytest
from mlflow.tracking import MlflowClient

from ablations.results import FINISHED, CellRun, TableLayout
from ablations.tables.agreement import AGREE, CANNOT_TELL, CONCLUSION, DISAGREE, SEED_T, TIE, agreement
from ablations.tables.render import render_data
from ablations.tables.significance import FIXED_MODELS, annotate, pair_tester
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
                    records = predictions[column]  # one list for every seed, or one per seed
                    records = records[seed] if records and isinstance(records[0], list) else records
                    path.write_text("".join(json.dumps(r) + "\n" for r in records))
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
    # the paper's pairs against its noise (0.5 points, no std given): bc5-chem's three gaps (2, 5, 3) and gad's
    # C above A and B (2) are conclusions, gad's A = B a tie; BLURB's A > B (1), A > C (1.5) conclusions, B vs
    # C (0.5, not above 0.5) a tie. Paired t-tests over the 4 seeds; Holm over the task rows' five
    # conclusions (raw p 0.00022, 0.000071, 0.0000056, 0.486, 0.391 -> 0.00067, 0.00028, 0.000028, 0.78, 0.78)
    # and apart over the BLURB row's two (0.0065, 0.00022 -> 0.0065, 0.00045)
    verdicts = {r.row: (r.count(AGREE, CONCLUSION), r.count(DISAGREE, CONCLUSION), r.count(CANNOT_TELL, CONCLUSION),
                        r.count(AGREE, TIE), r.count(DISAGREE, TIE)) for r in found.rows}
    assert verdicts == {"bc5-chem": (2, 1, 0, 0, 0), "gad": (0, 0, 2, 1, 0), "BLURB score": (1, 1, 0, 0, 1)}
    by_pair = {(p.row, p.better, p.worse): p for r in found.rows for p in r.pairs}
    assert by_pair[("bc5-chem", "A", "B")].verdict == DISAGREE and by_pair[("bc5-chem", "A", "B")].method == SEED_T
    assert by_pair[("bc5-chem", "A", "B")].p_corrected == pytest.approx(3 * 0.00022290844, rel=1e-6)
    assert by_pair[("gad", "C", "A")].verdict == CANNOT_TELL
    # gad A = B in the paper: ours A - B -0.5, t-interval -3.26 to 2.26 holds zero: agreed with as a tie
    tie = by_pair[("gad", "A", "B")]
    assert (tie.paper_says, tie.verdict, tie.p_corrected) == (TIE, AGREE, None)
    assert tie.low == pytest.approx(-3.2561, abs=1e-4) and tie.high == pytest.approx(2.2561, abs=1e-4)
    # BLURB B vs C, a 0.5-point tie in the paper: ours 7.94, interval 6.84 to 9.03, excludes zero
    assert by_pair[("BLURB score", "B", "C")].paper_says == TIE and \
        by_pair[("BLURB score", "B", "C")].verdict == DISAGREE
    assert by_pair[("BLURB score", "A", "B")].p_corrected == pytest.approx(0.0064764, rel=1e-4)  # its own family
    assert (found.count(AGREE, CONCLUSION), found.count(DISAGREE, CONCLUSION),
            found.count(CANNOT_TELL, CONCLUSION)) == (3, 2, 2)
    # where it shows: one paragraph in the markdown, the fields in every CSV record of the row
    data.agreement = found
    md = render_data(data)
    assert "its conclusions 3 agree, 2 disagree, 2 cannot tell at our n; its ties 1 agree, 1 disagree." in md
    assert "Kendall's τ of our means vs its numbers, " in md and "bc5-chem 0.33" in md
    csv_text = render_data(data, "csv")
    assert "2 agree, 1 disagree, 0 cannot tell" in csv_text and "A>B: disagrees (seeds (t-test)" in csv_text
    assert "A~B: agrees (seeds (t-test), CI -3.26–2.26" in csv_text


def three_seed_runs(column_values: dict[str, list[float]]) -> list[CellRun]:
    return [CellRun("bc5-chem", c, "bc5-chem", s, FINISHED, v / 100, run_id=f"{c}{s}")
            for c, values in column_values.items() for s, v in enumerate(values)]


def test_a_paper_gap_within_its_noise_is_a_tie_and_our_interval_on_the_other_side_disagrees():
    """The paper: A 80.00, B 79.98 (a 0.02-point gap: a tie, at a 0.5-point threshold) and C 78.00 (2 points
    below A: a conclusion). Ours over 3 seeds: A and B alike, C 3 points above A on every seed. A vs B: a tie
    we agree with (our interval holds zero); A above C: our interval lies wholly on the other side, a
    disagreement; B above C (1.98 points): the same. With the paper's own standard deviation of 3 points for
    A, its 2-point A-C gap is noise: a tie, which our interval (excluding zero) disagrees with."""
    runs = three_seed_runs({"A": [70.0, 71.0, 72.5], "B": [70.2, 70.8, 72.6], "C": [73.0, 74.2, 75.4]})
    layout = TableLayout(title="noise", rows="task", columns="model", column_order=("A", "B", "C"),
                         paper={"bc5-chem": {"A": 80.0, "B": 79.98, "C": 78.0}})
    found = agreement(table_data(layout, runs))
    pairs = {(p.better, p.worse): p for p in found.rows[0].pairs}
    assert set(pairs) == {("A", "B"), ("A", "C"), ("B", "C")}
    assert (pairs[("A", "B")].paper_says, pairs[("A", "B")].verdict) == (TIE, AGREE)
    assert pairs[("A", "B")].low < 0 < pairs[("A", "B")].high
    for pair in (pairs[("A", "C")], pairs[("B", "C")]):
        assert (pair.paper_says, pair.verdict) == (CONCLUSION, DISAGREE) and pair.high < 0
    # differences A - C: -3, -3.2, -2.9: t = -3.033 / (0.1528 / sqrt 3) = -34.4, p 0.00084; Holm over 2 conclusions
    assert pairs[("A", "C")].p_corrected < 0.05
    with_std = TableLayout(**{**layout.__dict__, "paper_std": {"bc5-chem": {"A": 3.0}}})
    pairs = {(p.better, p.worse): p for p in agreement(table_data(with_std, runs)).rows[0].pairs}
    assert (pairs[("A", "C")].paper_says, pairs[("A", "C")].verdict) == (TIE, DISAGREE)
    assert (pairs[("B", "C")].paper_says, pairs[("B", "C")].verdict) == (CONCLUSION, DISAGREE)
    # a threshold of 0.01 points reads the 0.02 gap as the paper's conclusion: ours cannot tell it
    strict = TableLayout(**{**layout.__dict__, "paper_noise": 0.01})
    pairs = {(p.better, p.worse): p for p in agreement(table_data(strict, runs)).rows[0].pairs}
    assert (pairs[("A", "B")].paper_says, pairs[("A", "B")].verdict) == (CONCLUSION, CANNOT_TELL)


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
    assert cell.n_too_small and not cell.significant and cell.fixed_significant
    test = pair_tester(data, uri, tmp_path / "cache")
    assert not test.cache.pending and agreement(data, test).rows  # baseline pairs: annotate cached them
    found = agreement(data, test)
    [row] = found.rows
    [pair] = row.pairs
    assert row.tau == pytest.approx(1.0) and (pair.verdict, pair.method) == (AGREE, FIXED_MODELS)
    # 10 differing questions per seed, 20 pooled: of 2^20 swaps only the identity reaches the observed
    # difference, so the p of 1000 random permutations is its floor, two-sided 2 x 1 / (1000 + 1)
    assert pair.p_value == pytest.approx(2 / 1001) and pair.ours == pytest.approx(25.0)


def test_every_pair_of_a_wide_row_is_compared_once(uri, tmp_path):
    """Five columns the paper ranks in the reverse of the table's order: ordering each pair (the paper's higher
    cell first) by swapping the loop's own cells compared the 4 neighbouring pairs alone, several times each."""
    columns = ("A", "B", "C", "D", "E")
    scores = {c: {"gad": [60 + i, 61 + i, 62 + i]} for i, c in enumerate(columns)}
    paper = {"gad": {c: 70.0 + 2 * i for i, c in enumerate(columns)}}  # E highest, A lowest
    log_runs(uri, "wide", scores, tmp_path)
    layout = TableLayout(title="wide", rows="task", columns="model", column_order=columns, paper=paper)
    [row] = agreement(table_data(layout, cell_runs(uri, "wide"))).rows
    pairs = [frozenset((p.better, p.worse)) for p in row.pairs]
    assert len(pairs) == 10 and set(pairs) == {frozenset((a, b)) for i, a in enumerate(columns)
                                               for b in columns[i + 1:]}
    assert all(paper["gad"][p.better] > paper["gad"][p.worse] for p in row.pairs)  # the paper's higher cell first

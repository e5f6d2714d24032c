"""Running a packaged experiment YAML under the micro profile into a shared store and checking what it
left there: used by tests/e2e/test_experiments.py (Gu et al.'s tables) and
tests/e2e/test_seed_paper_experiments.py (BioBERT's, BioALBERT's and Bio-ELECTRA's)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from mlflow.tracking import MlflowClient

from ablations import results
from ablations.cli import main
from ablations.experiment import collect, load_experiment

SEED_PAPER_PREFIXES = ("biobert_table", "bioalbert_", "bioelectra_")


def runs_in_store(tracking_uri: str, kind: str | None = None) -> list:
    """The store's runs of one `kind` (tag), or of every kind."""
    client = MlflowClient(tracking_uri)
    out = []
    for experiment in client.search_experiments():
        out += client.search_runs([experiment.experiment_id], f"tags.kind = '{kind}'" if kind else "",
                                  max_results=5000)
    return out


@contextmanager
def single_threaded() -> Iterator[None]:
    """Micro models are too small to gain from intra-op threads, and a second thread spinning on a shared
    CI core costs more than it gives: the experiment modules' runs go single-threaded."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run_under_micro_and_check(path: Path, shared_work: Path, data_dir: Path, capsys) -> None:
    """`bioablate run PATH --profile micro` into `shared_work`: it exits 0, prints and writes its table, every
    cell finished with a value, and no pretraining or fine-tuning run is in the store twice (shared models
    and cells are computed once across the experiments run into it so far)."""
    code = main(["run", str(path), "--profile", "micro", "--work-dir", str(shared_work), "--data-dir", str(data_dir)])
    out = capsys.readouterr().out
    assert code == 0, out
    experiment = load_experiment(path, profile="micro", data_dir=str(data_dir), work_dir=str(shared_work))
    _, tracking_uri = experiment.store()
    assert experiment.layout.title in out and f"MLflow: {tracking_uri}" in out
    assert (shared_work / "tables" / f"{experiment.name}-micro" / "table.md").is_file()
    if experiment.kind == "finetune":
        cells = collect(experiment)
        assert cells and all(c.status == results.FINISHED and c.value is not None for c in cells), \
            [(c.row, c.column, c.status, c.reason) for c in cells if c.status != results.FINISHED]
        assert len(cells) == len(experiment.cells()) * max(1, len(experiment.layout.metrics))  # a metric axis
    if experiment.name in STATISTICS_CHECKED:
        check_statistics(path, experiment, shared_work, data_dir, capsys)
    assert stored_twice(tracking_uri) == []


def stored_twice(tracking_uri: str) -> list[tuple[str, str, int]]:
    """(kind, fingerprint, runs) of every pretraining or fine-tuning fingerprint the SQLite store holds more
    than one active run of: read from its tags table in one query, where MLflow's search would load every
    run of a store that grows to ~250 runs with all its metrics and params, after each experiment."""
    import sqlite3

    database = tracking_uri.removeprefix("sqlite:///")
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
        return connection.execute("""
            SELECT kind.value, fingerprint.value, COUNT(*) FROM runs
            JOIN tags AS kind ON kind.run_uuid = runs.run_uuid AND kind.key = 'kind'
            JOIN tags AS fingerprint ON fingerprint.run_uuid = runs.run_uuid AND fingerprint.key = 'fingerprint'
            WHERE runs.lifecycle_stage = 'active' AND kind.value IN ('pretrain', 'finetune')
            GROUP BY kind.value, fingerprint.value HAVING COUNT(*) > 1""").fetchall()


# The tables whose statistics are checked end to end (issue 35): the quick start (2 seeds under micro) and
# Table 13 (1 seed, a pretraining stage)
STATISTICS_CHECKED = ("quickstart", "table13_tagging")


def _md_cells(markdown: str, columns: list[str], baseline: str) -> dict[tuple[str, str], str]:
    """(row, column value) -> the markdown cell's text; (row, "Δ " + column) -> its difference to the baseline.
    A body row is its label, a cell per column, a Δ per compared column, then the count and floor columns."""
    import re

    compared = [c for c in columns if c != baseline]
    out = {}
    for line in markdown.splitlines():
        parts = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(parts) > len(columns) + len(compared) and not parts[0].startswith(("---", "*")):
            out.update({(parts[0].strip("*"), column): text for column, text in zip(columns, parts[1:])})
            out.update({(parts[0].strip("*"), f"Δ {column}"): text
                        for column, text in zip(compared, parts[1 + len(columns):])})
    return out


def check_statistics(path: Path, experiment, shared_work: Path, data_dir: Path, capsys) -> None:
    """The table shows its statistics: a two-level bootstrap CI per cell, marks corrected across the table
    (none below 3 seeds: "n too small"), the difference to the baseline with its interval and the fixed-model
    test with its corrected p in the CSV (never a mark), the seeds needed, compute columns (and rows with
    --cost), the agreement paragraph; a re-render reads every resampling result from the cache."""
    import csv

    from ablations.tables.inference import ALPHA

    out_dir = shared_work / "tables" / f"{experiment.name}-micro"
    md = (out_dir / "table.md").read_text()
    records = list(csv.DictReader((out_dir / "table.csv").open()))
    baseline = experiment.layout.baseline
    compared = [r for r in records if r["column"] != baseline and r["mean"] and r["row"] != results.BLURB_ROW]
    assert compared and all(r["ci_low"] and r["ci_high"] or r["ci_note"] for r in records), records
    # the intervals, p values and seeds needed live in the CSV; table.md says so and names the test
    assert any(r["ci_low"] for r in records) and "Intervals, p values and seeds needed: table.csv" in md
    assert "Holm-corrected" in md and "two-level bootstrap" in md and "never marked below 3 seeds, as here" in md
    for r in compared:  # micro plans fewer than 3 seeds: never marked
        assert r["n_too_small"] == "true" and r["significant"] != "true" and r["p_corrected"] == ""
        assert r["diff_mean"] and (r["diff_ci_low"] and r["diff_ci_high"] or r["ci_note"]), r
        assert r["fixed_model_p"], r
        if r["fixed_model_p_corrected"]:  # degenerate tests (p = 1) are left out of the family
            assert (r["fixed_model_significant"] == "true") == (float(r["fixed_model_p_corrected"]) < ALPHA)
            assert float(r["fixed_model_p_corrected"]) >= float(r["fixed_model_p"])
        else:  # a degenerate test, or a cell that did not learn (never corrected with the others)
            assert float(r["fixed_model_p"]) == 1.0 or r["cell_state"] in ("at floor", "collapsed"), r
        assert r["effect"]  # the paper's difference to the baseline
    cells = _md_cells(md, list(experiment.layout.column_order), baseline)
    for r in compared:  # a cell is its mean ± sd and marks; its Δ column is the CSV's mean difference
        text = cells[(r["row"], r["column"])]
        assert text.startswith(f"{float(r['mean']):.1f}") and "†" not in text and "CI" not in text, text
        assert cells[(r["row"], f"Δ {r['column']}")] == f"{float(r['diff_mean']):+.1f}", (cells, r)
    states = {(r["row"], r["column"]): r["cell_state"] for r in records}
    if experiment.name == "quickstart" and any(states[(r["row"], r["column"])] == states[(r["row"], baseline)] ==
                                               "learned" for r in compared):
        assert any(r["seeds_needed"] for r in compared)  # 2 seeds: a spread, where both sides learned
    assert all(float(r["flops"]) > 0 and float(r["device_seconds"]) > 0 and float(r["peak_memory_bytes"]) > 0
               for r in records if r["mean"] and r["row"] != results.BLURB_ROW)
    # the agreement line compares the learned cells with the paper's (a random BERT under micro may learn nothing)
    learned = [r for r in records if r["paper"] and r["cell_state"] == "learned"]
    if any(sum(x["row"] == r["row"] for x in learned) >= 2 for r in learned):
        assert "Agreement with the paper:" in md and all(r["agreement"] for r in learned)
    else:
        assert "Agreement with the paper:" not in md
    for cell in collect(experiment):  # every run logged its compute
        assert cell.compute["system/compute/flops"] > 0 and cell.compute["system/compute/device"], cell.compute
    # with --cost: the compute rows and the score-vs-compute figure; --stats: every result from the cache
    args = [str(path), "--profile", "micro", "--work-dir", str(shared_work), "--data-dir",
            str(data_dir)]
    assert main(["table", *args, "--cost"]) == 0
    shown = capsys.readouterr().out
    assert "| *compute: fine-tuning* |" in shown and "| *peak memory* |" in shown
    if experiment.stage_order():
        assert "| *compute: pretraining* |" in shown and all(float(r["pretrain_flops"]) > 0 for r in csv.DictReader(
            (out_dir / "table.csv").open()) if r["mean"])
    # micro draws no figures (the profile's figures: false; tests/ablations/tables/test_plot.py draws every
    # packaged table's); its runs log none either
    assert not [p for p in out_dir.iterdir() if p.suffix in (".png", ".svg", ".pdf")]
    assert not [c for c in collect(experiment) if c.run_id and "figures" in {
        a.path for a in MlflowClient(experiment.store()[1]).list_artifacts(c.run_id)}]
    assert main(["table", *args, "--stats"]) == 0
    long = capsys.readouterr().out
    assert "computed: 0)" in long and "seed-level paired t-test" in long

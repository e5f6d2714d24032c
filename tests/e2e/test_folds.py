"""Cross-validated tasks in experiments: every fold of `euadr` / `biobert-gad` is a fine-tuning run of its
own (task `euadr@fold3`, its own fingerprint, tag `fold`) in a real MLflow store, and the table cell is the
mean over folds and seeds with the ± over both."""

from __future__ import annotations

import re
import statistics

import pytest
from mlflow.tracking import MlflowClient

from ablations import results
from ablations.cli import main
from ablations.config import build_config
from ablations.experiment import collect, load_experiment
from ablations.results import FINISHED, CellRun, TableLayout
from ablations.run.finetune_identity import identify
from ablations.tables.stats import table_data
from bioablate_core.errors import ConfigError

EXPERIMENT = """
name: folds
models:
  random: {name_or_path: random-bert}
tasks: [euadr]
folds: {micro: 3, default: all}
seeds: 1
overrides: {finetune: {max_train_examples: 24, max_eval_examples: 24}}
table: {title: "EU-ADR folds", rows: task, columns: model}
"""


def test_every_fold_is_its_own_run_and_the_cell_is_their_mean(data_dir, tmp_path, capsys):
    path = tmp_path / "folds.yaml"
    path.write_text(EXPERIMENT)
    work = tmp_path / "work"
    assert main(["run", str(path), "--work-dir", str(work), "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    experiment = load_experiment(path, data_dir=str(data_dir), work_dir=str(work))
    assert [c.name for c in experiment.cells()] == [f"random/euadr/s1/fold{k}" for k in (1, 2, 3)]
    _, tracking_uri = experiment.store()
    client = MlflowClient(tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name("finetune").experiment_id], "tags.kind = 'finetune'")
    by_fold = {r.data.tags["fold"]: r for r in runs}
    assert sorted(by_fold) == ["1", "2", "3"] and len(runs) == 3
    assert {r.data.params["task"] for r in runs} == {"euadr@fold1", "euadr@fold2", "euadr@fold3"}
    assert len({r.data.tags["fingerprint"] for r in runs}) == 3
    assert len({r.data.tags["data_fingerprint"] for r in runs}) == 3  # each fold reads its own files

    cells = collect(experiment)
    assert [(c.task, c.fold, c.status) for c in cells] == [("euadr", k, FINISHED) for k in (1, 2, 3)]
    values = [100 * by_fold[str(k)].data.metrics["test/score"] for k in (1, 2, 3)]
    cell = table_data(experiment.layout, cells).cell("euadr", "random")
    assert cell.n == 3 and cell.mean == pytest.approx(statistics.fmean(values))
    assert cell.std == pytest.approx(statistics.stdev(values))
    table = (work / "tables" / "folds-micro" / "table.md").read_text()
    # the cell: mean ± sd to one decimal (⊥ where it did not learn), counted over fold runs, not seeds
    assert re.search(rf"\| {cell.mean:.1f} ± {cell.std:.1f}⊥? \|", table) and "over 3 fold runs of" in table
    assert f"{cell.mean:.1f} ± {cell.std:.1f}" in out  # the run prints its table
    assert "Task 'euadr' is cross-validated: each seed runs 3 folds; its cells give the mean ± sd over its fold " \
        "runs" in table

    # a second invocation reuses every fold's run
    assert main(["run", str(path), "--work-dir", str(work), "--data-dir", str(data_dir), "--dry-run"]) == 0
    assert "3 reuse" in capsys.readouterr().out


def test_a_single_run_takes_a_fold_by_name(data_dir, tmp_path):
    def fp(task: str) -> str:
        return identify(build_config("micro", [], task=task, data_dir=str(data_dir),
                                     work_dir=str(tmp_path))).fingerprint

    assert len({fp("euadr"), fp("euadr@fold1"), fp("euadr@fold2")}) == 3
    assert identify(build_config("micro", [], task="euadr@fold2", data_dir=str(data_dir),
                                 work_dir=str(tmp_path))).spec.fold_index == 2
    for bad, message in (("euadr@fold11", "has folds 1..10"), ("chemprot@fold2", "chemprot has no folds")):
        with pytest.raises(ConfigError, match=message):
            identify(build_config("micro", [], task=bad, data_dir=str(data_dir), work_dir=str(tmp_path)))


@pytest.mark.parametrize("folds, message", [
    ("11", "folds: 11 folds, but euadr (10) has fewer"),
    ("0", "folds: 0 is below the least, 1; or use `all`"),
    ("two", "folds: expected `all` or a number of folds"),
])
def test_a_fold_count_that_cannot_be_is_one_line(folds, message, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(EXPERIMENT.replace("{micro: 3, default: all}", folds))
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_experiment(path)
    path.write_text(EXPERIMENT.replace("[euadr]", "[chemprot]"))
    with pytest.raises(ConfigError, match="folds: no task of this experiment has folds"):
        load_experiment(path)


def _run(task: str, column: str, seed: int, fold: int | None, value: float) -> CellRun:
    return CellRun(row=task, column=column, task=task, seed=seed, status=FINISHED, value=value, fold=fold)


def test_stats_pair_folds_and_seeds_and_average_folds_within_a_task():
    layout = TableLayout(title="t", rows="task", columns="model", baseline="a")
    runs = [_run("euadr", col, seed, fold, base + 0.01 * fold + 0.001 * seed)
            for col, base in (("a", 0.5), ("b", 0.6)) for seed in (1, 2) for fold in (1, 2, 3)]
    runs.append(_run("chemprot", "a", 1, None, 0.4))
    runs.append(_run("chemprot", "b", 1, None, 0.45))
    data = table_data(layout, runs)
    b = data.cell("euadr", "b")
    assert b.n == 6 and set(b.values) == {(s, f) for s in (1, 2) for f in (1, 2, 3)}
    assert b.mean == pytest.approx(100 * statistics.fmean(r.value for r in runs
                                                          if r.column == "b" and r.task == "euadr"))
    assert b.p_value is not None and b.significant  # paired over the 6 (seed, fold) pairs
    assert data.cell("chemprot", "b").values == {1: pytest.approx(45.0)}  # unfolded cells: keyed by seed, as before

    # rows of several tasks: per seed, a folded task counts once (its folds' mean), not once per fold
    by_model = TableLayout(title="t", rows="model", columns="x")
    mixed = [CellRun(row="m", column="x", task=r.task, seed=r.seed, status=r.status, value=r.value, fold=r.fold)
             for r in runs if r.column == "a" and r.seed == 1]
    cell = table_data(by_model, mixed).cell("m", "x")
    folds_mean = statistics.fmean(r.value for r in mixed if r.task == "euadr")
    assert cell.values == {1: pytest.approx(100 * statistics.fmean([folds_mean, 0.4]))}
    missing = CellRun(row="euadr", column="a", task="euadr", seed=1, status=results.FAILED, reason="boom", fold=2)
    assert missing.seed_label == "1 fold 2"

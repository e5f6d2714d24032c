"""PlannedRun resolution (ablations/experiment/plan.py) against a real MLflow store that each test fills
with runs under the fingerprints the plan computes: a failed stage, a stage still running, the stages
and cells that wait on them (BLOCKED, saying why), and a finished cell found again."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from ablations import results
from ablations.experiment import FINETUNE, PRETRAIN, PlannedRun, Store, collect, load_experiment, plan_lines, resolve

TINY_PRETRAIN = "{corpus: pubmed, vocab: pubmedbert-uncased, max_steps: 4, checkpoint_every: 2, max_words: 4000}"
EXPERIMENT = f"""
name: resolve
models:
  base: {{pretrain: {TINY_PRETRAIN}}}
  continued: {{pretrain: {TINY_PRETRAIN}, init: base}}
  random: {{name_or_path: random-bert}}
tasks: [biosses]
table: {{rows: task, columns: model}}
"""


@pytest.fixture
def experiment(tmp_path, data_dir):
    path = tmp_path / "resolve.yaml"
    path.write_text(EXPERIMENT)
    return load_experiment(path, profile="micro", data_dir=str(data_dir), work_dir=str(tmp_path / "work"))


def store_run(tracking_uri: str, planned: PlannedRun, status: str, tags: dict[str, str] | None = None,
              metrics: dict[str, float] | None = None) -> str:
    """A run in the store as `bioablate pretrain` / `finetune` leaves it: tagged with the planned fingerprint."""
    client = MlflowClient(tracking_uri)
    name = planned.identity.experiment_name
    found = client.get_experiment_by_name(name)
    experiment_id = found.experiment_id if found else client.create_experiment(name)
    run_id = client.create_run(experiment_id, tags={"fingerprint": planned.fingerprint, **(tags or {})}).info.run_id
    for key, value in (metrics or {}).items():
        client.log_metric(run_id, key, value)
    if status != "RUNNING":
        client.set_terminated(run_id, status)
    return run_id


def by_name(experiment) -> dict[str, PlannedRun]:
    plan = resolve(experiment, Store(experiment.store()[1]))
    return {**plan.stages, **{run.name: run for run in plan.cells}}


def test_an_empty_store_plans_every_run_and_blocks_what_waits_for_a_stage(experiment):
    runs = by_name(experiment)
    assert runs["base"].kind == PRETRAIN and runs["base"].status == results.NOT_RUN
    # the folder a person can read, told apart from other runs by the fingerprint
    assert runs["base"].fingerprint and runs["base"].model_dir.name.endswith("-" + runs["base"].fingerprint[:8])
    assert runs["continued"].status == results.BLOCKED and runs["continued"].config is None
    assert runs["continued"].reason == "continues from pretraining stage 'base', which has not finished"
    assert runs["base/biosses/s1"].status == results.BLOCKED
    assert runs["base/biosses/s1"].reason == "needs pretraining stage 'base', which has not finished"
    random = runs["random/biosses/s1"]
    assert (random.kind, random.status, random.run) == (FINETUNE, results.NOT_RUN, None)
    assert random.identity.experiment_name == random.config.experiment_name and random.cell.column == "random"


def test_a_failed_stage_blocks_the_stage_continuing_from_it_and_their_cells(experiment):
    uri = experiment.store()[1]
    run_id = store_run(uri, by_name(experiment)["base"], "FAILED", tags={"error": "RuntimeError: out of\nmemory"})
    runs = by_name(experiment)
    assert (runs["base"].status, runs["base"].run_id) == (results.FAILED, run_id)
    assert runs["base"].reason == "pretraining stage 'base': RuntimeError: out of memory"
    assert runs["continued"].reason == "continues from pretraining stage 'base', which failed"
    assert runs["base/biosses/s1"].reason == "needs pretraining stage 'base', which failed"
    assert runs["continued/biosses/s1"].status == results.BLOCKED
    assert runs["continued/biosses/s1"].reason == "needs pretraining stage 'continued', which is blocked"
    lines = list(plan_lines(experiment))
    assert "  resume        pretrain base (pretraining stage 'base': RuntimeError: out of memory)" in lines
    assert ("  compute later pretrain continued (continues from pretraining stage 'base', which failed)"
            in lines)
    table = {(c.column, c.status, c.reason) for c in collect(experiment)}
    assert ("base", results.BLOCKED, "needs pretraining stage 'base', which failed") in table


def test_a_stage_that_has_not_finished_is_resumed_and_blocks_what_needs_it(experiment):
    store_run(experiment.store()[1], by_name(experiment)["base"], "RUNNING")
    runs = by_name(experiment)
    assert runs["base"].status == results.RUNNING and "started and not finished" in runs["base"].reason
    assert runs["continued"].reason == "continues from pretraining stage 'base', which has not finished"
    assert runs["base/biosses/s1"].reason == "needs pretraining stage 'base', which has not finished"


def test_a_finished_stage_without_its_model_directory_is_computed_again(experiment):
    store_run(experiment.store()[1], by_name(experiment)["base"], "FINISHED")
    base = by_name(experiment)["base"]
    assert base.status == results.NOT_RUN and f"model directory {base.model_dir} is missing" in base.reason


def test_a_finished_cell_is_found_again_with_its_metric(experiment):
    uri = experiment.store()[1]
    planned = by_name(experiment)["random/biosses/s1"]
    run_id = store_run(uri, planned, "FINISHED", metrics={"test/score": 0.25})
    found = by_name(experiment)["random/biosses/s1"]
    assert (found.status, found.run_id, found.fingerprint) == (results.FINISHED, run_id, planned.fingerprint)
    assert f"  reuse         finetune random/biosses/s1 (run {run_id})" in list(plan_lines(experiment))
    cell = next(c for c in collect(experiment) if c.column == "random")
    assert (cell.status, cell.value, cell.run_id, cell.fingerprint) == (results.FINISHED, 0.25, run_id,
                                                                       planned.fingerprint)


def test_a_finished_cell_without_the_table_metric_is_a_failed_cell_of_the_table(experiment):
    store_run(experiment.store()[1], by_name(experiment)["random/biosses/s1"], "FINISHED")
    cell = next(c for c in collect(experiment) if c.column == "random")
    assert cell.status == results.FAILED and cell.reason == "finished run has no test/score metric"



def test_a_finished_cell_with_an_undefined_score_is_a_failed_cell_and_the_table_renders(experiment, tmp_path):
    """A NaN test score (a run on data refused since: a NaN gold label) is no number to average: the cell
    says why, and `table` renders (it stopped on an AttributeError inside statistics)."""
    from tests.cli import bioablate_in_process

    store_run(experiment.store()[1], by_name(experiment)["random/biosses/s1"], "FINISHED",
              metrics={"test/score": float("nan")})
    cell = next(c for c in collect(experiment) if c.column == "random")
    assert (cell.status, cell.value) == (results.FAILED, None)
    assert cell.reason == "test/score is nan: undefined, check the test data"
    done = bioablate_in_process("table", str(experiment.path), "--profile", "micro", "--work-dir",
                                str(tmp_path / "work"), cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]

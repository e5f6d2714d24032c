"""The pretraining-curve figure: a continued stage's curve starts where the stage it continues ended, on
a real MLflow store with hand-logged loss histories."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from ablations.tables.pretrain_curves import (
    StageChain,
    StageSegment,
    chain_curve,
    running_mean,
    tokens_per_step,
    write_pretraining_curves,
)


def _run(client: MlflowClient, experiment_id: str, losses: list[float]) -> str:
    run = client.create_run(experiment_id)
    for step, loss in enumerate(losses):
        client.log_metric(run.info.run_id, "train/mlm_loss", loss, step=step)
    client.set_terminated(run.info.run_id)
    return run.info.run_id


@pytest.fixture
def store(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    client = MlflowClient(uri)
    return uri, client, client.create_experiment("pretrain", artifact_location=str(tmp_path / "art"))


def test_a_continued_stage_starts_where_its_first_stage_ended(store):
    uri, client, experiment_id = store
    general = _run(client, experiment_id, [10.0, 9.0, 8.0])  # 3 steps of 100 tokens
    pubmed = _run(client, experiment_id, [7.5, 7.0])  # 2 steps of 50 tokens, after them
    xs, ys, starts = chain_curve(client, StageChain("general then PubMed", (
        StageSegment(general, 100), StageSegment(pubmed, 50))))
    assert xs == [100, 200, 300, 350, 400]
    assert ys == [10.0, 9.0, 8.0, 7.5, 7.0]
    assert starts == [300]


def test_the_figure_is_written_in_every_format(store, tmp_path):
    uri, client, experiment_id = store
    chains = [StageChain("PubMed", (StageSegment(_run(client, experiment_id, [9.0, 8.0, 7.0]), 4096),))]
    paths = write_pretraining_curves(chains, uri, tmp_path / "out", "Table 9")
    assert sorted(p.suffix for p in paths) == [".pdf", ".png", ".svg"]
    assert all(p.stat().st_size > 0 for p in paths)
    assert write_pretraining_curves([], uri, tmp_path / "none") == []


def test_tokens_per_step_and_the_running_mean():
    assert tokens_per_step({"pretrain.batch_size": "32", "pretrain.accumulate": "2", "pretrain.seq_len": "128",
                            "trainer.devices": "4"}) == 32 * 2 * 128 * 4
    assert running_mean([1.0, 3.0, 5.0, 7.0], 2) == [1.0, 2.0, 4.0, 6.0]

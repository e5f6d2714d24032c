"""The pretraining-curve figure: a continued stage's curve starts where the stage it continues ended, the
corpus switch labelled, on a real MLflow store with hand-logged loss histories."""

from __future__ import annotations

import html
import re

import pytest
from mlflow.tracking import MlflowClient

from ablations.tables.pretrain_curves import (
    StageChain,
    StageSegment,
    chain_curve,
    running_mean,
    switch_label,
    tokens_per_step,
    write_pretraining_curves,
)


def _run(client: MlflowClient, experiment_id: str, losses: list[float], **tags: str) -> str:
    run = client.create_run(experiment_id, tags=tags)
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


def test_the_corpus_switch_is_labelled_once_per_change(store, tmp_path):
    """Table 9's continual columns: general then PubMed, one keeping its vocabulary, one with PubMed's;
    a column from scratch has no switch."""
    uri, client, experiment_id = store
    general = _run(client, experiment_id, [10.0, 9.0, 8.0], corpus="general", vocab="bert-base-uncased")
    kept = _run(client, experiment_id, [7.5, 7.0], corpus="pubmed", vocab="init")
    new = _run(client, experiment_id, [8.5, 7.5], corpus="pubmed", vocab="pubmedbert-uncased")
    scratch = _run(client, experiment_id, [10.0, 8.0, 7.0, 6.5, 6.0], corpus="pubmed", vocab="pubmedbert-uncased")
    chains = [StageChain("Wiki+Books → PubMed", (StageSegment(general, 100), StageSegment(kept, 100))),
              StageChain("Wiki+Books → PubMed, PubMed vocab", (StageSegment(general, 100), StageSegment(new, 100))),
              StageChain("second chain, same switch", (StageSegment(general, 100), StageSegment(kept, 100))),
              StageChain("PubMed", (StageSegment(scratch, 100),))]
    assert switch_label(client, StageSegment(general, 1), StageSegment(kept, 1)) == "general → pubmed"
    assert switch_label(client, StageSegment(general, 1), StageSegment(new, 1)) == \
        "general → pubmed, new vocabulary"
    assert switch_label(client, StageSegment(_run(client, experiment_id, [1.0]), 1, "wiki-books"),
                        StageSegment(_run(client, experiment_id, [1.0]), 1, "general-pubmed")) == \
        "wiki-books → general-pubmed"  # runs without tags: the stages' names
    paths = write_pretraining_curves(chains, uri, tmp_path / "out", "Table 9")
    svg = html.unescape(next(p for p in paths if p.suffix == ".svg").read_text(encoding="utf-8"))
    texts = [t.strip() for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]
    assert texts.count("general → pubmed") == 1 and texts.count("general → pubmed, new vocabulary") == 1

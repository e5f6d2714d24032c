"""The runner (ablations/experiment/runner.py) executes the planned runs as ablations.experiment.plan resolves them:
a cell FINISHED in the store is reused without computing anything, and a stage that fails when run
blocks the stage continuing from it and every cell that needs either."""

from __future__ import annotations

import pytest
import torch
from mlflow.tracking import MlflowClient
from transformers import BertConfig, BertForMaskedLM

from ablations import results
from ablations.experiment import Store, load_experiment, resolve
from ablations.experiment.runner import run_experiment

TINY_PRETRAIN = "{corpus: pubmed, vocab: pubmedbert-uncased, max_steps: 4, checkpoint_every: 2, max_words: 4000}"


def finetune_runs(tracking_uri: str) -> list:
    client = MlflowClient(tracking_uri)
    found = client.get_experiment_by_name("finetune")
    return client.search_runs([found.experiment_id], "tags.fingerprint != ''") if found else []


def test_a_cell_finished_in_the_store_is_reused_and_nothing_is_computed(tmp_path, data_dir):
    path = tmp_path / "reuse.yaml"
    path.write_text("name: reuse\nmodels:\n  random: {name_or_path: random-bert}\ntasks: [biosses]\n"
                    "table: {rows: task, columns: model}\n")
    experiment = load_experiment(path, data_dir=str(data_dir), work_dir=str(tmp_path / "work"))
    uri = experiment.store()[1]
    [planned] = resolve(experiment, Store(uri)).cells
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment(planned.identity.experiment_name),
                               tags={"fingerprint": planned.fingerprint}).info.run_id
    client.log_metric(run_id, "test/score", 0.5)
    client.set_terminated(run_id, "FINISHED")

    lines: list[str] = []
    summary = run_experiment(experiment, echo=lines.append)
    [outcome] = summary.outcomes
    assert (outcome.status, outcome.run_id, outcome.fingerprint) == (results.REUSED, run_id, planned.fingerprint)
    assert summary.ok and summary.count(results.COMPUTED) == 0
    assert lines == ["[1/1] reused   finetune random/biosses/s1"]
    assert [r.info.run_id for r in finetune_runs(uri)] == [run_id]


@pytest.mark.slow
def test_a_stage_that_fails_blocks_the_stage_continuing_from_it_and_their_cells(tmp_path, data_dir):
    broken = tmp_path / "broken-model"  # a whole, loadable BERT whose weights are NaN: loading the experiment
    config = BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    model = BertForMaskedLM(config)  # checks its files; only training it finds the loss is not finite
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.fill_(float("nan"))
    model.save_pretrained(broken)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    (broken / "vocab.txt").write_text("\n".join(specials + [chr(c) for c in range(97, 123)]
                                                + [f"w{i}" for i in range(config.vocab_size - 31)]) + "\n")
    path = tmp_path / "blocked.yaml"
    path.write_text(f"""
name: blocked
models:
  base: {{pretrain: {TINY_PRETRAIN}, init: {broken}}}
  continued: {{pretrain: {TINY_PRETRAIN}, init: base}}
tasks: [biosses]
table: {{rows: task, columns: model}}
""")
    experiment = load_experiment(path, data_dir=str(data_dir), work_dir=str(tmp_path / "work"))
    summary = run_experiment(experiment, echo=lambda _: None)
    outcomes = {o.name: o for o in summary.outcomes}
    assert list(outcomes) == ["base", "continued", "base/biosses/s1", "continued/biosses/s1"]
    assert outcomes["base"].status == results.FAILED and "the training loss became nan" in outcomes["base"].error
    assert (outcomes["continued"].status, outcomes["continued"].error) == (
        results.BLOCKED, "continues from pretraining stage 'base', which failed")
    assert (outcomes["base/biosses/s1"].status, outcomes["base/biosses/s1"].error) == (
        results.BLOCKED, "needs pretraining stage 'base', which failed")
    assert (outcomes["continued/biosses/s1"].status, outcomes["continued/biosses/s1"].error) == (
        results.BLOCKED, "needs pretraining stage 'continued', which is blocked")
    assert not summary.ok and summary.lines()[0].endswith("0 computed, 0 reused, 1 failed, 3 blocked")
    assert not finetune_runs(experiment.store()[1])


@pytest.mark.slow
def test_runs_per_device_computes_cells_in_that_many_worker_processes_at_once(tmp_path, data_dir):
    """`--runs-per-device 2` on one device: two worker processes (neither this one) share the cells, with
    overlapping run times, and each finished run is in the store once."""
    import os

    path = tmp_path / "parallel.yaml"
    path.write_text("name: parallel\nmodels:\n  random: {name_or_path: random-bert}\n"
                    "tasks: [biosses, gad]\nseeds: 2\ntable: {rows: task, columns: model}\n")
    experiment = load_experiment(path, data_dir=str(data_dir), work_dir=str(tmp_path / "work"))
    summary = run_experiment(experiment, echo=lambda _: None, devices=1, runs_per_device=2)
    assert summary.ok and summary.count(results.COMPUTED) == 4
    workers = {o.worker for o in summary.outcomes}
    assert len(workers) == 2 and os.getpid() not in workers
    runs = finetune_runs(experiment.store()[1])
    assert sorted(r.data.tags["fingerprint"] for r in runs) == sorted(o.fingerprint for o in summary.outcomes)
    spans = {}
    for run in runs:
        spans.setdefault(run.info.run_id, (run.info.start_time, run.info.end_time))
    by_worker = {}
    for o in summary.outcomes:
        by_worker.setdefault(o.worker, []).append(spans[o.run_id])
    first, second = by_worker.values()
    assert any(a0 < b1 and b0 < a1 for a0, a1 in first for b0, b1 in second), "the two workers never overlapped"


@pytest.fixture
def small_disk(tmp_path):
    """A real 12 MiB filesystem (tmpfs): room for the tracking store and the caches, not for a micro run's
    checkpoint (~25 MB: the BERT vocabulary's embeddings and their Adam moments). Needs the right to mount."""
    import ctypes
    import os

    mount = tmp_path / "small"
    mount.mkdir()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"tmpfs", str(mount).encode(), b"tmpfs", 0, b"size=12m") != 0:
        pytest.skip(f"cannot mount a tmpfs here ({os.strerror(ctypes.get_errno())}); needs root")
    yield mount
    libc.umount2(str(mount).encode(), 2)  # MNT_DETACH: the in-process run's store connections may still be open


@pytest.mark.slow
def test_a_full_disk_stops_the_run_at_the_first_cell_with_one_line(small_disk, data_dir, tmp_path):
    """The first cell's checkpoint does not fit: the invocation stops there with one line, and the other
    seven cells are never started (each would fail the same way, leaving a FAILED run and a partial
    checkpoint). The failed run is FAILED in the store, with its error."""
    from tests.cli import bioablate_in_process

    work = small_disk / "work"
    done = bioablate_in_process("run", "quickstart", "--profile", "micro", "--work-dir", str(work), "--data-dir",
                                str(data_dir), cwd=tmp_path)
    errors = [line for line in done.stderr.splitlines() if line.startswith("bioablate:")]
    assert done.returncode == 1 and len(errors) == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "No space left on device" in errors[0] and "the 7 run(s) after it were not started" in errors[0]
    assert "rerun the same command" in errors[0]
    printed = done.stdout + done.stderr
    assert "[1/8] running" in printed and "[1/8] failed" in printed and "[2/8]" not in printed
    runs = finetune_runs(f"sqlite:///{work / 'mlruns.db'}")
    assert [run.info.status for run in runs] == ["FAILED"]
    assert "No space left on device" in runs[0].data.tags["error"]

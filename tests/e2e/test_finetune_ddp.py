"""A micro fine-tuning run with 2 DDP processes on the CPU (gloo), through the real `bioablate finetune`
command, from a saved pretrained model: rank 0 alone owns the MLflow run; dev and test are scored over every
example, each exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from datamodules.finetune_data import subsample
from datamodules.registry import get_dataset

pytestmark = [pytest.mark.slow, pytest.mark.ddp]

REPO_ROOT = Path(__file__).resolve().parents[2]
EVAL = 45  # dev and test examples: odd, so two ranks get uneven shares (a padding sampler would repeat one)


def save_pretrained_bert(path: Path, data_dir: Path) -> Path:
    """A small BERT saved as a pretrained checkpoint is, pooler included (which fine-tuning leaves out: DDP
    stops on parameters without a gradient)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    from datamodules.vocabs import resolve_vocab

    vocab = resolve_vocab("bert-base-uncased", data_dir)
    tokenizer = BertTokenizer(vocab=str(vocab))
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=256)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_two_process_ddp_finetune_through_the_cli(data_dir, tmp_path):
    work_dir = tmp_path / "work"
    model_dir = save_pretrained_bert(tmp_path / "model", data_dir)
    env = {k: v for k, v in os.environ.items()
           if k not in ("MLFLOW_TRACKING_URI", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "MASTER_PORT")}
    env.update(BIOABLATE_DATA=str(data_dir), OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    command = [sys.executable, "-m", "ablations.cli", "finetune", "--task", "bc5-chem", "--work-dir", str(work_dir),
               "--model", str(model_dir),
               "finetune.max_train_examples=64", f"finetune.max_eval_examples={EVAL}", "finetune.epochs=2",
               "finetune.max_length=64", "trainer.progress_bar=false",
               "trainer.accelerator=cpu", "trainer.devices=2", "trainer.strategy=ddp"]
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("bc5-chem: finished") == 1  # the worker process printed nothing

    client = MlflowClient(f"sqlite:///{work_dir / 'mlruns.db'}")
    runs = client.search_runs([client.get_experiment_by_name("finetune").experiment_id])
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.data.params["trainer.devices"] == "2"
    for name in ("dev/score", "dev/precision"):  # once per epoch, not once per rank
        assert len(client.get_metric_history(run.info.run_id, name)) == 2
    for name in ("test/score", "best_dev/score"):
        assert len(client.get_metric_history(run.info.run_id, name)) == 1

    # dev scored over all EVAL examples (tp + fn = gold mentions of the whole subsample), not one share; the
    # counts of every dev evaluation are in the run's metrics/details.json (one entry per epoch)
    artifacts = Path(client.download_artifacts(run.info.run_id, "", str(tmp_path / "dl")))
    details = json.loads((artifacts / "metrics" / "details.json").read_text())
    instances = subsample(get_dataset("bc5-chem").read(data_dir)["dev"], EVAL)
    gold_mentions = sum(len(x.spans) for x in instances)
    assert len(details["dev"]) == 2
    assert all(epoch["tp"] + epoch["fn"] == gold_mentions for epoch in details["dev"])
    lines = [json.loads(line) for line in (artifacts / "test_predictions.jsonl").read_text().splitlines()]
    test_ids = [x.id for x in subsample(get_dataset("bc5-chem").read(data_dir)["test"], EVAL)]
    assert [line["id"] for line in lines] == test_ids  # every test example once, in split order

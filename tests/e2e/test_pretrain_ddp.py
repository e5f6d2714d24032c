"""A micro pretraining run with 2 DDP processes on the CPU (gloo), through the real `bioablate pretrain`
command: rank 0 alone owns the MLflow run and exports the model; the loss falls."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

pytestmark = [pytest.mark.slow, pytest.mark.ddp]

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_two_process_ddp_pretraining_through_the_cli(data_dir: Path, tmp_path: Path):
    work_dir = tmp_path / "work"
    env = {k: v for k, v in os.environ.items()
           if k not in ("MLFLOW_TRACKING_URI", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "MASTER_PORT")}
    env.update(BIOABLATE_DATA=str(data_dir), OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    command = [sys.executable, "-m", "ablations.cli", "-v", "pretrain", "--profile", "micro",
               "--work-dir", str(work_dir), "--devices", "2", "--strategy", "ddp", "trainer.accelerator=cpu",
               "trainer.progress_bar=false", "trainer.log_every_n_steps=1",
               "pretrain.exclude_eval_pmids=false"]  # the PMID filter parses every dataset: ~10 s, not DDP
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "MEMBER: 2/2" in done.stderr  # Lightning (shown with -v) really started a second process
    assert done.stdout.count("pretrain: finished") == 1  # the worker process printed nothing

    client = MlflowClient(f"sqlite:///{work_dir / 'mlruns.db'}")
    runs = client.search_runs([client.get_experiment_by_name("pretrain").experiment_id])
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED" and run.data.params["trainer.devices"] == "2"
    model_dir = work_dir / run.data.tags["model_dir"]
    assert (model_dir / "config.json").is_file() and (model_dir / "model.safetensors").is_file()
    assert not list(work_dir.glob("runs/*/checkpoints/*.ckpt"))  # cleaned up once, by rank 0

    losses = [m.value for m in sorted(client.get_metric_history(run.info.run_id, "train/mlm_loss"),
                                      key=lambda m: m.step)]
    assert len(losses) == 12  # the micro profile's steps: one value per optimizer step (rank 0's), not one per rank
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.1, (losses[:5], losses[-5:])

"""`python -m benchmarks.suite --size micro` end to end in a subprocess, so the suite cannot rot: every
section is there with positive numbers, and the markdown summary is written beside the JSON."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SIDES = ("ours", "hf-naive", "hf-strong")


@pytest.mark.slow
def test_micro_suite_writes_every_section_with_positive_numbers(data_dir: Path, tmp_path: Path):
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "BIOABLATE_WORK")}
    env.update(BIOABLATE_DATA=str(data_dir), PYTHONPATH=str(REPO_ROOT), TOKENIZERS_PARALLELISM="false")
    command = [sys.executable, "-m", "benchmarks.suite", "--size", "micro", "--device", "cpu", "--out", str(out),
               "--work-dir", str(tmp_path / "work")]
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    results = json.loads((out / "results.json").read_text())
    assert results["suite"]["size"] == "micro" and results["suite"]["wall_s"] > 0

    assert len(results["pretrain"]) == 1
    for section in results["pretrain"]:
        for side in SIDES:
            assert section[side]["tokens_per_s"] > 0 and section[side]["mfu"] > 0, side
        assert section["hf-strong"]["attention"] == "sdpa"
        assert set(section["ratios"]) == {"hf-naive", "hf-strong"} and min(section["ratios"].values()) > 0
        assert section["wall_s"] > 0 and section["peak_memory"]["bytes"] > 0

    finetune = results["finetune"]
    if importlib.util.find_spec("accelerate") is None:  # the HF Trainer baselines need it (pip extra bench)
        assert "accelerate" in finetune["skipped"]
    else:
        assert [r["task"] for r in finetune["results"]] == ["bc5-chem", "chemprot"]
        for task in finetune["results"]:
            for side in SIDES:
                x = task[side]
                assert x["examples_per_s"] > 0 and x["tokens_per_s"] > 0 and x["mfu"] > 0, (task["task"], side)
            assert task["hf-naive"]["padded_to"] == 64 and task["hf-strong"]["padded_to"] is None
            assert task["hf-strong"]["optim"] == "adamw_torch_fused"
            assert min(task["ratios"].values()) > 0
        assert finetune["peak_memory"]["bytes"] > 0

    smoke = results["smoke"]
    assert smoke["pretrain_steps"] == 30 and smoke["pretrain_s"] > 0 and smoke["finetune_s"] > 0
    assert smoke["last_loss"] < smoke["first_loss"]  # the real pretraining path trained
    assert 0.0 <= smoke["test_f1"] <= 1.0 and smoke["peak_memory"]["bytes"] > 0
    assert not list(out.glob("smoke-*"))  # its work directory (the exported model) is removed

    summary = (out / "summary.md").read_text()
    for heading in ("## Pretraining (MLM) throughput", "## Fine-tuning throughput", "## End-to-end smoke"):
        assert heading in summary
    assert "test F1" in summary

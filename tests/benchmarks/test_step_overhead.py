"""benchmarks.step_overhead: each side runs in the precision asked for, under the process's own fp32 matmul
precision (IEEE forced only where a run measures fp32 on purpose), and reports tokens/s and MFU."""

from __future__ import annotations

from pathlib import Path

import torch

from benchmarks import step_overhead


def test_a_bf16_run_reports_tokens_per_second_and_mfu_and_forces_no_fp32_precision(data_dir: Path, tmp_path: Path):
    before = torch.backends.cuda.matmul.fp32_precision
    args = step_overhead.parser().parse_args([
        "--device", "cpu", "--size", "toy", "--batch-size", "4", "--seq-len", "64", "--rounds", "1", "--warmup", "1",
        "--sides", "today", "static", "--precision", "bf16", "--max-words", "20000", "--peak-size", "64",
        "--peak-seconds", "0.05", "--data-dir", str(data_dir), "--work-dir", str(tmp_path)])
    out = step_overhead.run(args)
    assert torch.backends.cuda.matmul.fp32_precision == before  # a bf16 run is not an fp32 one
    assert out["precision"] == "bf16" and out["peak"] > 0
    for side in ("today", "static"):
        assert out[side]["tokens_per_s"] > 0 and 0 < out[side]["mfu"] < 1, out[side]
    assert "tokens/s" in step_overhead.report(out) and "MFU" in step_overhead.report(out)

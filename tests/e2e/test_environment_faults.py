"""Whole runs meeting a broken environment: a file size limit hit while checkpointing
(the stand-in for a full disk) marks the run FAILED and prints one line; a truncated last.ckpt does not
trap its run in a crash loop (the rerun sets it aside and finishes). The runs that meet the fault are
processes of their own; the runs before and after them run in the test's process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ablations.config import REPO_ROOT
from tests.cli import bioablate_in_process

MICRO = ["finetune.max_train_examples=16", "finetune.max_eval_examples=16", "finetune.max_length=32",
         "trainer.progress_bar=false"]

# The CLI under RLIMIT_FSIZE: the tracking store and caches stay far below the limit, a checkpoint (the
# BERT-vocabulary embeddings and their Adam moments, ~25 MB) does not. SIGXFSZ ignored: the write fails
# with EFBIG, the same OSError path a full disk (ENOSPC) takes.
UNDER_A_FILE_SIZE_LIMIT = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (8 << 20, 8 << 20))
from ablations.cli import main
sys.exit(main(sys.argv[1:]))
"""


def bioablate(*argv: str, prelude: str | None = None) -> subprocess.CompletedProcess:
    code = prelude or "import sys; from ablations.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, cwd=REPO_ROOT)


def finetune_runs(work_dir: Path) -> list:
    client = MlflowClient(f"sqlite:///{work_dir / 'mlruns.db'}")
    return client.search_runs([client.get_experiment_by_name("finetune").experiment_id])


@pytest.mark.slow
def test_a_write_failure_during_a_run_marks_it_failed_with_one_line(tmp_path, data_dir):
    out = bioablate("finetune", "--task", "gad", "--data-dir", str(data_dir), "--work-dir", str(tmp_path),
                    *MICRO, prelude=UNDER_A_FILE_SIZE_LIMIT)
    last = out.stderr.strip().splitlines()[-1]
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert last.startswith(f"bioablate: error: {tmp_path / 'runs'}/") and last.endswith(".ckpt: File too large")
    [run] = finetune_runs(tmp_path)
    assert run.info.status == "FAILED" and "File too large" in run.data.tags["error"]
    assert not [p for p in (tmp_path / "runs").rglob("*.tmp")]  # the partial checkpoint is gone


@pytest.mark.slow
def test_a_truncated_last_checkpoint_is_set_aside_and_the_rerun_finishes(tmp_path, data_dir):
    args = ["finetune", "--task", "gad", "--data-dir", str(data_dir), "--work-dir", str(tmp_path), *MICRO,
            "keep_checkpoints=true"]
    # the runs around the one under test run in this process (tests/cli.py): ~10 s of imports less each
    assert bioablate_in_process(*args, cwd=tmp_path).returncode == 0
    [run] = finetune_runs(tmp_path)
    last = tmp_path / "runs" / run.data.tags["fingerprint"] / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[:4096])  # a crash or a full disk cut it short
    MlflowClient(f"sqlite:///{tmp_path / 'mlruns.db'}").set_terminated(run.info.run_id, "FAILED")

    recovered = bioablate(*args)  # in a process of its own, as after the crash
    assert recovered.returncode == 0, recovered.stderr
    assert f"checkpoint {last} is unreadable" in recovered.stderr and "starts from scratch" in recovered.stderr
    again = bioablate_in_process(*args, cwd=tmp_path)  # not a crash loop: recovered, then reused
    assert again.returncode == 0 and "reused finished run" in again.stdout, again.stderr
    [rerun] = finetune_runs(tmp_path)  # the failed run, with nothing to continue from, made way for a fresh one
    assert rerun.info.status == "FINISHED" and rerun.info.run_id != run.info.run_id
    assert MlflowClient(f"sqlite:///{tmp_path / 'mlruns.db'}").get_run(
        run.info.run_id).info.lifecycle_stage == "deleted"
    assert (last.parent / "last.ckpt.unreadable").exists() and last.exists()  # set aside; a new one written


UNDER_A_2K_FILE_SIZE_LIMIT = UNDER_A_FILE_SIZE_LIMIT.replace("8 << 20, 8 << 20", "2048, 2048")


def test_a_write_failure_without_a_file_name_names_where_the_command_writes(tmp_path, data_dir):
    """A write through a file object fails with no file name on the error (was: 'I/O: No space left on
    device'): the line names the folder the command writes to."""
    out = bioablate("vocab", "train", "--size", "1000", "--max-words", "20000", "--out", str(tmp_path / "vocab"),
                    "--data-dir", str(data_dir), prelude=UNDER_A_2K_FILE_SIZE_LIMIT)
    assert out.returncode == 1 and out.stderr.strip().splitlines() == [
        f"bioablate: error: File too large while writing (--out {tmp_path / 'vocab'}); free space there or write "
        "elsewhere"], out.stderr

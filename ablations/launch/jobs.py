"""What a SLURM job runs: callables submitit pickles on the login node and calls on a compute node.

- `PlannedRunJob`: one pretraining stage or fine-tuning cell of an experiment. The experiment is loaded
  and the run resolved against the tracking store when the job *starts*, not when it was submitted: a
  cell's stage has finished by then (the job depends on it, `afterok`), and a run that some other job
  finished meanwhile is reused, not recomputed.
- `ConfigRunJob`: one run of a resolved config (a multi-node pretraining run, one per task).
- `SweepWorkerJob`: one worker of an Optuna study, as `bioablate sweep --workers 1` runs it.

Both requeue themselves when the scheduler warns that it will stop the job: either during training
(the run's `CheckpointOnSignal` saved `last.ckpt` and raised `Preempted`) or at any other moment
(submitit's handler calls `checkpoint`). The requeued job reruns the same call, and the run's lifecycle
takes the KILLED run over from its checkpoint.
"""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from bioablate_core.interrupts import Preempted


@contextmanager
def _job_process() -> Iterator[None]:
    """What the CLI does around its work (a job starts in submitit's entry point, not ours): library noise
    off, and SIGINT / SIGTERM (`scancel`) end the run KILLED rather than leaving it RUNNING."""
    from bioablate_core.console import quiet_libraries
    from bioablate_core.interrupts import handling_interrupts

    quiet_libraries()
    with handling_interrupts():
        yield


class JobFailed(RuntimeError):
    """The run failed (its MLflow run says why): the job must fail too, so that SLURM cancels the jobs
    that depend on it."""


def _requeue_and_exit(reason: str, limit: int) -> None:
    """Put this job back into the queue (`scontrol requeue`, as submitit's own handler does) and leave
    without a result file, so nobody takes the job for finished."""
    job = os.environ.get("SLURM_ARRAY_JOB_ID")
    job_id = f"{job}_{os.environ['SLURM_ARRAY_TASK_ID']}" if job else os.environ.get("SLURM_JOB_ID")
    restarts = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
    if job_id is None or restarts >= limit:
        raise JobFailed(f"{reason}; not requeued ({restarts} requeues so far, launcher.max_requeues={limit}): "
                        "rerun the command to resume")
    print(f"{reason}: requeueing job {job_id}", file=sys.stderr, flush=True)
    subprocess.run(["scontrol", "requeue", job_id], check=False)
    sys.exit(-1)  # SystemExit: submitit writes no result for it


def _execute(kind: str, cfg: Any, tags: dict[str, str], max_requeues: int) -> Any:
    """One run, as `bioablate run` executes it, inside a job: a preemption requeues the job, a failed
    run fails it (its `RunOutcome` otherwise)."""
    from ablations.experiment.workers import execute
    from ablations.results import FAILED

    try:
        out = execute(kind, cfg, {**tags, "slurm_job_id": os.environ.get("SLURM_JOB_ID", "")})
    except Preempted as stop:
        _requeue_and_exit(str(stop), max_requeues)
    if out.state == FAILED:
        raise JobFailed(out.error)
    return out


class _Requeueable:
    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """submitit: the job is being preempted or timed out outside training: rerun the same call."""
        import submitit

        return submitit.helpers.DelayedSubmission(self)


@dataclass
class ExperimentSource:
    """How the submitting command loaded the experiment, to load it again in the job."""

    path: str
    profile: str
    overrides: list[str] = field(default_factory=list)
    data_dir: Optional[str] = None
    work_dir: Optional[str] = None
    tracking_uri: Optional[str] = None

    def load(self) -> Any:
        from ablations.experiment import load_experiment

        return load_experiment(self.path, profile=self.profile, overrides=self.overrides, data_dir=self.data_dir,
                               work_dir=self.work_dir, tracking_uri=self.tracking_uri,
                               max_runs=None)  # its size was accepted when it was submitted


@dataclass
class PlannedRunJob(_Requeueable):
    source: ExperimentSource
    kind: str  # PRETRAIN | FINETUNE
    name: str  # the stage's name, or the cell's model/task/variant/seed
    max_requeues: int = 3

    def __call__(self) -> dict[str, Any]:
        from ablations.experiment import PRETRAIN, Store, resolve_cell, stage_states
        from ablations.results import BLOCKED, FINISHED

        with _job_process():
            experiment = self.source.load()
            store = Store(experiment.store()[1])
            stages = stage_states(experiment, store)
            if self.kind == PRETRAIN:
                planned = stages[self.name]
            else:
                cell = next((c for c in experiment.cells() if c.name == self.name), None)
                if cell is None:
                    raise JobFailed(f"{experiment.path}: no planned run '{self.name}' any more (the experiment "
                                    "file changed since the job was submitted)")
                planned = resolve_cell(experiment, cell, stages, store)
            if planned.status == FINISHED:
                return {"run_id": planned.run_id, "fingerprint": planned.fingerprint, "reused": True}
            if planned.status == BLOCKED:
                raise JobFailed(planned.reason)
            return _execute(planned.kind, planned.config, {"experiment": experiment.name}, self.max_requeues)


@dataclass
class ConfigRunJob(_Requeueable):
    """One `bioablate pretrain` / `finetune` run of a resolved config (under srun: one per DDP rank)."""

    kind: str  # pretrain | finetune
    config: dict  # the run config, as a plain container
    max_requeues: int = 3

    def __call__(self) -> dict[str, Any]:
        from omegaconf import OmegaConf

        with _job_process():
            return _execute(self.kind, OmegaConf.create(self.config), {}, self.max_requeues)


@dataclass
class SweepWorkerJob(_Requeueable):
    """One worker of a sweep: the study loaded from its YAML as the submitting command loaded it, then
    `run_sweep` with one worker (the storage URL in $BIOABLATE_SWEEP_STORAGE, inherited from sbatch).
    A function call, not a command line: a job never goes back through the CLI's argument parsing."""

    path: str
    task: str
    study: str
    n_trials: int
    overrides: list[str]
    data_dir: Optional[str]
    work_dir: str
    tracking_uri: str
    worker_index: int
    max_requeues: int = 3

    def __call__(self) -> dict[str, Any]:
        from ablations.sweep import SweepPaths, load_sweep, run_sweep

        with _job_process():
            spec = load_sweep(self.path, task=self.task, overrides=self.overrides, n_trials=self.n_trials,
                              study=self.study)
            try:
                summary = run_sweep(spec, None, 1, self.worker_index,
                                    SweepPaths(self.data_dir, self.work_dir, self.tracking_uri))
            except Preempted as stop:
                _requeue_and_exit(str(stop), self.max_requeues)
        if not summary.complete:
            raise JobFailed(f"study '{self.study}': {summary.counts} of {summary.n_trials} trials when worker "
                            f"{self.worker_index} stopped")
        return {"study": summary.study, "counts": summary.counts}

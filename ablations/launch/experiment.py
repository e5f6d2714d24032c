"""`bioablate run EXPERIMENT --launcher slurm`: submit the planned runs the store does not hold and the
queue does not hold either; `bioablate status EXPERIMENT`: each planned run as MLflow and SLURM see it.

    stages (one job each; a continual stage `afterok` the stage it continues from)
      -> per stage, one job array of its fine-tuning cells, `afterok` the stage job
    cells of existing models -> one job array, no dependency

The plan is the one `bioablate run` and `--dry-run` use (ablations/experiment/plan.py). A planned run is
submitted when it is not FINISHED in the store and no job of an earlier submission is still queued or
running for it; submissions happen under a lock, so two commands started together submit each run once.
Jobs resolve their run when they start (ablations/launch/jobs.py), and the run's lifecycle claims its
fingerprint, so a run shared with another experiment is computed once even if both submit it.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from omegaconf import DictConfig

from ablations.experiment import FINETUNE, PRETRAIN, Experiment, PlannedRun, Store, resolve
from ablations.launch.jobs import ExperimentSource, PlannedRunJob
from ablations.launch.slurm import (
    ACTIVE,
    JobRecords,
    JobState,
    check_cluster,
    check_shared_store,
    executor,
    log_paths,
    squeue,
)
from ablations.results import FINISHED

POLL_SECONDS = 5.0


def records_for(experiment: Experiment) -> JobRecords:
    """The job record of this experiment at this profile with these command-line overrides."""
    work_dir, _ = experiment.store()
    return JobRecords(work_dir / "slurm" / f"{experiment.name}-{experiment.invocation()}")


@dataclass
class Submission:
    submitted: list[tuple[str, str, str]]  # (job id, kind, name)
    queued: list[tuple[str, str, str]]  # already queued or running from an earlier submission
    finished: int  # planned runs the store holds already
    records: JobRecords

    def job_ids(self) -> list[str]:
        return [job for job, _, _ in self.submitted + self.queued]

    def lines(self) -> list[str]:
        out = [f"submitted {len(self.submitted)} job(s); {len(self.queued)} already queued or running; "
               f"{self.finished} planned run(s) finished before"]
        out += [f"  job {job:<10} {kind:<8} {name}" for job, kind, name in self.submitted]
        out.append(f"  logs: {self.records.folder / 'logs'}")
        return out


def _source(experiment: Experiment, tracking_uri: str) -> ExperimentSource:
    return ExperimentSource(str(Path(experiment.path).resolve()), experiment.profile, list(experiment.cli_overrides),
                            experiment.data_dir, str(experiment.store()[0]), tracking_uri)


def _active(records: JobRecords, kind: str, name: str, live: dict[str, JobState]) -> Optional[str]:
    record = records.get(kind, name)
    if record is not None and record.job_id in live and live[record.job_id].state in ACTIVE:
        return record.job_id
    return None


def submit_experiment(experiment: Experiment, launcher: DictConfig) -> Submission:
    check_cluster()
    _, tracking_uri = experiment.store()
    check_shared_store(tracking_uri)
    source = _source(experiment, tracking_uri)
    submitted: list[tuple[str, str, str]] = []
    queued: list[tuple[str, str, str]] = []
    with records_for(experiment).locked() as records:
        live = squeue([r.job_id for r in records.jobs.values()])
        plan = resolve(experiment, Store(tracking_uri))
        finished = sum(p.status == FINISHED for p in [*plan.stages.values(), *plan.cells])
        logs = records.folder / "logs"
        stage_jobs: dict[str, str] = {}  # stage name -> the job computing it (new or queued)
        for name, planned in plan.stages.items():  # in order: a continual stage after its first stage
            if planned.status == FINISHED:
                continue
            job = _active(records, PRETRAIN, name, live)
            if job is not None:
                queued.append((job, PRETRAIN, name))
            else:
                after = stage_jobs.get(experiment.depends_on(name) or "")
                ex = executor(launcher, logs, f"{experiment.name}:{name}",
                              dependency=f"afterok:{after}" if after else None)
                job = ex.submit(PlannedRunJob(source, PRETRAIN, name, launcher.max_requeues)).job_id
                records.add(job, PRETRAIN, name)
                submitted.append((job, PRETRAIN, name))
            stage_jobs[name] = job
        arrays: dict[Optional[str], list[PlannedRun]] = defaultdict(list)  # stage job -> cells after it
        for planned in plan.cells:
            if planned.status == FINISHED:
                continue
            job = _active(records, FINETUNE, planned.name, live)
            if job is not None:
                queued.append((job, FINETUNE, planned.name))
                continue
            model = planned.cell.model
            arrays[stage_jobs.get(model) if experiment.models[model].is_planned else None].append(planned)
        for after, cells in arrays.items():
            ex = executor(launcher, logs, f"{experiment.name}:finetune", array=True,
                          dependency=f"afterok:{after}" if after else None)
            with ex.batch():
                jobs = [ex.submit(PlannedRunJob(source, FINETUNE, p.name, launcher.max_requeues)) for p in cells]
            for job, planned in zip(jobs, cells):
                records.add(job.job_id, FINETUNE, planned.name)
                submitted.append((job.job_id, FINETUNE, planned.name))
        records.save()
    return Submission(submitted, queued, finished, records)


def wait_for(job_ids: list[str], echo: Callable[[str], None] = print, poll: float = POLL_SECONDS) -> None:
    """Until none of `job_ids` is queued or running, printing each state change."""
    seen: dict[str, str] = {}
    while True:
        live = squeue(job_ids)
        for job in job_ids:
            state = live[job].state if job in live else "ENDED"
            if seen.get(job) != state:
                seen[job] = state
                echo(f"  job {job:<10} {state}")
        if not any(job in live and live[job].state in ACTIVE for job in job_ids):
            return
        time.sleep(poll)


def status_lines(experiment: Experiment) -> list[str]:
    """One line per planned run: MLflow status, SLURM state and job, and for failures the error and log."""
    _, tracking_uri = experiment.store()
    records = records_for(experiment).load()
    live = squeue([r.job_id for r in records.jobs.values()])
    plan = resolve(experiment, Store(tracking_uri))
    out = [f"{experiment.name} (profile {experiment.profile}), store {tracking_uri}:",
           f"  {'MLflow':<9} {'SLURM':<12} {'job':<10} run"]
    counts: dict[str, int] = defaultdict(int)
    for planned in [*plan.stages.values(), *plan.cells]:
        record = records.get(planned.kind, planned.name)
        slurm = records.state(record, live) if record is not None else JobState("-")
        # MLflow's own status where a run exists (KILLED is not RUNNING to a reader), the plan's otherwise
        mlflow = planned.run.info.status if planned.run is not None else planned.status
        counts[mlflow] += 1
        out.append(f"  {mlflow:<9} {slurm.state:<12} {record.job_id if record else '-':<10} "
                   f"{planned.kind} {planned.name}")
        if planned.status != FINISHED and record is not None and slurm.state not in ACTIVE:
            why = planned.reason if planned.reason and planned.run is not None else slurm.reason
            if why:
                out.append(f"      {why}")
            out.append(f"      log: {log_paths(records.folder / 'logs', record.job_id)[1]}")
        elif planned.status != FINISHED and planned.run is not None and planned.reason:  # a run started here
            out.append(f"      {planned.reason}")
        elif slurm.state == "PENDING" and slurm.reason:
            out.append(f"      pending: {slurm.reason}")
    out.append("  " + ", ".join(f"{n} {status.lower()}" for status, n in counts.items()))
    return out

"""SLURM through submitit: executors built from the `launcher` config block, the jobs an experiment has
submitted (a record under the work directory), and their states as the scheduler reports them.

submitit writes a pickled call per job and an sbatch script that runs it under `srun`; it handles the
requeue signal (`--signal=USR2@<signal_delay_s>`) and arrays (`executor.batch()`). What we add is the
bookkeeping a scheduler does not do for us: which planned run each job computes, so that a rerun of
`bioablate run` submits only what is neither finished nor queued.

States come from `squeue` while a job is known to the controller; after that from submitit's result
file (`<id>_result.pkl`: the return value, or the error with its traceback). `sacct` would keep states
longer but needs SLURM's accounting daemon, which many clusters have and a one-node test cluster does not.
"""

from __future__ import annotations

import fcntl
import json
import pickle
import re
import shutil
import subprocess
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

from omegaconf import DictConfig, OmegaConf

from bioablate_core.errors import ConfigError
from bioablate_core.files import write_text_atomic

ACTIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
          "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT")

_TIME = re.compile(r"^(?:(?:(\d+)-)?(\d+):)?(\d+):(\d+)$")


def minutes(time_limit: str | int) -> int:
    """SLURM's time formats we accept (minutes, H:MM:SS, D-HH:MM:SS) as whole minutes, rounded up."""
    text = str(time_limit).strip()
    if text.isdigit():
        return int(text)
    match = _TIME.match(text)
    if not match:
        raise ConfigError(f"launcher.time: '{time_limit}' is not a time limit; use minutes (240), H:MM:SS "
                          "(4:00:00) or D-HH:MM:SS (1-00:00:00)")
    days, hours, mins, secs = (int(g) if g else 0 for g in match.groups())
    return days * 1440 + hours * 60 + mins + (1 if secs else 0)


def check_cluster() -> None:
    """One line when this machine cannot submit jobs."""
    if shutil.which("sbatch") is None:
        raise ConfigError("--launcher slurm: no `sbatch` on this machine; run from a SLURM login node (or "
                          "drop --launcher to run here)")


def check_shared_store(tracking_uri: str) -> None:
    """Jobs on many nodes write runs at once: SQLite (one writer, one machine) cannot take that."""
    if tracking_uri.startswith(("sqlite:", "file:")) or "://" not in tracking_uri:
        raise ConfigError(
            f"--launcher slurm: the tracking store {tracking_uri} serves one process on one machine; jobs need "
            "a server: start `bioablate server --backend-store-uri postgresql://USER@HOST/DB` on a node the "
            "jobs reach and pass --tracking-uri http://HOST:5000 (see docs/cluster.md)")


def launcher_block(cfg: DictConfig) -> DictConfig:
    return cfg.launcher


def executor(launcher: DictConfig, folder: Path, job_name: str, *, nodes: int = 1, tasks_per_node: int = 1,
             gpus_per_node: Optional[int] = None, dependency: Optional[str] = None,
             array: bool = False) -> Any:
    """A submitit SlurmExecutor for jobs of one kind. `gpus_per_node` None: the block's gpus_per_run."""
    import submitit

    gpus = launcher.gpus_per_run if gpus_per_node is None else gpus_per_node
    sbatch = {str(k): v for k, v in OmegaConf.to_container(launcher.sbatch).items()}
    if dependency:
        sbatch.update(dependency=dependency, kill_on_invalid_dep="yes")  # a failed stage cancels its cells
    parameters: dict[str, Any] = dict(
        job_name=job_name, time=minutes(launcher.time), nodes=nodes, ntasks_per_node=tasks_per_node,
        cpus_per_task=launcher.cpus_per_run, signal_delay_s=launcher.signal_delay_s,
        setup=list(launcher.setup), additional_parameters=sbatch, stderr_to_stdout=False)
    if gpus:
        parameters["gpus_per_node"] = gpus
    for key in ("partition", "account", "qos"):
        if launcher[key]:
            parameters[key] = launcher[key]
    if launcher.mem_gb:
        parameters["mem"] = f"{launcher.mem_gb}GB"
    if array:
        parameters["array_parallelism"] = launcher.array_parallelism
    folder.mkdir(parents=True, exist_ok=True)
    ex = submitit.SlurmExecutor(folder=folder, max_num_timeout=launcher.max_requeues)
    ex.update_parameters(**parameters)
    return ex


# ---------------------------------------------------------------------------------------------------
# What the scheduler says


@dataclass(frozen=True)
class JobState:
    state: str  # squeue's state (PENDING, RUNNING, ...), or ENDED / FAILED / UNKNOWN once squeue forgot it
    reason: str = ""  # squeue's reason (e.g. Dependency), or the error of a failed job


def squeue(job_ids: list[str]) -> dict[str, JobState]:
    """Live states of `job_ids` (`12345` or array elements `12345_3`); jobs the controller no longer
    knows are absent."""
    if not job_ids:
        return {}
    bases = sorted({job.split("_")[0] for job in job_ids})
    out = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%T|%r", "-j", ",".join(bases)],
                         capture_output=True, text=True)
    states: dict[str, JobState] = {}
    for line in out.stdout.splitlines():  # exit status 1 when none is known any more: nothing listed
        job, state, reason = (line.split("|") + ["", ""])[:3]
        states[job.strip()] = JobState(state.strip(), "" if reason.strip() == "None" else reason.strip())
    return states


def result_of(folder: Path, job_id: str) -> Optional[JobState]:
    """The outcome submitit recorded for an ended job: ENDED, or FAILED with the error's last line."""
    path = folder / f"{job_id}_0_result.pkl"
    if not path.exists():
        return None
    try:
        with open(path, "rb") as f:
            kind, value = pickle.load(f)
    except Exception:  # noqa: BLE001 -- a half-written result: the job is still ending
        return None
    if kind == "success":
        return JobState("ENDED")
    lines = [line for line in str(value).strip().splitlines() if line.strip()]
    return JobState("FAILED", lines[-1] if lines else "failed")


def log_paths(folder: Path, job_id: str) -> tuple[Path, Path]:
    return folder / f"{job_id}_0_log.out", folder / f"{job_id}_0_log.err"


# ---------------------------------------------------------------------------------------------------
# What we submitted


@dataclass
class JobRecord:
    job_id: str
    kind: str  # pretrain | finetune | sweep-worker
    name: str  # the planned run's name (stage, or model/task/variant/seed)
    submitted: float


class JobRecords:
    """The jobs one experiment (at one profile, with one set of overrides) has submitted, by planned run:
    `<folder>/jobs.json`. Submissions happen under `locked()`, so two `run` commands started together
    submit each run once."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.path = folder / "jobs.json"
        self.jobs: dict[str, JobRecord] = {}

    @staticmethod
    def key(kind: str, name: str) -> str:
        return f"{kind}:{name}"

    def load(self) -> "JobRecords":
        if self.path.exists():
            raw = json.loads(self.path.read_text())
            self.jobs = {key: JobRecord(**value) for key, value in raw.items()}
        return self

    def get(self, kind: str, name: str) -> Optional[JobRecord]:
        return self.jobs.get(self.key(kind, name))

    def add(self, job_id: str, kind: str, name: str) -> None:
        self.jobs[self.key(kind, name)] = JobRecord(job_id, kind, name, time.time())

    def save(self) -> None:
        write_text_atomic(self.path, json.dumps({k: asdict(v) for k, v in self.jobs.items()}, indent=1))

    @contextmanager
    def locked(self) -> Iterator["JobRecords"]:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / "submit.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released by the OS if this process dies
            try:
                yield self.load()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def state(self, record: JobRecord, live: dict[str, JobState]) -> JobState:
        if record.job_id in live:
            return live[record.job_id]
        return result_of(self.folder / "logs", record.job_id) or JobState("UNKNOWN", "ended without a result "
                                                                          "(cancelled, killed or timed out)")

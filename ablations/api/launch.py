"""SLURM launches, for `--launcher slurm` (ablations/api/ re-exports these): the decisions a submission makes
(nodes and ranks, DDP, CPU partitions, the shared stores it needs), the submission, and following its jobs
to the end. Each returns what the command prints; `echo` receives the jobs' state changes while followed.
Heavy imports stay inside the functions."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:
    from omegaconf import DictConfig

Echo = Callable[[str], None]


def with_launcher(cfg: DictConfig, launcher_config: Optional[str]) -> DictConfig:
    """`cfg` with the `launcher_config` file's `launcher:` block merged on (no file: `cfg`)."""
    from ablations.config import merge_layer
    from bioablate_core.errors import ConfigError
    from bioablate_core.schema import load_yaml

    if not launcher_config:
        return cfg
    layer = load_yaml(launcher_config)
    if set(layer.keys()) != {"launcher"}:
        raise ConfigError(f"{launcher_config}: expected one top-level key, `launcher:` (found "
                          f"{', '.join(map(str, layer.keys())) or 'none'})")
    return merge_layer(cfg, layer, launcher_config)


@dataclass(frozen=True)
class PretrainJob:
    job: str
    nodes: int
    ranks_per_node: int
    folder: Path  # submitit's folder: logs/ and the job's result

    def line(self) -> str:
        return (f"submitted pretraining job {self.job}: {self.nodes} node(s) x {self.ranks_per_node} rank(s); "
                f"logs: {self.folder / 'logs'}")


def pretrain_on_slurm(cfg: DictConfig, launcher_config: Optional[str] = None, nodes: Optional[int] = None,
                      gpus_per_node: Optional[int] = None, force: bool = False) -> PretrainJob:
    """Submit `cfg` as one DDP job of `nodes` x `gpus_per_node` ranks (default: the launcher's nodes and
    gpus_per_node, else gpus_per_run); more than one rank trains with DDP, a launcher without GPUs on CPU."""
    from ablations.launch import submit_pretraining
    from ablations.places import resolve_work_dir
    from bioablate_core.errors import ConfigError

    cfg = with_launcher(cfg, launcher_config)
    launcher = cfg.launcher
    nodes = nodes or launcher.nodes
    tasks = gpus_per_node or launcher.gpus_per_node or max(1, launcher.gpus_per_run)
    if nodes < 1 or tasks < 1:
        raise ConfigError(f"--nodes and --gpus-per-node must be at least 1 (got {nodes}, {tasks})")
    cfg.trainer.num_nodes, cfg.trainer.devices = nodes, tasks
    if nodes * tasks > 1:
        cfg.trainer.strategy = "ddp"
    if not launcher.gpus_per_run:
        cfg.trainer.accelerator = "cpu"
    if force:
        raise ConfigError("--force is not supported with --launcher slurm; remove the run's MLflow run instead")
    folder = resolve_work_dir(cfg) / "slurm" / "pretrain"
    return PretrainJob(submit_pretraining(cfg, folder, nodes, tasks), nodes, tasks, folder)


def follow_pretraining(job: PretrainJob, echo: Echo = print) -> tuple[str, bool]:
    """Wait for the job to end: its outcome as a line, and whether it ended well."""
    from ablations.launch import wait_for
    from ablations.launch.slurm import result_of

    wait_for([job.job], echo)
    outcome = result_of(job.folder / "logs", job.job)
    line = (f"job {job.job}: {outcome.state if outcome else 'ended without a result'}"
            + (f": {outcome.reason}" if outcome and outcome.reason else ""))
    return line, outcome is not None and outcome.state == "ENDED"


def experiment_on_slurm(experiment, launcher_config: Optional[str] = None):
    """Submit every planned run of `experiment` the store does not hold (stages, then fine-tuning arrays).
    Returns the `Submission` (its `lines()` and `job_ids()`)."""
    from ablations.launch import submit_experiment

    return submit_experiment(experiment, with_launcher(experiment.shared_config(), launcher_config).launcher)


def follow_experiment(experiment, job_ids: list[str], echo: Echo = print) -> tuple[list[str], bool]:
    """Wait for the jobs to end: each planned run's status, and whether every run finished."""
    from ablations.experiment import Store, resolve
    from ablations.launch import status_lines, wait_for
    from ablations.results import FINISHED

    wait_for(job_ids, echo)
    _, tracking_uri = experiment.store()
    plan = resolve(experiment, Store(tracking_uri))
    return status_lines(experiment), all(p.status == FINISHED for p in [*plan.stages.values(), *plan.cells])


@dataclass(frozen=True)
class SweepJobs:
    study: str
    storage: str  # the study's database URL, password redacted
    jobs: list[str]
    folder: Path
    n_trials: int
    url: str  # unredacted: to read the study back while following

    def line(self) -> str:
        return (f"study '{self.study}' ({self.storage}): submitted {len(self.jobs)} worker job(s) "
                f"{', '.join(self.jobs)}; logs: {self.folder / 'logs'}")


def sweep_on_slurm(spec, storage: Optional[str] = None, workers: int = 1, worker_index: int = 0,
                   launcher_config: Optional[str] = None, data_dir: Optional[str] = None,
                   work_dir: Optional[str] = None, tracking_uri: Optional[str] = None) -> SweepJobs:
    """`workers` SLURM worker jobs on the study of `spec` (each `sweep --workers 1`), sharing it through a
    server database (`storage`, else $BIOABLATE_SWEEP_STORAGE) and a shared tracking store."""
    from ablations.config import build_config
    from ablations.launch import check_shared_store, submit_sweep_workers
    from ablations.launch.jobs import SweepWorkerJob
    from ablations.places import resolve_tracking_uri, resolve_work_dir
    from ablations.sweep import STORAGE_ENV, SweepPaths
    from bioablate_core.databases import redact, with_driver
    from bioablate_core.errors import ConfigError

    url = storage or os.environ.get(STORAGE_ENV)
    url = with_driver(url) if url else url  # postgresql:// names the installed driver, as in the jobs
    if not url or url.startswith("sqlite"):
        raise ConfigError("--launcher slurm: worker jobs share the study through a server database; pass "
                          "--storage postgresql+psycopg2://user:password@host/db (or set BIOABLATE_SWEEP_STORAGE)")
    redact(url)
    cfg = with_launcher(build_config("micro", [o for o in spec.cli_overrides if o.startswith("launcher.")],
                                     task=spec.task, work_dir=work_dir, tracking_uri=tracking_uri), launcher_config)
    work = resolve_work_dir(cfg)
    uri = resolve_tracking_uri(cfg, work)
    check_shared_store(uri)
    os.environ[STORAGE_ENV] = url  # the jobs inherit it (sbatch exports the environment): no password in argv
    paths = SweepPaths(data_dir, str(work), uri)
    jobs = [SweepWorkerJob(str(spec.path), spec.task, spec.study, spec.n_trials, list(spec.cli_overrides),
                           paths.data_dir, str(paths.work_dir), str(paths.tracking_uri), worker_index + i,
                           cfg.launcher.max_requeues) for i in range(workers)]
    folder = work / "slurm" / f"sweep-{spec.study}"
    ids = submit_sweep_workers(jobs, cfg.launcher, folder, f"sweep:{spec.study}")
    return SweepJobs(spec.study, redact(url), ids, folder, spec.n_trials, url)


def follow_sweep(submitted: SweepJobs, echo: Echo = print) -> tuple[str, bool]:
    """Wait for the worker jobs to end: the study's trials by state, and whether it has its finished trials."""
    import optuna

    from ablations.launch import wait_for

    wait_for(submitted.jobs, echo)
    study = optuna.load_study(study_name=submitted.study, storage=submitted.url)
    states = [t.state.name for t in study.get_trials(deepcopy=False)]
    counts = ", ".join(f"{states.count(s)} {s.lower()}" for s in sorted(set(states)))
    line = f"study '{submitted.study}': {counts or 'no trials'}; target {submitted.n_trials} finished"
    return line, states.count("COMPLETE") + states.count("PRUNED") >= submitted.n_trials



"""`bioablate sweep --launcher slurm` and `bioablate pretrain --launcher slurm`: their work as SLURM jobs
instead of here.

- a sweep: K worker jobs (one array), each the command a second machine would run against the same study
  storage (`--workers 1 --worker-index i`), so trials are claimed in the database exactly as for local
  workers;
- pretraining: one job of `nodes` x `tasks_per_node` tasks started by `srun`, one DDP rank each.
  Lightning's `SLURMEnvironment` reads the ranks from SLURM's variables; rank 0 alone owns the MLflow run
  and exports the model (bioablate_core.distributed.is_ddp_worker is true in the others).
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ablations.launch.jobs import ConfigRunJob, SweepWorkerJob
from ablations.launch.slurm import JobRecords, check_cluster, executor


def submit_sweep_workers(workers: list[SweepWorkerJob], launcher: DictConfig, folder: Path,
                         job_name: str) -> list[str]:
    """One job per worker (an array); their job ids."""
    check_cluster()
    with JobRecords(folder).locked() as records:
        ex = executor(launcher, folder / "logs", job_name, array=True)
        with ex.batch():
            jobs = [ex.submit(worker) for worker in workers]
        for index, job in enumerate(jobs):
            records.add(job.job_id, "sweep-worker", f"{job_name}/{index}")
        records.save()
    return [job.job_id for job in jobs]


def submit_pretraining(cfg: DictConfig, folder: Path, nodes: int, tasks_per_node: int) -> str:
    """One pretraining job of `nodes` x `tasks_per_node` DDP ranks (GPUs per node: the launcher's
    gpus_per_run, or tasks_per_node when that is set); its job id."""
    check_cluster()
    launcher = cfg.launcher
    gpus = tasks_per_node if launcher.gpus_per_run else 0
    with JobRecords(folder).locked() as records:
        ex = executor(launcher, folder / "logs", f"pretrain:{cfg.pretrain.corpus}", nodes=nodes,
                      tasks_per_node=tasks_per_node, gpus_per_node=gpus)
        job = ex.submit(ConfigRunJob("pretrain", OmegaConf.to_container(cfg, resolve=True), launcher.max_requeues))
        records.add(job.job_id, "pretrain", f"{cfg.pretrain.corpus}/{cfg.seed}")
        records.save()
    return job.job_id

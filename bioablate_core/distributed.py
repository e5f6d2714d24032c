"""Which process of a distributed job this is."""

from __future__ import annotations

import os


def is_ddp_worker() -> bool:
    """A process started for another DDP rank than 0, which must neither report nor touch the tracking
    store (rank 0 does): one Lightning started by rerunning the command (LOCAL_RANK / NODE_RANK set), or a
    task of a multi-task `srun` (SLURM_PROCID of SLURM_NTASKS; a job array's elements are single tasks)."""
    if os.environ.get("LOCAL_RANK", "0") != "0" or os.environ.get("NODE_RANK", "0") != "0":
        return True
    return int(os.environ.get("SLURM_NTASKS", "1")) > 1 and os.environ.get("SLURM_PROCID", "0") != "0"

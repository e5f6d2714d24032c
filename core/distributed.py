"""Which process of a distributed job this is."""

from __future__ import annotations

import os


def is_ddp_worker() -> bool:
    """A process Lightning (or srun) started for another DDP rank: it reruns the command with these set,
    and must neither report nor touch the tracking store (rank 0 does)."""
    return os.environ.get("LOCAL_RANK", "0") != "0" or os.environ.get("NODE_RANK", "0") != "0"

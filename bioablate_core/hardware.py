"""Naming the machine that produced a number (rendered tables, benchmark reports), and the names a run's
resource figures are logged under."""

from __future__ import annotations

import os
import platform

# under MLflow's `system/` prefix, a run's cost and timing go to its System metrics tab, not among the scores
COMPUTE_PREFIX = "system/compute/"
TIME_PREFIX = "system/time/"


def machine() -> str:
    """One line naming the device: the GPU, else the CPU model with torch's thread count and the cores."""
    import torch  # here: reading stored tables (the report notebook) needs no torch

    if torch.cuda.is_available():
        return f"{torch.cuda.get_device_name()} (torch {torch.__version__}, CUDA {torch.version.cuda})"
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {torch.get_num_threads()} threads of {os.cpu_count()} cores (torch {torch.__version__})"

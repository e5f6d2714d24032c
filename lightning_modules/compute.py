"""What a run cost: model FLOPs, device-seconds, the device and peak memory (`system/compute/*`)."""

from __future__ import annotations

import resource
import sys
import time
from typing import Any

import pytorch_lightning as pl
import torch

from bioablate_core.hardware import COMPUTE_PREFIX


def transformer_train_flops_per_token(hidden: int, layers: int, intermediate: int, seq_len: int) -> float:
    """Forward + backward FLOPs per token of a BERT encoder's matmuls: 6 x (QKV + output projection +
    feed-forward weights) + 6 x attention scores and mixing (2 matmuls of seq_len x hidden per layer)."""
    weights = layers * (4 * hidden * hidden + 2 * hidden * intermediate)
    attention = layers * 2 * seq_len * hidden
    return 6.0 * (weights + attention)


def encoder_sizes(module: torch.nn.Module) -> list[tuple[int, int, int]]:
    """(hidden, layers, intermediate) of every Hugging Face base model in `module`, not its wrappers."""
    from transformers import PreTrainedModel

    sizes = []
    for sub in module.modules():
        if isinstance(sub, PreTrainedModel) and sub.base_model is sub:
            c = sub.config
            sizes.append((int(c.hidden_size), int(c.num_hidden_layers), int(c.intermediate_size)))
    return sizes


def peak_memory_bytes(device: torch.device | None = None) -> int:
    """Peak memory: what torch allocated on a GPU, else the process's peak resident set (all its runs')."""
    if device is not None and device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # bytes on macOS, KiB on Linux


class ComputeCounter(pl.Callback):
    """Counts the tokens (padding included: the matmuls ran over it) and FLOPs of every batch, and the wall
    time from fit to test. The counts go into each checkpoint, so a resumed run counts the work before its
    interruption too (up to the checkpoint it resumes from; what the killed process did after it is redone)."""

    def __init__(self) -> None:
        self.sizes: list[tuple[int, int, int]] = []
        self.train_tokens = self.eval_tokens = 0
        self.flops = 0.0
        self.started: float | None = None
        self.seconds = 0.0
        self.devices = 1
        self.device: torch.device | None = None

    def _count(self, batch: Any, share: float) -> int:
        ids = batch.get("input_ids") if isinstance(batch, dict) else None
        if ids is None:
            return 0
        tokens, length = int(ids.numel()), int(ids.shape[-1])
        self.flops += share * tokens * sum(transformer_train_flops_per_token(h, n, i, length)
                                           for h, n, i in self.sizes)
        return tokens

    def _begin(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self.sizes:
            self.sizes = encoder_sizes(pl_module)
        self.devices, self.device = max(1, int(trainer.world_size)), pl_module.device
        if self.started is None:
            self.started = time.perf_counter()

    def _end(self) -> None:
        if self.started is not None:
            self.seconds += time.perf_counter() - self.started
            self.started = None

    def on_fit_start(self, trainer, pl_module):
        self._begin(trainer, pl_module)

    def on_test_start(self, trainer, pl_module):
        self._begin(trainer, pl_module)

    def on_fit_end(self, trainer, pl_module):
        self._end()

    def on_test_end(self, trainer, pl_module):
        self._end()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.train_tokens += self._count(batch, 1.0)

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        self.eval_tokens += self._count(batch, 1 / 3)

    def on_test_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        self.eval_tokens += self._count(batch, 1 / 3)

    def state_dict(self) -> dict[str, Any]:
        running = time.perf_counter() - self.started if self.started is not None else 0.0
        return {"train_tokens": self.train_tokens, "eval_tokens": self.eval_tokens, "flops": self.flops,
                "seconds": self.seconds + running}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.train_tokens, self.eval_tokens = int(state_dict["train_tokens"]), int(state_dict["eval_tokens"])
        self.flops, self.seconds = float(state_dict["flops"]), float(state_dict["seconds"])

    def metrics(self) -> dict[str, float]:
        """The run's `compute/*` metrics; under DDP, rank 0's counts times the number of devices."""
        n = self.devices
        return {f"{COMPUTE_PREFIX}flops": self.flops * n, f"{COMPUTE_PREFIX}train_tokens": float(self.train_tokens * n),
                f"{COMPUTE_PREFIX}eval_tokens": float(self.eval_tokens * n),
                f"{COMPUTE_PREFIX}device_seconds": self.seconds * self.devices,
                f"{COMPUTE_PREFIX}peak_memory_bytes": float(peak_memory_bytes(self.device))}

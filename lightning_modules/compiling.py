"""`trainer.compile=true`: torch.compile the transformer encoders of a model, in place (fine-tuning).
Pretraining compiles its whole forward + loss instead (`PretrainModule.compile_losses`), reading the same
cache (`use_compile_cache`).

In place (`nn.Module.compile`), so parameter names, checkpoints and exports stay exactly those of the eager
model and a run can resume compiled from an eager checkpoint or the reverse. Only the encoder stack is
compiled: the task heads and the MLM output layer work on gathered positions (a count that changes every
batch), which would make each batch a new shape for the compiler.

Shapes: pretraining batches are packed to one length (`dynamic=None`: static, one graph); fine-tuning
batches are length-bucketed (`dynamic=True`: one graph with a symbolic length, so recompiles stay
bounded however many bucket lengths occur). The inductor cache goes under the work directory (where a
rerun or the next run of the same shape reads it back) unless TORCHINDUCTOR_CACHE_DIR is already set.
"""

from __future__ import annotations

import os
from pathlib import Path

from torch import nn


def use_compile_cache(cache_dir: Path) -> None:
    """The inductor cache under the work directory, unless TORCHINDUCTOR_CACHE_DIR is already set."""
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache_dir))


def compile_in_place(modules: list[nn.Module], dynamic: bool | None, cache_dir: Path | None = None) -> None:
    if cache_dir is not None:
        use_compile_cache(cache_dir)
    for module in modules:
        module.compile(dynamic=dynamic)


def compile_cache_dir(work_dir: Path) -> Path:
    return Path(work_dir) / "cache" / "torch-compile"

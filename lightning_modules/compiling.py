"""`trainer.compile=true`: torch.compile a model's transformer encoders, in place (fine-tuning; pretraining
compiles its whole loss, `PretrainModule.compile_losses`).

In place, so parameter names, checkpoints and exports stay the eager model's and a run can resume across
the switch. Only the encoders: heads work on gathered positions, a new shape every batch. Fine-tuning's
length buckets compile with `dynamic=True`, so recompiles stay bounded.
"""

from __future__ import annotations

import os
from pathlib import Path

from torch import nn

from bioablate_core.errors import ConfigError


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


def check_pretrain_compile(*, compile: bool, mode: str, accumulate: int, master_weights: bool,
                           max_predictions: int | None) -> None:
    """`trainer.compile` for pretraining fits the run, or one ConfigError line:

    - `pretrain.max_predictions` must be set: else every new width of predicted positions recompiles;
    - `reduce-overhead` (CUDA graphs) with `pretrain.accumulate` > 1 needs master weights: else gradients
      accumulate in the graph's pool, which the next replay overwrites."""
    if not compile:
        return
    if max_predictions is None:
        raise ConfigError("trainer.compile=true pretrains at one static shape: set pretrain.max_predictions (32 "
                          "keeps a 15% draw on rows of 128), else every batch's new width of predicted positions "
                          "recompiles")
    if mode == "reduce-overhead" and accumulate > 1 and not master_weights:
        raise ConfigError(f"trainer.compile_mode=reduce-overhead (CUDA graphs) with pretrain.accumulate={accumulate} "
                          "would sum gradients into the graph's memory, which each replay overwrites: set "
                          "pretrain.accumulate=1, another trainer.compile_mode, or pretrain.master_weights=true "
                          "(with trainer.precision=bf16-true), which copies every gradient out")

"""`trainer.compile=true`: torch.compile the transformer encoders of a model, in place (fine-tuning).
Pretraining compiles its whole forward + loss instead (`PretrainModule.compile_losses`), reading the same
cache (`use_compile_cache`).

In place (`nn.Module.compile`), so parameter names, checkpoints and exports stay exactly those of the eager
model and a run can resume compiled from an eager checkpoint or the reverse. Only the encoder stack is
compiled: the task heads and the MLM output layer work on gathered positions (a count that changes every
batch), which would make each batch a new shape for the compiler.

Shapes: pretraining batches are packed to one length and, with `pretrain.max_predictions` (which
`check_pretrain_compile` requires), one width of predicted positions (`dynamic=None`: static, one graph); fine-tuning
batches are length-bucketed (`dynamic=True`: one graph with a symbolic length, so recompiles stay
bounded however many bucket lengths occur). The inductor cache goes under the work directory (where a
rerun or the next run of the same shape reads it back) unless TORCHINDUCTOR_CACHE_DIR is already set.
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

    - the compiled step has one static shape only with `pretrain.max_predictions` set: unset, the predicted
      positions' width is each batch's largest draw, and every new width recompiles;
    - `reduce-overhead` (CUDA graphs) with `pretrain.accumulate` > 1 would accumulate gradients into `.grad`
      tensors that live in the graph's memory pool, which the next micro-batch's replay overwrites (wrong
      gradients or an error, depending on torch's version). Master weights copy each gradient out into its
      fp32 master after every micro-batch, so they make the combination safe."""
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

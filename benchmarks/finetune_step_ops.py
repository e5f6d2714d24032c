"""Fine-tuning's training step, before and after taking the host out of it, side by side in one process:
ATen operators, host-device syncs and host microseconds per step at a toy width.

    python -m benchmarks.finetune_step_ops --data-dir ../shared/data --task bc5-chem chemprot

The steps (all fp32, the same model, examples and batch size; `benchmarks.step_ops` counts):

- **before**: the step as the Lightning path took it until now: dynamic padding, the [B, T] padding mask
  (transformers asks `mask.all()` of it every step), and the loss read on the host every step (Lightning's
  per-step logging and the non-finite-loss check each read it);
- **after**: `FineTuneModule.training_step` as it is now: the prepared [B, 1, 1, T] mask, losses left on
  the device, static shapes (`finetune.static_shapes`: widths in multiples of 32, full batches), eager;
- **after-compiled**: the same with the forward, loss and backward compiled whole (`compile_step`,
  fullgraph), one graph per width bucket; its operator count is what the compiled code still
  dispatches through ATen (matmuls, the fused optimizer), its fused kernels run without dispatch.

Every side's operators are counted the same way, by the profiler (`benchmarks.step_ops.profiled_ops`: under
a dispatch mode the compiled side would fall back to eager).

The op count does not depend on the width, so at a toy width (`--hidden-size 32`) the host time per step
is the dispatch overhead a GPU step pays on top of its kernels. Each side's time is the median over
`--steps` steps (the first `--warmup` steps, compilation included, not timed).
"""

from __future__ import annotations

import argparse
import statistics
import time
from itertools import count
from pathlib import Path

import torch

from benchmarks.common import add_shared_arguments, benchmark_main, machine, start_run
from benchmarks.step_ops import profiled_ops

SIDES = ("before", "after", "after-compiled")


def build(task: str, side: str, args: argparse.Namespace):
    """A side's step function over its endless stream of training batches."""
    from ablations import api
    from datamodules.finetune_data import FinetuneDataModule, FinetuneDataOptions
    from datamodules.registry import get_dataset
    from lightning_modules.finetune import FineTuneModule
    from lightning_modules.heads import HeadSpec
    from lightning_modules.models import load_encoder
    from lightning_modules.optim import adamw_with_linear_warmup

    size = dict(hidden_size=args.hidden_size, num_layers=args.num_layers, num_heads=2,
                intermediate_size=4 * args.hidden_size)
    cfg = api.config("micro", [f"model.{k}={v}" for k, v in size.items()], task=task)
    spec = get_dataset(task)
    torch.manual_seed(0)
    encoder, tokenizer = load_encoder(cfg.model, args.data_dir, cfg.finetune.dropout)
    options = FinetuneDataOptions(max_length=args.max_length, batch_size=args.batch_size, eval_batch_size=64,
                                  max_train_examples=args.max_train_examples, max_eval_examples=8, seed=0,
                                  static_shapes=side != "before")
    dm = FinetuneDataModule(spec, args.data_dir, tokenizer, options,
                            cache_dir=Path(args.work_dir) / "cache" / "tokenized")
    dm.setup()
    if len(tokenizer) > encoder.get_input_embeddings().num_embeddings:
        encoder.resize_token_embeddings(len(tokenizer))
    head = HeadSpec.from_config(cfg.finetune, spec.task_type).build(dm.encoder, encoder.config.hidden_size)
    module = FineTuneModule(encoder, head, 1e-4, 0.01, 0.1).train()
    if side == "after-compiled":
        module.compile_step(buckets=len(dm.shapes("train").widths()))
    optimizer = adamw_with_linear_warmup(module, 1e-4, 0.01, 0.1, total_steps=100_000)["optimizer"]
    loader = dm.train_dataloader()

    def batches():
        for epoch in count():
            loader.sampler.set_epoch(epoch)
            yield from loader

    stream = batches()

    def before_loss(batch):  # the step as it was: transformers' own mask handling, read on the host
        hidden = encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         token_type_ids=batch["token_type_ids"]).last_hidden_state
        loss = head.loss(head(hidden, batch), batch)
        bool(torch.isfinite(loss.detach()).all())  # the non-finite-loss check, every step
        return loss

    def step(batch) -> torch.Tensor:
        loss = before_loss(batch) if side == "before" else module.training_step(batch, 0)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if side == "before":
            float(loss)  # Lightning's per-step logging of train/loss
        return loss

    return step, stream


def measure(task: str, args: argparse.Namespace) -> dict:
    out = {}
    for side in args.sides:
        step, stream = build(task, side, args)
        batches = [next(stream) for _ in range(args.warmup + args.steps)]
        for batch in batches[:args.warmup]:  # compilation, first-touch allocations
            step(batch)
        seconds = []
        for batch in batches[args.warmup:]:
            start = time.perf_counter()
            step(batch)
            seconds.append(time.perf_counter() - start)
        counts = [profiled_ops(lambda b=b: step(b)) for b in batches[args.warmup:args.warmup + args.count_steps]]
        out[side] = {"ops_per_step": statistics.mean(c.ops for c in counts),
                     "syncs_per_step": statistics.mean(c.syncs for c in counts),
                     "host_us_per_step": 1e6 * statistics.median(seconds)}
    return out


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", nargs="+", default=["bc5-chem", "chemprot"])
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    parser.add_argument("--hidden-size", type=int, default=32, help="toy width: the op count does not depend on it")
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--max-train-examples", type=int, default=400)
    parser.add_argument("--steps", type=int, default=30, help="timed steps per side")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first (compilation)")
    parser.add_argument("--count-steps", type=int, default=5, help="steps whose operators are counted")
    parser.add_argument("--device", choices=["cpu"], default="cpu", help="the host's own cost: the CPU")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: the host's own cost)")
    add_shared_arguments(parser, cache="tokenization cache")
    return parser


def run(args: argparse.Namespace) -> dict:
    start_run(args)
    return {"device": machine(), "hidden_size": args.hidden_size,
            "results": {task: measure(task, args) for task in args.task}}


def report(out: dict) -> str:
    lines = [f"machine: {out['device']}; toy width {out['hidden_size']}, fp32",
             f"  {'task':<10}{'step':<16}{'ATen ops':>10}{'syncs':>7}{'host us':>10}"]
    for task, sides in out["results"].items():
        for side, x in sides.items():
            lines.append(f"  {task:<10}{side:<16}{x['ops_per_step']:>10.0f}{x['syncs_per_step']:>7.1f}"
                         f"{x['host_us_per_step']:>10.0f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return benchmark_main(parser, run, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())

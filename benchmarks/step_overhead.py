"""Host overhead of one pretraining step: ATen operators issued, host-device syncs and host microseconds
per step, today's step against the sync-free, static-shape one, side by side in one process.

    python -m benchmarks.step_overhead --data-dir ../shared/data            # CPU, toy width
    python -m benchmarks.step_overhead --device cuda --size base --batch-size 64

At toy width (hidden 32) the matmuls cost nothing, so the host time per step is what dispatching the
step's operators costs: the part of a GPU step the device waits on when it is not captured in a graph.
The operators are counted the same way for every side (`benchmarks.step_ops.profiled_ops`): every ATen
call the step makes through the dispatcher, including those a compiled graph still calls (matmuls, random
numbers; the compiler's fused loops are one call each in its generated code and not ATen calls). A sync is a
call that reads a device value back to the host (`.item()`, `float(t)`, `bool(t)`, a data-dependent shape:
`nonzero`, boolean indexing).

Sides (the same model, data, optimizer and schedule; the same batches in the same order):

- **today**: the step as it was before: the MLM head on `hidden[labels != -100]` (boolean indexing),
  `float(loss)` for the loss history and `float(mask.sum())` for the token rate after every step,
  per-tensor gradient clipping, fused AdamW with a float learning rate;
- **static**: `PretrainModule.training_step` on fixed-width predicted positions (`pretrain.max_predictions`)
  gathered by index, losses kept on the device, for-each clipping, fused capturable AdamW, eager;
- **static-compiled**: the same, forward + loss + backward compiled with `fullgraph=True` and the
  optimizer step compiled too;
- **static-graphed** (CUDA only): compiled with `mode="reduce-overhead"` (CUDA graphs).

Every side runs its forward under `--precision`'s autocast, as Lightning's `bf16-mixed` does (auto: bf16
where the device computes it natively, else fp32), and reports real tokens/s and MFU of that dtype's
measured matmul peak: a GPU step in fp32 is device-bound whatever the host does.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import torch
import torch.nn.functional as F

from benchmarks.pretrain_throughput import SIZES
from benchmarks.step_ops import profiled_ops

# ------------------------------------------------------------------------------------------- sides

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def autocast(device: torch.device, precision: str):
    """The forward's autocast as Lightning's `bf16-mixed` runs it (no weight cache); nothing for fp32."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=DTYPES[precision], cache_enabled=False)


SIDES = ("today", "static", "static-compiled", "static-graphed")


def build_module(cfg, vocab: list[str], device: torch.device, total_steps: int, optimizer: str = "adamw"):
    """A freshly initialised BERT MLM model (seed 0) in its PretrainModule, on `device`, with its optimizer
    and schedule."""
    from lightning_modules.pretrain import PretrainModule
    from lightning_modules.pretrain_models import ObjectiveSpec, build_model

    p = cfg.pretrain
    torch.manual_seed(0)
    objective = ObjectiveSpec("bert")
    model = build_model(objective, len(vocab), vocab.index("[PAD]"), cfg.model, p.seq_len)
    module = PretrainModule(model, objective=objective, lr=p.lr, weight_decay=p.weight_decay,
                            warmup_ratio=p.warmup_ratio, total_steps=total_steps, optimizer=optimizer,
                            seed=0).to(device)
    module.train()
    opt = module.configure_optimizers()
    return module, opt["optimizer"], opt["lr_scheduler"]["scheduler"]


def today_optimizer(module, lr: float, weight_decay: float, warmup_ratio: float, total_steps: int):
    """Today's AdamW: fused where supported, the learning rate a float (not capturable)."""
    from transformers import get_linear_schedule_with_warmup

    from lightning_modules.optim import fused_supported, parameter_groups

    optimizer = torch.optim.AdamW(parameter_groups(module.model, weight_decay), lr=lr,
                                  fused=True if fused_supported(module.model) else None)
    return optimizer, get_linear_schedule_with_warmup(optimizer, int(warmup_ratio * total_steps), total_steps)


def today_step(module, optimizer, scheduler, batch: dict, history: list[float], clip: float = 1.0,
               precision: str = "fp32") -> torch.Tensor:
    """One optimizer step as PretrainModule and Lightning ran it before the sync-free step: the MLM head on
    the boolean-indexed masked positions, the loss read back for the history, per-tensor clipping, the
    token count read back for the rate; the forward under `precision`'s autocast."""
    module.on_train_batch_start(batch, 0)
    selected = batch["labels"] != -100
    with autocast(batch["input_ids"].device, precision):
        embeds = module.parts.embeddings(batch["input_ids"])
        out = module.parts.encoder(inputs_embeds=embeds, attention_mask=batch["attention_mask"],
                                   token_type_ids=batch["token_type_ids"])
        logits = module.parts.mlm_head(out.last_hidden_state[selected])
        loss = F.cross_entropy(logits.float(), batch["labels"][selected])
    history.append(float(loss.detach()))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(module.parameters(), clip)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    float(batch["attention_mask"].sum())  # the token rate's count
    return loss.detach()


class StaticStep:
    """One optimizer step of the sync-free, static-shape path: `PretrainModule.training_step` (fixed-width
    positions gathered by index, losses kept on the device), backward, for-each clipping, the fused
    capturable AdamW, the schedule. With `compile`, forward + loss (+ backward) is one fullgraph graph
    and clipping + the optimizer step are compiled too (torch.optim breaks that graph on purpose around its
    no-grad switch); `mode` is torch.compile's (reduce-overhead: CUDA graphs). The forward runs under
    `precision`'s autocast, as Lightning's `bf16-mixed` runs `training_step`."""

    def __init__(self, module, optimizer, scheduler, clip: float = 1.0, compile: bool = False,
                 mode: str | None = None, precision: str = "fp32"):
        from lightning_modules.optim import clip_gradients

        self.module, self.optimizer, self.scheduler = module, optimizer, scheduler
        self.precision = precision
        self.device = next(module.parameters()).device
        self.parameters = [p for p in module.parameters() if p.requires_grad]

        step = type(optimizer).step  # not the instance's, which the schedule wraps (a wrapper the compiler skips)

        def update() -> None:
            clip_gradients(self.parameters, clip)
            step(optimizer)

        self.update = update
        if compile:
            module.compile_losses(mode)
            # not fullgraph: torch.optim's step breaks the graph on purpose around its no-grad switch
            self.update = torch.compile(update, mode=mode)

    def __call__(self, batch: dict) -> torch.Tensor:
        self.module.on_train_batch_start(batch, 0)
        with autocast(self.device, self.precision):
            loss = self.module.training_step(batch, 0)
        loss.backward()
        self.update()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()


def batches(cfg, vocab: list[str], shards, steps: int, max_predictions: int | None, device: torch.device
            ) -> list[dict]:
    """The first `steps` micro-batches of a run of `cfg` (seed 0), masked as the loader's workers mask them,
    on `device`."""
    from datamodules.pretrain.data import BatchingSpec, MicroBatches
    from datamodules.pretrain.masking import MaskingSpec, MaskTokens

    p = cfg.pretrain
    batching = BatchingSpec(p.batch_size, accumulate=1, max_steps=steps, checkpoint_every=steps, seed=0)
    masking = MaskingSpec(p.masking, p.mask_rate, "constant", max_predictions)
    data = MicroBatches(shards, range(steps), rank=0, world_size=1, batching=batching, masking=masking,
                        tokens=MaskTokens.from_vocab(vocab))
    return [{k: v.to(device) if torch.is_tensor(v) else v for k, v in data.batch(m).items()} for m in range(steps)]


# ------------------------------------------------------------------------------------------- measuring

def host_us(step, batches: list[dict], device: torch.device) -> float:
    """Median host microseconds per step over `batches` (the device synchronised once after each step:
    on a CPU the whole step, on a GPU the time to issue it plus what it waits for); each side's step
    enters its own autocast, so the time is that of the precision it runs in."""
    from benchmarks.common import sync

    times = []
    for batch in batches:
        start = time.perf_counter()
        step(batch)
        sync(device)
        times.append(time.perf_counter() - start)
    times.sort()
    return 1e6 * times[len(times) // 2]


def build_sides(cfg, vocab, device: torch.device, total: int, sides: list[str], precision: str = "fp32") -> dict:
    """side name -> step(batch), its forward in `precision`'s autocast; every side's model starts from the
    same weights (seed 0)."""
    p = cfg.pretrain
    out = {}
    for name in sides:
        module, optimizer, scheduler = build_module(cfg, vocab, device, total)
        if name == "today":
            optimizer, scheduler = today_optimizer(module, p.lr, p.weight_decay, p.warmup_ratio, total)
            history: list[float] = []
            out[name] = (lambda m, o, s, h: lambda batch: today_step(m, o, s, batch, h, precision=precision))(
                module, optimizer, scheduler, history)
        else:
            out[name] = StaticStep(module, optimizer, scheduler, compile=name != "static",
                                   mode="reduce-overhead" if name == "static-graphed" else None, precision=precision)
    return out


def parser() -> argparse.ArgumentParser:
    from benchmarks.common import add_shared_arguments

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="toy")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--max-predictions", type=int, default=32, help="the static sides' predicted positions "
                        "per row (32 keeps a 15%% draw on rows of 128)")
    parser.add_argument("--rounds", type=int, default=10, help="timed steps per side")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per side first (compiling)")
    parser.add_argument("--sides", nargs="+", choices=SIDES, help="default: all the device runs")
    parser.add_argument("--masking", choices=["wwm", "wordpiece"], default="wwm")
    parser.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto",
                        help="every side's autocast (auto: bf16 where the device computes it natively, else fp32)")
    parser.add_argument("--vocab", default="pubmedbert-uncased", help="staged vocabulary or vocab.txt")
    parser.add_argument("--max-words", type=int, default=30_000, help="PubMed words to tokenize")
    parser.add_argument("--threads", type=int, help="CPU threads (default: torch's, one per core)")
    add_shared_arguments(parser, cache="shard cache")
    return parser


def run(args: argparse.Namespace) -> dict:
    from benchmarks.common import machine, matmul_peak, resolve_precision, start_run, transformer_train_flops_per_token
    from benchmarks.pretrain_throughput import prepare
    from datamodules.pretrain.vocab import read_vocab

    device = start_run(args)
    precision = resolve_precision(args.precision, device)
    cfg, vocab_path, shards = prepare(args)
    vocab = read_vocab(vocab_path)
    sides = args.sides or [s for s in SIDES if s != "static-graphed" or device.type == "cuda"]
    total = args.warmup + args.rounds + 1
    # the same masks for every side (seed 0); today's reads `labels`, the static sides the fixed slots
    data = batches(cfg, vocab, shards, total, args.max_predictions, device)
    steps = build_sides(cfg, vocab, device, total, sides, precision)
    peak = matmul_peak(DTYPES[precision], device, args.peak_size, args.peak_seconds)
    size = SIZES[args.size]
    flops = transformer_train_flops_per_token(size["hidden_size"], size["num_layers"], size["intermediate_size"],
                                              args.seq_len)
    out = {"device": machine(), "size": args.size, **size, "batch_size": args.batch_size,
           "seq_len": args.seq_len, "max_predictions": args.max_predictions, "precision": precision, "peak": peak,
           "sides": sides}
    tokens = sum(b["tokens"] for b in data[args.warmup + 1:]) / len(data[args.warmup + 1:])
    for name, step in steps.items():
        try:  # a side that fails (a compiler error on a new device) is recorded; the others still count
            for batch in data[:args.warmup]:
                step(batch)
            counted = profiled_ops(lambda: step(data[args.warmup]))
            ops, syncs = counted.ops, counted.syncs
            us = host_us(step, data[args.warmup + 1:], device)
            rate = tokens / (us / 1e6)
            out[name] = {"ops": ops, "syncs": syncs, "host_us": us, "tokens_per_s": rate, "mfu": flops * rate / peak}
        except Exception as error:  # noqa: BLE001
            out[name] = {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}"}
    if "ops" in out.get("today", {}):
        out["ratios"] = {name: {"ops": out[name]["ops"] / out["today"]["ops"],
                                "host_us": out[name]["host_us"] / out["today"]["host_us"]}
                         for name in sides if name != "today" and "ops" in out[name]}
    return out


def report(out: dict) -> str:
    lines = [f"machine: {out['device']}",
             f"one MLM pretraining step, {out['size']} ({out['num_layers']} layers, {out['hidden_size']} wide), "
             f"batch {out['batch_size']} x {out['seq_len']}, static sides {out['max_predictions']} predictions a row, "
             f"{out['precision']} (peak {out['peak'] / 1e12:.3g} TFLOP/s):",
             f"  {'':<17}{'ATen ops':>9}{'syncs':>7}{'host us':>10}{'tokens/s':>11}{'MFU':>7}"
             f"{'ops / today':>13}{'us / today':>12}"]
    for name in out["sides"]:
        x, r = out[name], out.get("ratios", {}).get(name)
        if "error" in x:
            lines.append(f"  {name:<17}failed: {x['error']}")
            continue
        ratio = f"{r['ops']:>13.2f}{r['host_us']:>12.2f}" if r else ""
        lines.append(f"  {name:<17}{x['ops']:>9}{x['syncs']:>7}{x['host_us']:>10.0f}{x['tokens_per_s']:>11.0f}"
                     f"{x['mfu']:>7.1%}{ratio}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.common import benchmark_main

    return benchmark_main(parser, run, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())

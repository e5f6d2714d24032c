"""Pretraining throughput: bioablate's MLM training step vs naive and strong Hugging Face baselines, in one
process.

    python -m benchmarks.pretrain_throughput --data-dir ../shared/data          # CPU, mini size
    python -m benchmarks.pretrain_throughput --device cuda --size base --batch-size 64 --rounds 20

All three sides train the same randomly initialised BERT (mini: 4 layers, 256 wide, 4 heads, intermediate 1024;
base: BERT-base) with the staged PubMedBERT vocabulary (30,522 entries) on the same packed PubMed
sequences of 128 tokens (the same rows of the same shards, in the same order), same batch size, AdamW,
linear warm-up/decay, gradient clipping at 1.0:

- **ours**: `MicroBatches` (memory-mapped shards, masking as tensor ops, whole-word masking by default)
  -> `PretrainModule.training_step` (SDPA attention, the MLM output layer only at the masked positions,
  gathered by index; `--max-predictions` fixes their number per row, one static shape)
  under bf16 autocast (`--precision auto`: where the device computes bf16 natively, else fp32) -> backward ->
  gradient clipping, AdamW (`lightning_modules.optim`: fused where supported), schedule step: what
  Lightning's loop does with `precision=bf16-mixed` (autocast without its weight cache, as Lightning's),
  `gradient_clip_val=1`.
- **hf-naive**: what `run_mlm.py` does by default: `DataCollatorForLanguageModeling` (15% wordpiece
  masking, 80/10/10, dynamic padding) over the same token ids -> `BertForMaskedLM(input_ids,
  attention_mask, labels)` in fp32 (transformers' default attention, logits at every position, loss with
  ignore_index) -> backward -> clipping, `torch.optim.AdamW` (for-each kernel), schedule step.
- **hf-strong**: the best configuration of the same stack a practitioner would pick: the same collator
  with `pad_to_multiple_of=8`, `BertForMaskedLM` with `attn_implementation="sdpa"` under bf16 autocast
  (as `Trainer(bf16=True)` runs it through Accelerate; `--strong-precision auto`: fp32 on a CPU that only
  emulates bf16, where a practitioner would not pick it), fused AdamW (`fused=True` where the parameters
  allow it), and with `--compile` the model `torch.compile`d (off by default: see docs/performance.md).

With `--compile`, ours also runs compiled (`ours-compiled`) and, with `--graphed` on CUDA, captured as CUDA
graphs (`ours-graphed`: `trainer.compile_mode=reduce-overhead`); `--sides` keeps some of them (the GPU
session's headline: ours eager, compiled and graphed against hf-strong compiled), `--packing` trains ours
and the baselines on packed rows (`pretrain.packing`), and each side reports its warm-up seconds (where a
compiled side compiles).

Steps alternate (benchmarks.common.interleaved), so a busy machine slows all alike and the ratios stay
fair. Reported: real (non-pad) tokens/s of each, our ratio against each baseline, and MFU = encoder model
FLOPs of the real tokens per second / the measured matmul peak of the dtype each side computes in, and on
a GPU also of bf16 for every side (the MLM output layer is not counted:
a baseline computing it at every position gets no credit for the positions the loss ignores).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

from benchmarks.common import (
    COUNT,
    SEQUENCE,
    WARMUP,
    add_shared_arguments,
    benchmark_main,
    bf16_native,
    device_argument,
    interleaved,
    machine,
    matmul_peak,
    resolve_precision,
    start_run,
    transformer_train_flops_per_token,
)
from datamodules.pretrain.masking import MASKING_MODES

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}

# micro: the CI plumbing size (seconds on a CPU); its numbers mean nothing. toy: the width at which a
# step's time is all host dispatch (benchmarks.step_overhead)
SIZES = {"toy": dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64),
         "micro": dict(hidden_size=64, num_layers=2, num_heads=2, intermediate_size=256),
         "mini": dict(hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024),
         "base": dict(hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072)}


def prepare(args: argparse.Namespace):
    """Config, vocabulary and shards (built once, cached under the work directory)."""
    from ablations import api
    from ablations.run.pretrain_inputs import prepare_shards, resolve_pretrain_vocab
    from datamodules.pretrain.corpora import corpus_fingerprint

    overrides = [f"model.{k}={v}" for k, v in SIZES[args.size].items()] + [
        f"pretrain.vocab={args.vocab}", f"pretrain.seq_len={args.seq_len}", f"pretrain.batch_size={args.batch_size}",
        f"pretrain.max_words={args.max_words}", f"pretrain.masking={args.masking}", "pretrain.accumulate=1",
        f"pretrain.packing={str(getattr(args, 'packing', False)).lower()}"]
    cfg = api.config("mini", overrides, task="pretrain", data_dir=str(args.data_dir), work_dir=str(args.work_dir))
    corpus_fp = corpus_fingerprint(cfg.pretrain.corpus, args.data_dir)
    vocab_path = resolve_pretrain_vocab(cfg, args.data_dir, args.work_dir, corpus_fp)
    shards = prepare_shards(cfg, args.data_dir, args.work_dir, vocab_path, corpus_fp)
    return cfg, vocab_path, shards


def build_ours(cfg, vocab_path: Path, shards, device: torch.device, precision: str, total_steps: int,
               compile: bool = False, max_predictions: int | None = None, mode: str | None = None):
    from datamodules.pretrain.data import BatchingSpec, MicroBatches
    from datamodules.pretrain.masking import MaskingSpec, MaskTokens
    from datamodules.pretrain.vocab import read_vocab
    from lightning_modules.optim import clip_gradients
    from lightning_modules.pretrain import PretrainModule
    from lightning_modules.pretrain_models import ObjectiveSpec, build_model

    p = cfg.pretrain
    vocab = read_vocab(vocab_path)
    torch.manual_seed(0)
    objective = ObjectiveSpec("bert")
    model = build_model(objective, len(vocab), vocab.index("[PAD]"), cfg.model, p.seq_len)
    module = PretrainModule(model, objective=objective, lr=p.lr, weight_decay=p.weight_decay,
                            warmup_ratio=p.warmup_ratio, total_steps=total_steps, seed=0).to(device)
    module.train()
    if compile:  # as `trainer.compile=true` does (ablations.run.pretrain): forward + loss + backward
        module.compile_losses(mode)
    opt = module.configure_optimizers()
    optimizer, scheduler = opt["optimizer"], opt["lr_scheduler"]["scheduler"]
    batching = BatchingSpec(p.batch_size, accumulate=1, max_steps=total_steps, checkpoint_every=total_steps, seed=0)
    data = MicroBatches(shards, range(total_steps), rank=0, world_size=1, batching=batching,
                        masking=MaskingSpec(p.masking, p.mask_rate, p.mask_schedule, max_predictions),
                        tokens=MaskTokens.from_vocab(vocab))
    batches = iter(data)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    tokens: list[int] = []

    def step() -> float:
        batch = {k: v.to(device, non_blocking=True) if torch.is_tensor(v) else v for k, v in next(batches).items()}
        module.on_train_batch_start(batch, 0)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32, cache_enabled=False):
            loss = module.training_step(batch, 0)
        loss.backward()
        clip_gradients(module.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        tokens.append(batch["tokens"])  # counted by the loader: nothing read back from the device
        return float(batch["tokens"])

    return step, data.plan, model.config, tokens


def build_baseline(cfg, vocab_path: Path, shards, plan, our_config, device: torch.device, total_steps: int,
                   strong: bool = False, compile: bool = False, precision: str = "bf16"):
    """A Hugging Face MLM training step over the rows ours trains on: naive (fp32, as run_mlm.py by
    default) or, with `strong`, `precision` autocast (bf16 where the device has it) + SDPA + fused AdamW
    (+ torch.compile with `compile`)."""
    from transformers import (
        BertConfig,
        BertForMaskedLM,
        DataCollatorForLanguageModeling,
        get_linear_schedule_with_warmup,
    )

    from datamodules.pretrain.vocab import hf_tokenizer
    from lightning_modules.optim import fused_supported

    p = cfg.pretrain
    tokenizer = hf_tokenizer(vocab_path, True)
    config = BertConfig(**{k: getattr(our_config, k) for k in (
        "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
        "max_position_embeddings", "pad_token_id")})
    torch.manual_seed(0)
    model = (BertForMaskedLM._from_config(config, attn_implementation="sdpa") if strong
             else BertForMaskedLM(config)).to(device)
    model.train()
    fused = True if strong and fused_supported(model) else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=p.lr, weight_decay=p.weight_decay, fused=fused)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(p.warmup_ratio * total_steps), total_steps)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=p.mask_rate,
                                               pad_to_multiple_of=8 if strong else None)
    forward = torch.compile(model) if compile else model
    precision = precision if strong else "fp32"
    dtype = DTYPES[precision]
    micro = iter(range(total_steps))

    def step() -> float:
        rows = sorted(plan.indices(next(micro)))  # the rows ours trains on, in the same order
        examples = [{"input_ids": shards.input_ids[r, :shards.lengths[r]].tolist()} for r in rows]
        batch = {k: v.to(device, non_blocking=True) for k, v in collator(examples).items()}
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            loss = forward(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        return float(batch["attention_mask"].sum())

    setup = {"attention": model.config._attn_implementation, "dtype": precision,
             "fused_adamw": bool(fused), "compiled": compile}
    return step, setup


BASELINES = ("hf-naive", "hf-strong")
# with --compile: ours and hf-strong compiled too; each baseline is compared with the side of ours named here
COMPARED_WITH = {"hf-naive": "ours", "hf-strong": "ours", "hf-strong-compiled": "ours-compiled"}
SIDES = ("ours", "ours-compiled", "ours-graphed", *BASELINES, "hf-strong-compiled")


def side_names(compiled: bool, graphed: bool = False, only: list[str] | None = None) -> list[str]:
    """The sides in report order (`only`: those of them; ours always)."""
    names = ["ours", *(["ours-compiled"] if compiled else []), *(["ours-graphed"] if compiled and graphed else []),
             *BASELINES, *(["hf-strong-compiled"] if compiled else [])]
    return [n for n in names if only is None or n == "ours" or n in only]


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="mini")
    parser.add_argument("--device", type=device_argument, default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-size", type=COUNT, default=32)
    parser.add_argument("--seq-len", type=SEQUENCE, default=128)
    parser.add_argument("--rounds", type=COUNT, default=8, help="timed steps per side")
    parser.add_argument("--warmup", type=WARMUP, default=2, help="untimed steps per side first")
    parser.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto",
                        help="ours (auto: bf16 where the device computes it natively, else fp32)")
    parser.add_argument("--strong-precision", choices=["auto", "bf16", "fp32"], default="auto",
                        help="hf-strong's autocast dtype (auto: as --precision)")
    parser.add_argument("--masking", choices=list(MASKING_MODES), default="wwm", help="ours")
    parser.add_argument("--max-predictions", type=int, help="ours: predicted positions per row "
                        "(pretrain.max_predictions; default: as drawn)")
    parser.add_argument("--compile", action="store_true",
                        help="also time ours and hf-strong torch.compile'd (sides ours-compiled, hf-strong-compiled)")
    parser.add_argument("--graphed", action="store_true", help="with --compile on CUDA: also ours as CUDA graphs "
                        "(side ours-graphed, reduce-overhead)")
    parser.add_argument("--sides", nargs="+", choices=SIDES, help="time only these (ours always)")
    parser.add_argument("--packing", action="store_true", help="packed rows (pretrain.packing), every side")
    parser.add_argument("--vocab", default="pubmedbert-uncased", help="staged vocabulary or vocab.txt")
    parser.add_argument("--max-words", type=COUNT, default=300_000, help="PubMed words to tokenize")
    parser.add_argument("--threads", type=COUNT, help="CPU threads (default: torch's, one per core)")
    add_shared_arguments(parser, cache="shard cache")
    return parser


def run(args: argparse.Namespace) -> dict:
    """Build the three sides, time them interleaved, and return the results (what --json writes)."""
    device = start_run(args)

    precision, strong_precision = (resolve_precision(p, device) for p in (args.precision, args.strong_precision))
    cfg, vocab_path, shards = prepare(args)
    total = args.warmup + args.rounds + 1
    ours, plan, config, our_tokens = build_ours(cfg, vocab_path, shards, device, precision, total,
                                                max_predictions=args.max_predictions)
    sides = {"ours": ours}
    setups = {"ours": {"dtype": precision, "compiled": False}}
    names = side_names(args.compile, args.graphed and device.type == "cuda", args.sides)
    for name, mode in (("ours-compiled", None), ("ours-graphed", "reduce-overhead")):
        if name in names:
            sides[name], *_ = build_ours(cfg, vocab_path, shards, device, precision, total, compile=True,
                                         max_predictions=args.max_predictions, mode=mode)
            setups[name] = {"dtype": precision, "compiled": True, "mode": mode or "default"}
    for name in names:
        if name.startswith("hf-"):
            sides[name], setups[name] = build_baseline(cfg, vocab_path, shards, plan, config, device, total,
                                                       strong=name != "hf-naive", compile=name.endswith("-compiled"),
                                                       precision=strong_precision)
    # the peak of each dtype a side computes in; bf16's also on a GPU (the headline MFU there), not on a
    # CPU that only emulates it (seconds per matmul, and no side would pick it)
    used = {x["dtype"] for x in setups.values()} | ({"bf16"} if device.type == "cuda" else set())
    peaks = {dtype: matmul_peak(DTYPES[dtype], device, args.peak_size, args.peak_seconds) for dtype in sorted(used)}
    timings = interleaved(sides, rounds=args.rounds, warmup=args.warmup, device=device)
    size = SIZES[args.size]
    flops = transformer_train_flops_per_token(size["hidden_size"], size["num_layers"], size["intermediate_size"],
                                              args.seq_len)
    out = {"device": machine(), "bf16_native": bf16_native(device), "size": args.size,
           "batch_size": args.batch_size, "seq_len": args.seq_len, "vocab_size": config.vocab_size,
           "peaks": peaks, "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"), "sides": names,
           "packing": bool(args.packing), "max_predictions": args.max_predictions}
    for name, t in timings.items():
        rate = t.per_second
        mfu = flops * rate / peaks[setups[name]["dtype"]]
        out[name] = {**setups[name], "tokens_per_s": rate, "mfu": mfu,
                     "mfu_bf16": flops * rate / peaks["bf16"] if "bf16" in peaks else None,
                     "step_spread": t.spread, "steps": len(t.seconds), "warmup_s": t.warmup_s}
    for name in names[1:]:
        assert our_tokens[-args.rounds:] == timings[name].items, f"{name} saw other batches than ours"
    out["ratios"] = {b: out[COMPARED_WITH[b]]["tokens_per_s"] / out[b]["tokens_per_s"]
                     for b in names if b in COMPARED_WITH and COMPARED_WITH[b] in names}
    if "ours-graphed" in names and "hf-strong-compiled" in names:
        out["graphed_ratio"] = out["ours-graphed"]["tokens_per_s"] / out["hf-strong-compiled"]["tokens_per_s"]
    return out


def report(out: dict) -> str:
    size = SIZES[out["size"]]
    peaks = out["peaks"]
    lines = [f"machine: {out['device']}, bf16 native: {out['bf16_native']}, "
             f"OMP_WAIT_POLICY={out['omp_wait_policy']}",
             "matmul peak: " + ", ".join(f"{d} {v / 1e9:.1f} GFLOP/s" for d, v in peaks.items()),
             f"MLM pretraining, {out['size']} ({size['num_layers']} layers, {size['hidden_size']} wide), vocabulary "
             f"{out['vocab_size']}, batch {out['batch_size']} x {out['seq_len']} tokens, "
             f"{out['ours']['steps']} interleaved steps each" + (", packed rows" if out.get("packing") else "") + ":",
             f"  {'':<19}{'tokens/s':>10}{'MFU':>8}{'MFU bf16':>10}  dtype  step spread  warm-up s  "
             "(MFU: of its dtype's peak)"]
    for name in out["sides"]:
        x = out[name]
        bf16 = "-" if x["mfu_bf16"] is None else f"{x['mfu_bf16']:.1%}"
        lines.append(f"  {name:<19}{x['tokens_per_s']:>10.0f}{x['mfu']:>8.1%}{bf16:>10}  "
                     f"{x['dtype']:<5}  {x['step_spread']:>11.0%}  {x.get('warmup_s', 0):>9.1f}")
    lines += [f"  ratio (tokens/s, {COMPARED_WITH[b]} / {b}): {r:.2f}x" for b, r in out["ratios"].items()]
    if "graphed_ratio" in out:
        lines.append(f"  ratio (tokens/s, ours-graphed / hf-strong-compiled): {out['graphed_ratio']:.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return benchmark_main(parser, run, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())

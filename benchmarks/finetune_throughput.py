"""Fine-tuning throughput: bioablate's training step vs naive and strong Hugging Face Trainer baselines, in
one process.

    python -m benchmarks.finetune_throughput --data-dir ../shared/data                 # CPU, mini size
    python -m benchmarks.finetune_throughput --device cuda --size base --rounds 20     # a GPU node

All three sides train the same randomly initialised BERT (mini: 4 layers, 256 wide, 4 heads, intermediate 1024;
base: BERT-base) on the same real training sentences, tokenized the same way (BLURB task encoders,
labels on first sub-tokens), with the same batch size:

- **ours**: `FinetuneDataModule` (tokenization cache, length-bucketed batches, dynamic padding) ->
  `FineTuneModule.training_step` (encoder + task head + loss) under bf16 autocast (`--precision auto`:
  where the device computes bf16 natively, else fp32) -> backward -> AdamW
  (`lightning_modules.optim`: fused where supported) + schedule step.
- **hf-naive**: what `run_ner.py` / `run_glue.py` with `--pad_to_max_length` do: inputs padded to the
  dataset's max length (512 for BC5-chem, 256 for ChemProt; `--baseline-max-length` to change it),
  `BertForTokenClassification` / `BertForSequenceClassification` in fp32, random batches, the Trainer's
  default optimizer.
- **hf-strong**: the best configuration of the same stack: `TrainingArguments(bf16=True,
  train_sampling_strategy="group_by_length", optim="adamw_torch_fused")` (transformers 5's spelling of
  `group_by_length=True`), the model with `attn_implementation="sdpa"`, dynamic padding
  (`DataCollatorForTokenClassification` / `DataCollatorWithPadding`, no pad-to-max), and with `--compile`
  `torch_compile=True` (off by default: see docs/performance.md). `--strong-precision auto`: bf16=False
  on a CPU that only emulates bf16, where a practitioner would not pick it.

Both baselines run the HF `Trainer`'s own machinery: its train dataloader (sampler, collator), its
`_prepare_for_training` (Accelerate's `prepare`: bf16 autocast, compilation; the optimizer and
scheduler), its `training_step` (forward, loss, backward through Accelerate), followed by what its inner
loop does after it: gradient clipping at `max_grad_norm`, optimizer step, scheduler step, `zero_grad`.
(Running `Trainer.train()` for N steps would include the same work plus logging, but could not be
interleaved with ours.)

Steps alternate between the three (benchmarks.common.interleaved), so a busy machine slows all alike and
the ratios stay fair. Reported: examples/s, real (non-pad) tokens/s, real tokens per example, our ratio to
each baseline, and MFU = model FLOPs of the real tokens per second / the measured matmul peak of the dtype
each side computes in.

The ratio is of **real tokens/s**, not examples/s, and every side trains on the same pool of examples:
each side draws its own length-grouped batches (its own sampler, its own seed), so from a whole training
set the few dozen batches a round timing sees were not the same examples on both sides. On ChemProt
(lengths 10-256 tokens, mean 66) ours's seeded draw of 48 timed batches averaged 72.1 real tokens per
example and the Trainer's 64.3-64.8, so ours did 11% more work per example: an examples/s ratio read 0.88x,
and even per real token the longer draw costs more (attention grows with the length). The pool
(`--max-train-examples`, by default batch size x steps per round x rounds) makes the timed steps of ours
and hf-strong one pass over the same examples, shifted by the warm-up round. Real tokens count the work
done and leave padding (which a side pays for without credit) as the cost it is.
"""

from __future__ import annotations

import argparse
import tempfile
from itertools import count
from pathlib import Path

import torch
import torch.nn.functional as F

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

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
# micro: the CI plumbing size (seconds on a CPU); its numbers mean nothing
SIZES = {"micro": dict(hidden_size=64, num_layers=2, num_heads=2, intermediate_size=256),
         "mini": dict(hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024),
         "base": dict(hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072)}


def build_ours(task: str, size: str, batch_size: int, device: torch.device, work_dir: Path, data_dir: Path,
               precision: str, max_length: int | None, steps_per_round: int = 1,
               max_train_examples: int | None = None, compile: bool = False):
    from ablations import api
    from datamodules.finetune_data import FinetuneDataModule, FinetuneDataOptions
    from datamodules.registry import get_dataset
    from lightning_modules.compiling import compile_in_place
    from lightning_modules.finetune import FineTuneModule
    from lightning_modules.heads import HeadSpec
    from lightning_modules.models import load_encoder
    from lightning_modules.optim import adamw_with_linear_warmup

    overrides = [f"model.{k}={v}" for k, v in SIZES[size].items()] + [f"finetune.batch_size={batch_size}"]
    cfg = api.config("mini", overrides, task=task)
    spec = get_dataset(task)
    torch.manual_seed(0)
    encoder, tokenizer = load_encoder(cfg.model, data_dir, cfg.finetune.dropout)
    length = min(max_length or spec.max_length, encoder.config.max_position_embeddings)
    options = FinetuneDataOptions(max_length=length, batch_size=batch_size, eval_batch_size=batch_size,
                                  bucketing=True, max_train_examples=max_train_examples, seed=0,
                                  # nothing here evaluates: encode a few dev/test examples, not whole splits
                                  max_eval_examples=16)
    dm = FinetuneDataModule(spec, data_dir, tokenizer, options, cache_dir=work_dir / "cache" / "tokenized")
    dm.setup()
    if len(tokenizer) > encoder.get_input_embeddings().num_embeddings:
        encoder.resize_token_embeddings(len(tokenizer))
    if compile:  # as `trainer.compile=true` does (ablations.run.finetune)
        compile_in_place([encoder], dynamic=True)
    module = FineTuneModule(encoder, HeadSpec.from_config(cfg.finetune, dm.spec.task_type).build(
                                dm.encoder, encoder.config.hidden_size),
                            cfg.finetune.lr, cfg.finetune.weight_decay, cfg.finetune.warmup_ratio).to(device)
    module.train()
    opt = adamw_with_linear_warmup(module, cfg.finetune.lr, cfg.finetune.weight_decay,
                                   cfg.finetune.warmup_ratio, total_steps=100_000)
    optimizer, scheduler = opt["optimizer"], opt["lr_scheduler"]["scheduler"]
    loader = dm.train_dataloader()

    def batches():
        for epoch in count():  # a new bucketed order each epoch, as in training
            loader.sampler.set_epoch(epoch)
            yield from loader

    stream = batches()
    tokens: list[int] = []
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32

    def step() -> float:
        """`steps_per_round` optimizer steps: bucketed batches vary in length, so one timed call
        averages over several of them."""
        examples = real_tokens = 0
        for _ in range(steps_per_round):
            host = next(stream)
            real_tokens += int(host["attention_mask"].sum())  # counted on the host: no device sync in the loop
            batch = {k: v.to(device, non_blocking=True) for k, v in host.items()}
            with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
                loss = module.training_step(batch, 0)
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            examples += len(batch["index"])
        tokens.append(real_tokens)
        return float(examples)

    return step, tokens, dm, encoder, length


BASELINES = ("hf-naive", "hf-strong")
# with --compile: ours and hf-strong compiled too; each baseline is compared with the side of ours named here
COMPARED_WITH = {"hf-naive": "ours", "hf-strong": "ours", "hf-strong-compiled": "ours-compiled"}


def side_names(compiled: bool) -> list[str]:
    """The sides in report order."""
    return ["ours", *(["ours-compiled"] if compiled else []), *BASELINES,
            *(["hf-strong-compiled"] if compiled else [])]


def hf_examples(dm, pad_to: int | None, split: str = "train") -> list[dict]:
    """The datamodule's encoded examples of `split` as rows for a HF collator: padded to `pad_to` (as
    `--pad_to_max_length`; tensors for `default_data_collator`) or, with None, unpadded lists for the
    dynamic-padding collators."""
    token_task = dm.encoder.position_labels  # a tag per position
    split, pad_id = dm.features[split], dm.tokenizer.pad_token_id
    rows = []
    for i in range(len(split)):
        batch = split.batch([i], pad_id)
        if pad_to is None:
            row = {k: batch[k][0].tolist() for k in ("input_ids", "attention_mask", "token_type_ids")}
            row["labels"] = batch["labels"][0].tolist()
        else:
            pad = pad_to - batch["input_ids"].shape[1]
            row = {"input_ids": F.pad(batch["input_ids"][0], (0, pad), value=pad_id),
                   "attention_mask": F.pad(batch["attention_mask"][0], (0, pad)),
                   "token_type_ids": F.pad(batch["token_type_ids"][0], (0, pad))}
            row["labels"] = F.pad(batch["labels"][0], (0, pad), value=-100) if token_task else batch["labels"][0]
        rows.append(row)
    return rows


def build_baseline(dm, encoder, batch_size: int, device: torch.device, length: int, tmp: Path,
                   strong: bool = False, compile: bool = False, steps_per_round: int = 1, precision: str = "bf16"):
    """A HF Trainer over the same encoded examples: naive (padded to `length`, fp32) or, with `strong`,
    `precision` (bf16 where the device has it) + SDPA + dynamic padding + group_by_length + fused AdamW
    (+ torch_compile with `compile`)."""
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        BertForTokenClassification,
        DataCollatorForTokenClassification,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
        default_data_collator,
    )

    token_task = dm.encoder.position_labels  # a tag per position
    c = encoder.config
    config = BertConfig(vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=c.num_hidden_layers,
                        num_attention_heads=c.num_attention_heads, intermediate_size=c.intermediate_size,
                        max_position_embeddings=c.max_position_embeddings, pad_token_id=c.pad_token_id,
                        num_labels=dm.encoder.num_labels)
    torch.manual_seed(0)
    model_cls = BertForTokenClassification if token_task else BertForSequenceClassification
    model = model_cls._from_config(config, attn_implementation="sdpa") if strong else model_cls(config)
    if strong:
        collator = (DataCollatorForTokenClassification(dm.tokenizer) if token_task
                    else DataCollatorWithPadding(dm.tokenizer))
        tuned = dict(bf16=precision == "bf16", train_sampling_strategy="group_by_length", torch_compile=compile,
                     optim="adamw_torch_fused" if device.type in ("cuda", "cpu") else "adamw_torch")
    else:
        collator, tuned = default_data_collator, {}
    args = TrainingArguments(output_dir=str(tmp), per_device_train_batch_size=batch_size, learning_rate=1e-4,
                             weight_decay=0.01, warmup_steps=10_000, max_steps=100_000, report_to=[],
                             use_cpu=device.type == "cpu", remove_unused_columns=False, save_strategy="no",
                             logging_strategy="no", disable_tqdm=True, dataloader_drop_last=True, **tuned)
    trainer = Trainer(model=model, args=args, train_dataset=hf_examples(dm, None if strong else length),
                      data_collator=collator, processing_class=dm.tokenizer)
    # what Trainer._inner_training_loop does before its first step: the dataloader, then Accelerate's
    # prepare (autocast, compilation), the optimizer and the scheduler
    model, loader = trainer._prepare_for_training(args.max_steps, trainer.get_train_dataloader(), None)
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's own loop; no accumulation here

    def batches():
        for epoch in count():  # a new order each epoch, as Trainer's loop does
            if hasattr(loader, "set_epoch"):
                loader.set_epoch(epoch)
            yield from loader

    stream = batches()
    tokens: list[int] = []

    def step() -> float:
        examples = real_tokens = 0
        for _ in range(steps_per_round):
            inputs = next(stream)
            trainer.training_step(model, inputs)
            trainer._clip_grad_norm(model)
            trainer.optimizer.step()
            trainer.lr_scheduler.step()
            model.zero_grad()
            examples += len(inputs["input_ids"])
            real_tokens += int(inputs["attention_mask"].sum())
        tokens.append(real_tokens)
        return float(examples)

    setup = {"dtype": precision if strong else "fp32", "attention": trainer.model.config._attn_implementation,
             "optim": str(args.optim.value), "compiled": compile, "padded_to": None if strong else length}
    return step, tokens, setup


def benchmark(task: str, args: argparse.Namespace, device: torch.device) -> dict:
    precision, strong_precision = (resolve_precision(p, device) for p in (args.precision, args.strong_precision))
    # one pass of ours and hf-strong over the same pool: the timed steps' examples are (nearly) the same
    pool = args.max_train_examples or args.batch_size * args.steps_per_round * args.rounds
    ours, our_tokens, dm, encoder, length = build_ours(
        task, args.size, args.batch_size, device, args.work_dir, args.data_dir, precision, args.max_length,
        args.steps_per_round, pool)
    baseline_length = args.baseline_max_length or length
    sides, tokens = {"ours": ours}, {"ours": our_tokens}
    setups = {"ours": {"dtype": precision, "compiled": False}}
    names = side_names(args.compile)
    steps = {name: 1 if name == "hf-naive" else args.steps_per_round for name in names}
    if args.compile:
        sides["ours-compiled"], tokens["ours-compiled"], *_ = build_ours(
            task, args.size, args.batch_size, device, args.work_dir, args.data_dir, precision, args.max_length,
            args.steps_per_round, pool, compile=True)
        setups["ours-compiled"] = {"dtype": precision, "compiled": True}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            if name.startswith("hf-"):
                sides[name], tokens[name], setups[name] = build_baseline(
                    dm, encoder, args.batch_size, device, baseline_length, Path(tmp) / name,
                    strong=name != "hf-naive", compile=name.endswith("-compiled"), steps_per_round=steps[name],
                    precision=strong_precision)
        timings = interleaved(sides, rounds=args.rounds, warmup=args.warmup, device=device)
    size = SIZES[args.size]
    out = {"task": task, "size": args.size, "batch_size": args.batch_size, "device": machine(), "pool": pool,
           "steps_per_round": steps, "max_length": length, "baseline_padded_to": baseline_length, "sides": names}
    for name, t in timings.items():
        measured = tokens[name][-len(t.seconds):]  # the warm-up steps come first
        per_example = sum(measured) / sum(t.items)  # real tokens per example
        flops = transformer_train_flops_per_token(size["hidden_size"], size["num_layers"],
                                                  size["intermediate_size"], int(per_example))
        tokens_per_s = sum(measured) / sum(t.seconds)
        out[name] = {**setups[name], "examples_per_s": t.per_second, "tokens_per_s": tokens_per_s,
                     "tokens_per_example": per_example,
                     "model_flops_per_s": flops * tokens_per_s, "step_spread": t.spread, "rounds": len(t.seconds)}
    # real tokens/s: the sides' timed batches are not the same examples (see the module's docstring)
    out["ratios"] = {b: out[COMPARED_WITH[b]]["tokens_per_s"] / out[b]["tokens_per_s"]
                     for b in names if b in COMPARED_WITH}
    return out


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", nargs="+", default=["bc5-chem", "chemprot"])
    parser.add_argument("--size", choices=sorted(SIZES), default="mini")
    parser.add_argument("--device", type=device_argument, default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-size", type=COUNT, default=32)
    parser.add_argument("--rounds", type=COUNT, default=6, help="timed rounds (one call of each side per round)")
    parser.add_argument("--warmup", type=WARMUP, default=1, help="untimed rounds first")
    parser.add_argument("--steps-per-round", type=COUNT, default=8,
                        help="optimizer steps per round of ours and of hf-strong (length-grouped batches vary "
                             "in length; hf-naive's padded batches do not, it takes one step per round)")
    parser.add_argument("--threads", type=COUNT, help="torch intra-op threads for all sides (default: torch's; "
                                                     "1 is steadier on a CPU that other jobs share)")
    parser.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto",
                        help="ours (auto: bf16 where the device computes it natively, else fp32)")
    parser.add_argument("--strong-precision", choices=["auto", "bf16", "fp32"], default="auto",
                        help="hf-strong: bf16=True or not (auto: as --precision)")
    parser.add_argument("--compile", action="store_true",
                        help="also time ours compiled (trainer.compile's path) and hf-strong with torch_compile=True")
    parser.add_argument("--max-length", type=SEQUENCE, help="truncation length (default: the dataset's)")
    parser.add_argument("--baseline-max-length", type=SEQUENCE, help="hf-naive's padding (default: --max-length); "
                        "shorter than an example truncates it, as run_ner.py's --max_seq_length does")
    parser.add_argument("--max-train-examples", type=COUNT,
                        help="the pool every side trains on, a prefix of a seeded shuffle (default: batch size x "
                             "steps per round x rounds, so the timed steps of ours and hf-strong go once through "
                             "the same examples)")
    add_shared_arguments(parser, cache="tokenization cache")
    return parser


def run(args: argparse.Namespace) -> dict:
    """Time every task's three sides and return the results (what --json writes)."""
    device = start_run(args)
    # the peak of each dtype a side computes in (a CPU that only emulates bf16 takes seconds per bf16
    # matmul, and no side computes in it there)
    used = {"fp32", *(resolve_precision(p, device) for p in (args.precision, args.strong_precision))}
    peaks = {dtype: matmul_peak(DTYPES[dtype], device, args.peak_size, args.peak_seconds) for dtype in sorted(used)}
    results = [benchmark(task, args, device) for task in args.task]
    # a busy machine depresses a one-second peak measurement: measure again after the timings and keep
    # the better one, so MFU is not inflated by one unlucky measurement
    for dtype in peaks:
        peaks[dtype] = max(peaks[dtype], matmul_peak(DTYPES[dtype], device, args.peak_size, args.peak_seconds))
    for r in results:
        for name in r["sides"]:
            r[name]["mfu"] = r[name]["model_flops_per_s"] / peaks[r[name]["dtype"]]
    return {"device": machine(), "bf16_native": bf16_native(device), "peaks": peaks, "results": results}


def report(out: dict) -> str:
    peaks = out["peaks"]
    lines = [f"machine: {out['device']}, bf16 native: {out['bf16_native']}",
             "matmul peak (best of before/after): " + ", ".join(f"{d} {v / 1e9:.1f} GFLOP/s" for d, v in peaks.items())]
    for r in out["results"]:
        lines += [f"{r['task']} ({r['size']}, batch {r['batch_size']}, truncation {r['max_length']}, "
                  f"hf-naive padded to {r['baseline_padded_to']}):",
                  f"  {'':<19}{'examples/s':>11}{'tokens/s':>11}{'tok/ex':>8}{'MFU':>8}  dtype  round spread"]
        for name in r["sides"]:
            x = r[name]
            lines.append(f"  {name:<19}{x['examples_per_s']:>11.1f}{x['tokens_per_s']:>11.0f}"
                         f"{x['tokens_per_example']:>8.1f}{x['mfu']:>8.1%}  {x['dtype']:<5}  {x['step_spread']:.0%}")
        lines += [f"  ratio (real tokens/s, {COMPARED_WITH[b]} / {b}): {v:.2f}x" for b, v in r["ratios"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return benchmark_main(parser, run, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())

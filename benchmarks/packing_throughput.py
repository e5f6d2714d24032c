"""Packing short sequences into one row, attention confined to each sequence, against our padded batches.

    python -m benchmarks.packing_throughput --task bc5-chem --rounds 20 --json outputs/packing.json

The same randomly initialised encoder (mini: 4 layers, 256 wide) runs forward and backward over the same
real training sentences (the task's encoded training split, `FinetuneDataModule`), three ways:

- **padded** (what fine-tuning does today): length-bucketed batches of `--batch-size` sentences, dynamic
  padding, SDPA with the padding mask;
- **packed-flex** (evaluation only on a CPU: torch's FlexAttention has no backward there): sentences packed
  first-fit into a fixed `--rows` x `--row-length` block of tokens (tokens-per-batch batching; one shape, so
  one compiled kernel), position ids restarting at every sentence, FlexAttention with a document mask
  (`torch.nn.attention.flex_attention.create_block_mask`; each sentence attends to itself only), through
  transformers' `flex_attention` implementation;
- **packed-sdpa**: the same packed rows with the document mask as a dense boolean 4-D mask, SDPA.

`--mode train`: each side's step is forward + backward of the encoder with a loss over the real tokens (the
task head and the optimizer cost the same per real token on every side, so they are left out). Steps
alternate between the sides (`benchmarks.common.interleaved`); `--mode eval`: forward only, under inference
mode, as dev evaluation and test run; reported: real (non-pad) tokens/s per side and the ratio of
each packed side to padded. Packing wins only where it beats padded by >= 10% (docs/performance.md).
"""

from __future__ import annotations

import argparse
import copy
import random
from itertools import count

import torch

from benchmarks.common import (
    COUNT,
    SEQUENCE,
    WARMUP,
    add_shared_arguments,
    benchmark_main,
    device_argument,
    interleaved,
    machine,
    start_run,
)
from benchmarks.finetune_throughput import SIZES


def packed_batches(lengths: list[int], rows: int, row_length: int, seed: int = 0):
    """Endless lists of (row, offset, example index) placements: examples in a seeded random order, each
    put first-fit into `rows` rows of `row_length` tokens; a batch is emitted when the next one fits nowhere."""
    rng = random.Random(seed)
    for _ in count():
        order = list(range(len(lengths)))
        rng.shuffle(order)
        fill, placed = [0] * rows, []
        for i in order:
            row = next((r for r in range(rows) if fill[r] + lengths[i] <= row_length), None)
            if row is None:
                yield placed
                fill, placed = [0] * rows, []
                row = 0
            placed.append((row, fill[row], i))
            fill[row] += lengths[i]


def build(args: argparse.Namespace, device: torch.device):
    from torch.nn.attention.flex_attention import create_block_mask

    from ablations import api
    from datamodules.finetune_data import FinetuneDataModule, FinetuneDataOptions
    from datamodules.registry import get_dataset
    from lightning_modules.models import load_encoder

    overrides = [f"model.{k}={v}" for k, v in SIZES[args.size].items()]
    cfg = api.config("mini", overrides, task=args.task)
    spec = get_dataset(args.task)
    torch.manual_seed(0)
    encoder, tokenizer = load_encoder(cfg.model, args.data_dir, 0.0)  # no dropout: the sides compute alike
    length = min(args.row_length, spec.max_length)
    options = FinetuneDataOptions(max_length=length, batch_size=args.batch_size, eval_batch_size=args.batch_size,
                                  bucketing=True, max_train_examples=args.max_train_examples, seed=0)
    dm = FinetuneDataModule(spec, args.data_dir, tokenizer, options, cache_dir=args.work_dir / "cache" / "tokenized")
    dm.setup()
    if len(tokenizer) > encoder.get_input_embeddings().num_embeddings:
        encoder.resize_token_embeddings(len(tokenizer))
    encoder.to(device).train()
    split, pad_id = dm.features["train"], tokenizer.pad_token_id
    lengths = [int(n) for n in split.lengths]
    sdpa = encoder
    flex = copy.deepcopy(encoder)
    flex.set_attn_implementation("flex_attention")
    loader = dm.train_dataloader()

    def padded_stream():
        for epoch in count():
            loader.sampler.set_epoch(epoch)
            yield from loader

    padded = padded_stream()
    packs = packed_batches(lengths, args.rows, length)

    train = args.mode == "train"
    if not train:
        sdpa.eval(), flex.eval()

    def finish(hidden: torch.Tensor, real: torch.Tensor) -> float:
        if train:
            (hidden.pow(2).mean(-1) * real).sum().backward()
        return float(real.sum())

    @torch.inference_mode(not train)
    def padded_step() -> float:
        batch = next(padded)
        ids, mask = batch["input_ids"].to(device), batch["attention_mask"].to(device)
        return finish(sdpa(input_ids=ids, attention_mask=mask).last_hidden_state, mask)

    def pack() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        ids = torch.full((args.rows, length), pad_id, dtype=torch.long)
        positions = torch.zeros((args.rows, length), dtype=torch.long)
        docs = torch.full((args.rows, length), -1, dtype=torch.long)
        for doc, (row, offset, i) in enumerate(next(packs)):
            n = lengths[i]
            ids[row, offset:offset + n] = split.batch([i], pad_id)["input_ids"][0]
            positions[row, offset:offset + n] = torch.arange(n)
            docs[row, offset:offset + n] = doc
        return ids.to(device), positions.to(device), docs.to(device)

    @torch.inference_mode(not train)
    def packed_step(dense: bool) -> float:
        ids, positions, docs = pack()
        real = docs >= 0

        def same_document(b, h, q, kv):  # a pad position attends to itself (no empty softmax row)
            return (docs[b, q] == docs[b, kv]) & ((docs[b, q] >= 0) | (q == kv))

        if dense:
            mask = (docs[:, :, None] == docs[:, None, :]) & (real[:, :, None] | torch.eye(length, dtype=torch.bool))
            model, attention = sdpa, mask[:, None]
        else:
            model = flex
            attention = create_block_mask(same_document, args.rows, None, length, length, device=device.type)
        hidden = model(input_ids=ids, attention_mask=attention, position_ids=positions,
                       token_type_ids=torch.zeros_like(ids)).last_hidden_state
        return finish(hidden, real)

    # torch's FlexAttention has no backward on a CPU (NotImplementedError): there it is timed for evaluation
    flex_trains = device.type != "cpu"
    steps = {"padded": padded_step, **({"packed-flex": lambda: packed_step(False)} if flex_trains or not train else {}),
             "packed-sdpa": lambda: packed_step(True)}
    return steps, length, lengths


def run(args: argparse.Namespace) -> dict:
    device = start_run(args)
    steps, length, lengths = build(args, device)
    timings = interleaved(steps, rounds=args.rounds, warmup=args.warmup, device=device)
    out = {"machine": machine(), "task": args.task, "mode": args.mode, "size": args.size, "row_length": length,
           "rows": args.rows,
           "batch_size": args.batch_size, "mean_length": sum(lengths) / len(lengths), "rounds": args.rounds,
           "sides": {name: {"tokens_per_s": t.per_second, "spread": t.spread} for name, t in timings.items()}}
    base = out["sides"]["padded"]["tokens_per_s"]
    for side in out["sides"].values():
        side["vs_padded"] = side["tokens_per_s"] / base
    return out


def report(out: dict) -> str:
    lines = [f"packing, {out['mode']}, on {out['task']} ({out['size']}, rows of {out['row_length']} tokens "
             f"x {out['rows']}, "
             f"mean sentence {out['mean_length']:.1f} tokens; padded: batches of {out['batch_size']}), "
             f"{out['machine']}",
             "| side | real tokens/s | vs padded | spread |", "|---|---:|---:|---:|"]
    for name, side in out["sides"].items():
        lines.append(f"| {name} | {side['tokens_per_s']:.0f} | {side['vs_padded']:.2f}x | {side['spread']:.2f} |")
    return "\n".join(lines)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="bc5-chem")
    parser.add_argument("--mode", choices=("train", "eval"), default="train",
                        help="train: forward + backward; eval: forward under inference mode")
    parser.add_argument("--size", choices=sorted(SIZES), default="mini")
    parser.add_argument("--batch-size", type=COUNT, default=32, help="sentences per padded batch")
    parser.add_argument("--rows", type=COUNT, default=8, help="rows per packed batch")
    parser.add_argument("--row-length", type=SEQUENCE, default=128, help="tokens per packed row (and max_length)")
    parser.add_argument("--max-train-examples", type=COUNT, default=2000)
    parser.add_argument("--rounds", type=COUNT, default=10)
    parser.add_argument("--warmup", type=WARMUP, default=2)
    parser.add_argument("--device", type=device_argument, default="cpu")
    parser.add_argument("--threads", type=int, default=0)
    add_shared_arguments(parser, "tokenization cache")
    return parser


def main(argv: list[str] | None = None) -> int:
    return benchmark_main(make_parser, run, report, argv)


if __name__ == "__main__":
    raise SystemExit(main())

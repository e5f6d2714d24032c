"""Every performance number of the project in one command: JSON and a markdown summary in one folder.

    python -m benchmarks.suite --device cuda --size base        # BERT-base GPU numbers (target < 8 min)
    python -m benchmarks.suite --size mini                      # the CPU benchmark defaults
    python -m benchmarks.suite --size micro --out /tmp/bench    # CI plumbing: about a minute or two on a CPU

Sections, in this order, each timed and with its peak memory (`torch.cuda.max_memory_allocated` on CUDA,
the process's peak RSS on a CPU, reset before each section):

- **pretrain**: `benchmarks.pretrain_throughput` (ours vs `BertForMaskedLM` naive and strong, interleaved)
  at each sequence length of the size (base: 128 and 512; the batch holds the same number of tokens);
- **finetune**: `benchmarks.finetune_throughput` on BC5-chem and ChemProt (ours vs the HF `Trainer`
  naive and strong); skipped with the reason when accelerate (pip extra `bench`) is missing;
- **smoke**: the real `bioablate pretrain` code path end to end: `ablations.run.pretrain.run_pretrain` with
  the size's profile (base: BERT-base, batch 64 x 128, whole-word masking) for `--smoke-steps` optimizer
  steps (base: 300) from an empty work directory (vocabulary, shards, training, export), then
  `ablations.run.finetune.run_finetune` of one epoch on BC5-chem from the exported model; test F1 printed.

Sizes: micro = plumbing (a 2-layer 64-wide model, a few steps, the micro profile: numbers mean nothing);
mini = the CPU defaults of the two throughput benchmarks (4 layers, 256 wide); base = BERT-base.
Output: `results.json` and `summary.md` in `--out` (default `<work-dir>/benchmarks/<timestamp>/`); the
JSON is rewritten after every section, so an interrupted run keeps what it measured, and the same command
with the same `--out` resumes: sections already in its results.json (same size, device and --compile) are
kept, and only the missing ones run. `--compile`: each throughput section also times ours and hf-strong
compiled, and the smoke runs with `trainer.compile=true`.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Sequence

import torch

from benchmarks import finetune_throughput, pretrain_throughput
from benchmarks.common import (
    COUNT,
    bf16_native,
    chosen_device,
    device_argument,
    folder_argument,
    machine,
    peak_memory,
    reset_peak_memory,
)

SUITE_SIZES = {
    "micro": dict(pretrain=[(64, 8)], pretrain_args=["--max-words", "20000", "--rounds", "2", "--warmup", "1",
                                                     "--peak-size", "256", "--peak-seconds", "0.2"],
                  finetune_args=["--batch-size", "8", "--max-length", "64", "--max-train-examples", "128",
                                 "--rounds", "2", "--warmup", "1", "--steps-per-round", "2", "--peak-size", "256",
                                 "--peak-seconds", "0.2"],
                  profile="micro", smoke_steps=30),
    # 12 fine-tuning rounds: hf-strong's length-grouped rounds spread by 30-50% on a CPU, and 6 of them
    # moved the ChemProt ratio by a fifth between two quiet runs (docs/performance.md)
    "mini": dict(pretrain=[(128, 32)], pretrain_args=[], finetune_args=["--rounds", "12"], profile="mini",
                 smoke_steps=100),
    "base": dict(pretrain=[(128, 64), (512, 16)], pretrain_args=["--rounds", "20"],
                 finetune_args=["--rounds", "20"], profile="base", smoke_steps=300),
}
SMOKE_TASK = "bc5-chem"


def settle(device: torch.device) -> None:
    """What the section before left behind goes before the next is measured: its models (reference cycles
    through the HF Trainer) and the CUDA cache. A full collection walks the whole heap: seconds in a
    process that has run many tests."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def measured(device: torch.device, section, settled: bool = False):
    """Run `section()` (a dict of results) and add its wall time and peak memory; `settled`: the caller
    has just called `settle`."""
    if not settled:
        settle(device)
    reset_peak_memory(device)
    start = time.perf_counter()
    result = section()
    result["wall_s"] = time.perf_counter() - start
    result["peak_memory"] = peak_memory(device)
    return result


def common_args(args: argparse.Namespace) -> list[str]:
    # the throughput benchmarks know the same three sizes
    out = ["--device", args.device, "--size", args.size, "--work-dir", str(args.work_dir)]
    if args.data_dir:
        out += ["--data-dir", str(args.data_dir)]
    if args.threads:
        out += ["--threads", str(args.threads)]
    return out + (["--compile"] if args.compile else [])


def pretrain_section(args: argparse.Namespace, seq_len: int, batch_size: int) -> dict:
    argv = [*common_args(args), "--seq-len", str(seq_len), "--batch-size", str(batch_size),
            *SUITE_SIZES[args.size]["pretrain_args"]]
    out = pretrain_throughput.run(pretrain_throughput.parser().parse_args(argv))
    print(pretrain_throughput.report(out), flush=True)
    return out


def finetune_section(args: argparse.Namespace) -> dict:
    if importlib.util.find_spec("accelerate") is None:
        return {"skipped": "accelerate is not installed: the HF Trainer baselines need it "
                           "(pip install -e '.[bench]')"}
    argv = [*common_args(args), "--task", "bc5-chem", "chemprot", *SUITE_SIZES[args.size]["finetune_args"]]
    out = finetune_throughput.run(finetune_throughput.parser().parse_args(argv))
    print(finetune_throughput.report(out), flush=True)
    return out


def smoke_section(args: argparse.Namespace, overrides: Sequence[str] = ()) -> dict:
    """`bioablate pretrain` then `bioablate finetune` through their real code paths, from an empty work
    directory (removed afterwards: a BERT-base export is 440 MB); `overrides` go to both configs last."""
    from ablations import api

    profile, steps = SUITE_SIZES[args.size]["profile"], args.smoke_steps
    data_dir = str(args.data_dir) if args.data_dir else None
    device = torch.device(args.device)
    trainer = [f"trainer.accelerator={'gpu' if device.type == 'cuda' else 'cpu'}", "trainer.devices=1",
               "trainer.progress_bar=false", f"trainer.compile={str(bool(args.compile)).lower()}"]
    if not bf16_native(device):  # as the benchmarks' `--precision auto`: emulated bf16 is slower than fp32
        trainer.append("trainer.precision=32-true")
    trainer += overrides
    with tempfile.TemporaryDirectory(prefix="smoke-", dir=args.out) as work:
        pretrain = [*trainer, f"pretrain.max_steps={steps}", "pretrain.accumulate=1",
                    f"pretrain.checkpoint_every={steps}", "pretrain.masking=wwm"]
        pre_cfg = api.config(profile, pretrain, task="pretrain", experiment_name="pretrain", data_dir=data_dir,
                             work_dir=work)
        if args.compile and pre_cfg.pretrain.max_predictions is None:  # a compiled step has one static shape
            pre_cfg = api.config(profile, [*pretrain, f"pretrain.max_predictions={pre_cfg.pretrain.seq_len // 4}"],
                                 task="pretrain", experiment_name="pretrain", data_dir=data_dir, work_dir=work)
        start = time.perf_counter()
        pretrained = api.pretrain(pre_cfg)
        pretrain_s = time.perf_counter() - start
        ft_cfg = api.config(profile, [*trainer, "finetune.epochs=1", f"model.name_or_path={pretrained.model_dir}"],
                              task=SMOKE_TASK, data_dir=data_dir, work_dir=work)
        start = time.perf_counter()
        tuned = api.finetune(ft_cfg)
        finetune_s = time.perf_counter() - start
    losses = pretrained.losses
    out = {"profile": profile, "precision": pre_cfg.trainer.precision, "compiled": bool(args.compile),
           "pretrain_steps": steps, "masking": "wwm",
           "batch": f"{pre_cfg.pretrain.batch_size} x {pre_cfg.pretrain.seq_len}",
           "model": f"{pre_cfg.model.num_layers} layers, {pre_cfg.model.hidden_size} wide",
           "pretrain_s": pretrain_s, "first_loss": losses[0], "last_loss": losses[-1], "task": SMOKE_TASK,
           "finetune_epochs": 1, "finetune_s": finetune_s, "test": tuned.test,
           "test_f1": tuned.test.get("f1", tuned.test["score"])}
    print(f"smoke ({profile}, {out['precision']}): pretraining {steps} steps {pretrain_s:.0f} s "
          f"(MLM loss {losses[0]:.2f} -> "
          f"{losses[-1]:.2f}), export, 1 epoch {SMOKE_TASK} {finetune_s:.0f} s, test F1 {out['test_f1']:.4f}",
          flush=True)
    return out


def _mib(memory: dict) -> str:
    return f"{memory['bytes'] / 2 ** 20:,.0f} MiB ({memory['what']})"


def pretrain_markdown(sections: list[dict]) -> list[str]:
    """The pretraining table of `sections` (each a `pretrain_section` result with its peak memory)."""
    lines = ["## Pretraining (MLM) throughput", "",
             "| seq | batch | side | dtype | tokens/s | MFU | MFU of bf16 peak | ours / side | peak memory |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in sections:
        for name in r["sides"]:
            x = r[name]
            ratio = (f"{r['ratios'][name]:.2f}x ({pretrain_throughput.COMPARED_WITH[name]})"
                     if name in r["ratios"] else "")
            bf16 = "-" if x["mfu_bf16"] is None else f"{x['mfu_bf16']:.1%}"
            lines.append(f"| {r['seq_len']} | {r['batch_size']} | {name} | {x['dtype']} | "
                         f"{x['tokens_per_s']:,.0f} | {x['mfu']:.1%} | {bf16} | {ratio} | "
                         f"{_mib(r['peak_memory']) if name == 'ours' else ''} |")
    return lines + ["", "MFU: of the matmul peak of the dtype the side computes in (encoder matmuls of the real "
                    "tokens; the MLM output layer not counted). Peak memory: the whole section, all sides.", ""]


def finetune_markdown(ft: dict) -> list[str]:
    """The fine-tuning table of `ft` (a `finetune_section` result with its peak memory)."""
    lines = ["## Fine-tuning throughput", ""]
    if "skipped" in ft:
        return lines + [f"Skipped: {ft['skipped']}", ""]
    lines += ["| task | side | dtype | examples/s | tokens/s | MFU | ours / side (real tokens/s) |",
              "|---|---|---|---|---|---|---|"]
    for r in ft["results"]:
        for name in r["sides"]:
            x = r[name]
            ratio = (f"{r['ratios'][name]:.2f}x ({finetune_throughput.COMPARED_WITH[name]})"
                     if name in r["ratios"] else "")
            lines.append(f"| {r['task']} | {name} | {x['dtype']} | {x['examples_per_s']:,.1f} | "
                         f"{x['tokens_per_s']:,.0f} | {x['mfu']:.1%} | {ratio} |")
    peaks = ", ".join(f"{d} {v / 1e12:.3f} TFLOP/s" for d, v in ft["peaks"].items())
    return lines + ["", f"Peak memory (both tasks, all sides): {_mib(ft['peak_memory'])}; matmul peak {peaks}.", ""]


def smoke_markdown(sm: dict) -> list[str]:
    """What `smoke_section` did, with its peak memory."""
    return ["## End-to-end smoke (`run_pretrain` -> export -> `run_finetune`)", "",
            f"- pretraining: profile `{sm['profile']}` ({sm['model']}, {sm.get('precision', '?')}"
            f"{', compiled' if sm.get('compiled') else ''}), {sm['pretrain_steps']} steps of "
            f"{sm['batch']}, {sm['masking']}: {sm['pretrain_s']:.0f} s (vocabulary, shards, training, "
            f"export), MLM loss {sm['first_loss']:.2f} -> {sm['last_loss']:.2f}",
            f"- fine-tuning: {sm['finetune_epochs']} epoch on {sm['task']} from the exported model: "
            f"{sm['finetune_s']:.0f} s, **test F1 {sm['test_f1']:.4f}**",
            f"- peak memory: {_mib(sm['peak_memory'])}", ""]


def summary(results: dict) -> str:
    """The markdown summary of `results` (what results.json holds)."""
    s = results["suite"]
    lines = [f"# Benchmark suite: {s['size']} on {s['device']}", "",
             f"Machine: `{s['machine']}`. Started {s['started']}, {s.get('wall_s', 0):.0f} s in all. "
             "Ratios are ours / each baseline, from steps interleaved in one process.", ""]
    if results["pretrain"]:
        lines += pretrain_markdown(results["pretrain"]) + [""]
    if results.get("finetune"):
        lines += finetune_markdown(results["finetune"])
    if results.get("smoke"):
        lines += smoke_markdown(results["smoke"])
    return "\n".join(lines)


def resumed(path: Path, fresh: dict) -> tuple[dict, float]:
    """The results an earlier, cut-off call of the same suite left in `path` (its sections are kept), with
    the wall time they took; `fresh` and 0 if there are none or they were taken with other settings."""
    if not path.is_file():
        return fresh, 0.0
    earlier = json.loads(path.read_text())
    same = all(earlier["suite"].get(key) == fresh["suite"][key] for key in ("size", "device", "compile"))
    if not same:
        return fresh, 0.0
    kept = [name for name in ("pretrain", "finetune", "smoke") if earlier[name]]
    print(f"resuming {path}: keeping {', '.join(kept) or 'nothing'}", flush=True)
    earlier["suite"].setdefault("resumed", []).append(fresh["suite"]["started"])
    return earlier, earlier["suite"].get("wall_s", 0.0)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cuda = torch.cuda.is_available()
    parser.add_argument("--device", type=device_argument, default="cuda" if cuda else "cpu")
    parser.add_argument("--size", choices=sorted(SUITE_SIZES), help="default: base on CUDA, mini on a CPU")
    parser.add_argument("--out", type=folder_argument,
                        help="output folder (default: <work-dir>/benchmarks/<timestamp>)")
    parser.add_argument("--work-dir", type=Path, help="caches (shards, tokenization; default: $BIOABLATE_WORK "
                                                      "or ./outputs)")
    parser.add_argument("--data-dir", type=Path, help="staged data (default: $BIOABLATE_DATA)")
    parser.add_argument("--smoke-steps", type=COUNT, help="pretraining steps of the smoke (default: micro 30, "
                                                        "mini 100, base 300)")
    parser.add_argument("--compile", action="store_true",
                        help="also time ours and hf-strong compiled (ours-compiled vs hf-strong-compiled), and "
                             "run the smoke with trainer.compile=true")
    parser.add_argument("--threads", type=COUNT, help="CPU threads (default: torch's)")
    parser.add_argument("--skip", nargs="+", choices=["pretrain", "finetune", "smoke"], default=[],
                        help="sections to leave out")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    device = chosen_device(args, parser())
    from ablations.places import resolve_work_dir

    args.size = args.size or ("base" if device.type == "cuda" else "mini")
    args.smoke_steps = args.smoke_steps or SUITE_SIZES[args.size]["smoke_steps"]
    args.work_dir = (args.work_dir or resolve_work_dir(None)).resolve()
    started = datetime.now()
    args.out = (args.out or args.work_dir / "benchmarks" / started.strftime("%Y%m%d-%H%M%S")).resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict = {"suite": {"size": args.size, "device": args.device, "machine": machine(),
                               "started": started.isoformat(timespec="seconds"), "argv": sys.argv[1:],
                               "compile": args.compile},
                     "pretrain": [], "finetune": None, "smoke": None}
    results, earlier_s = resumed(args.out / "results.json", results)
    start = time.perf_counter()

    def save() -> None:
        results["suite"]["wall_s"] = earlier_s + time.perf_counter() - start
        temporary = args.out / "results.json.tmp"  # a cut-off call never leaves half a JSON file
        temporary.write_text(json.dumps(results, indent=1))
        temporary.replace(args.out / "results.json")

    if "pretrain" not in args.skip:
        done = {r["seq_len"] for r in results["pretrain"]}
        for seq_len, batch_size in SUITE_SIZES[args.size]["pretrain"]:
            if seq_len not in done:
                results["pretrain"].append(measured(device, lambda: pretrain_section(args, seq_len, batch_size)))
                save()
    if "finetune" not in args.skip and results["finetune"] is None:
        results["finetune"] = measured(device, lambda: finetune_section(args))
        save()
    if "smoke" not in args.skip and results["smoke"] is None:
        results["smoke"] = measured(device, lambda: smoke_section(args))
    save()
    (args.out / "summary.md").write_text(summary(results))
    print(f"\n{results['suite']['wall_s']:.0f} s; results in {args.out}/results.json and summary.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

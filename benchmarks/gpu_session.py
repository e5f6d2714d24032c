"""A lent GPU session in one command: every section timed against its budget, results kept as they come.

    python -m benchmarks.gpu_session --plan                     # the default plan's sections, budgets, total
    bash scripts/gpu_session.sh "$OUT"                          # on the device (installs the wheelhouse first)
    bash scripts/gpu_session.sh "$OUT" --session finetune       # the second plan, for a warm second call
    python -m benchmarks.gpu_session --out /tmp/s --device cpu --size micro    # the CPU rehearsal (CI)

A lent GPU comes for 15 minutes of device time in all, one command at most 10; this is the one command
(8 minutes by default, `--budget`). A plan (`PLANS`) is its sections in order, each with a time budget that
includes its compiling (`SECTIONS`; `--plan` prints them and the total, which fits the command with a
margin). A section runs only if its budget fits in what is left of the session's, else it is recorded as
skipped with the reason, and one that runs past twice its budget (or past the session's end) is cut off
and recorded so. Every section runs in bf16 autocast, as a production run does (`bf16-mixed`), and starts
from the session's own fp32 matmul precision.

The default plan, `pretrain`, returns the headline first:

- **install** (done by scripts/gpu_session.sh before this starts): its status and time, and whether
  every carried package imports from where it was installed;
- **environment**: nvidia-smi, Python, torch, CUDA, cuDNN, the device's properties, the image's `pip
  list`, and the bf16 and fp32 matmul peaks measured now (the ceilings every MFU below is against);
- **headline** and **headline_packed**: BERT-base MLM at 256 x 128 in bf16 with `max_predictions` set
  (one static shape), unpacked then packed rows: ours eager, compiled and graphed (CUDA graphs) against
  hf-strong compiled (benchmarks.pretrain_throughput), tokens/s, MFU, each side's warm-up (compile) seconds;
- **lightning_path**: `bioablate pretrain` through Lightning at the same size, ~40 steps graphed, then 4
  at accumulate 2 (compiled, no graphs): the logged tokens/s against the bare step's;
- **profile_graphed**: one graphed step under torch.profiler: the device-busy fraction, kernels per step,
  the attention kernel SDPA chose;
- **compile_cache**: the inductor cache of the sections before, saved to `--out` if small.

`finetune` (the fine-tuning step, eager and compiled, against the HF Trainer, BC5-chem and
ChemProt; runs sharing one device) and `extra` (launch overhead, today's step against the sync-free one,
the Lightning smoke, an eager profile) are plans of their own. scripts/gpu_session.sh puts `TORCH_LOGS`
(graph breaks, recompiles, cudagraph skips) into session.log.

`session.json` and `session.md` in `--out` are replaced (atomically) after every section, so a session
cut off by the device's time limit keeps every section it finished. `--size micro` runs the same plan at
toy size (the CPU rehearsal, tests/benchmarks/test_gpu_session.py); its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.metadata
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch

from benchmarks import finetune_throughput, pretrain_throughput, suite
from benchmarks.common import (
    COUNT,
    chosen_device,
    device_argument,
    folder_argument,
    machine,
    matmul_peak,
    matmul_precision_state,
    restore_matmul_precision,
    seconds_argument,
    start_run,
    sync,
)


@dataclass(frozen=True)
class Section:
    name: str
    budget_s: float  # on one H100/H200, compiling included; the skip rule reads it, the cut-off is twice it
    title: str
    compile_s: float = 0.0  # the part of the budget that compiling takes, cold (no cache)


# Budgets on one H100/H200, compile time included (the first lent sessions, docs/performance.md: a cold
# compile of BERT-base's step takes 40-60 s, of hf-strong's model about as long; a graphed side reuses the
# compiled side's graph and adds its capture). Each plan fits the 480 s command with a margin.
SECTIONS = [
    Section("install", 45, "Wheelhouse install"),
    Section("environment", 20, "Environment"),
    Section("headline", 170, "Headline: BERT-base MLM 256 x 128, bf16, unpacked: ours eager/compiled/graphed vs "
            "hf-strong compiled", compile_s=120),
    Section("headline_packed", 90, "Headline, packed rows", compile_s=50),
    Section("lightning_path", 80, "The real Lightning path at the headline's size (40 steps; 4 at accumulate 2)",
            compile_s=40),
    Section("profile_graphed", 25, "One graphed step under the profiler", compile_s=10),
    Section("compile_cache", 5, "The compile cache, saved to the output if small"),
    # the second plan (--session finetune), for a warm second call
    Section("preflight_finetune", 80, "Preflight: fine-tuning step, micro, eager and compiled", compile_s=50),
    Section("finetune_base", 170, "BERT-base fine-tuning throughput", compile_s=100),
    Section("runs_per_device", 90, "Fine-tuning runs sharing one device (--runs-per-device)"),
    # what earlier sessions measured, for a call with time to spare (--session extra)
    Section("launch_overhead", 5, "Kernel launch overhead"),
    Section("step_ab", 240, "Pretraining step A/B: today's vs sync-free, 64 and 256 rows, eager/compiled/graphed",
            compile_s=180),
    Section("preflight_smoke", 30, "Preflight: pretrain -> export -> fine-tune through Lightning, micro"),
    Section("profile_pretrain", 15, "One BERT-base MLM step under the profiler"),
]
SECTION_NAMES = [s.name for s in SECTIONS]
BY_NAME = {s.name: s for s in SECTIONS}
PLANS = {
    "pretrain": ["install", "environment", "headline", "headline_packed", "lightning_path", "profile_graphed",
                 "compile_cache"],
    "finetune": ["install", "environment", "preflight_finetune", "finetune_base", "runs_per_device"],
    "extra": ["install", "environment", "launch_overhead", "step_ab", "preflight_smoke", "profile_pretrain"],
}
COMMAND_S = 480  # the default --budget: one device command, install included


def plan_lines(plan: str) -> list[str]:
    """`--plan`: each section of `plan` with its budget (compile time included) and the total."""
    sections = [BY_NAME[n] for n in PLANS[plan]]
    total = sum(x.budget_s for x in sections)
    lines = [f"plan {plan}: {len(sections)} sections, in order (budgets on one H100/H200, compiling included)"]
    lines += [f"  {x.name:<19}{x.budget_s:>5.0f} s"
              + (f"  ({x.compile_s:.0f} s of it compiling)" if x.compile_s else "")
              + f"  {x.title}" for x in sections]
    lines.append(f"  {'total':<19}{total:>5.0f} s of the {COMMAND_S} s command ({COMMAND_S - total:.0f} s margin)")
    return lines


# per size: the throughput benchmarks' arguments, and the runs of runs_per_device
# micro: a smoke size, whose MFU nobody reads: a fifth of a second per peak (each dtype, twice in fine-tuning)
MICRO_PRETRAIN = ["--max-words", "20000", "--rounds", "2", "--warmup", "1", "--peak-size", "256",
                  "--peak-seconds", "0.2"]
MICRO_FINETUNE = ["--batch-size", "8", "--max-length", "64", "--max-train-examples", "64", "--rounds", "2",
                  "--warmup", "1", "--steps-per-round", "2", "--peak-size", "256", "--peak-seconds", "0.2"]
# the CPU rehearsal's "base" sections: the same code at the least work that still times every side
TOY_PRETRAIN = ["--max-words", "20000", "--rounds", "1", "--warmup", "1", "--peak-size", "128", "--peak-seconds", "0.1"]
TOY_FINETUNE = ["--batch-size", "8", "--max-length", "32", "--max-train-examples", "16", "--rounds", "1",
                "--warmup", "1", "--steps-per-round", "1", "--peak-size", "128", "--peak-seconds", "0.1"]
# the headline's sides: ours eager, compiled and graphed against the strongest baseline, compiled
HEADLINE = ["--precision", "bf16", "--strong-precision", "bf16", "--sides", "ours-compiled", "ours-graphed",
            "hf-strong-compiled", "--graphed"]
SIZES = {
    "base": dict(step_rows=(64, 256), step_args=["--rounds", "10", "--warmup", "3"],
                 preflight_pretrain_args=MICRO_PRETRAIN, preflight_finetune_args=MICRO_FINETUNE, smoke_steps=30,
                 throughput_size="base", pretrain=(128, 64), pretrain_args=["--rounds", "20"],
                 headline=(128, 256), headline_args=[*HEADLINE, "--max-predictions", "32", "--rounds", "10",
                                                     "--warmup", "3", "--max-words", "300000"],
                 lightning_steps=(40, 4), lightning_model="base",
                 finetune_args=["--rounds", "8", "--warmup", "1"], runs_profile="mini", runs=8,
                 runs_overrides=["finetune.epochs=1", "finetune.max_train_examples=2000",
                                 "finetune.max_eval_examples=500"]),
    "micro": dict(step_rows=(8, 16), step_args=["--rounds", "2", "--warmup", "1", "--max-words", "20000"],
                  preflight_pretrain_args=TOY_PRETRAIN, preflight_finetune_args=TOY_FINETUNE, smoke_steps=10,
                  throughput_size="micro", pretrain=(64, 8), pretrain_args=TOY_PRETRAIN,
                  headline=(64, 8), headline_args=[*HEADLINE, "--max-predictions", "16", *TOY_PRETRAIN],
                  lightning_steps=(4, 2), lightning_model="micro",
                  finetune_args=TOY_FINETUNE, runs_profile="micro", runs=2,
                  runs_overrides=["finetune.max_train_examples=16", "finetune.max_eval_examples=16"]),
}


class SectionCutOff(BaseException):
    """Raised by the alarm in the section that ran past its cut-off (a BaseException, as KeyboardInterrupt:
    the libraries' `except Exception` retries and fallbacks must not swallow it)."""


def _alarm(signum, frame):
    raise SectionCutOff()


class Session:
    """The sections' results and their files: `session.json` and `session.md`, rewritten after each."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.start = args.started_at or time.time()
        self.budget = {s.name: s.budget_s for s in SECTIONS} | dict(args.section_budget)
        # every section starts from the process's own fp32 matmul precision: one that measures fp32 on
        # purpose sets IEEE itself (benchmarks.common.start_run), and the HF Trainer's TF32 stays in its section
        self.matmul_precision = matmul_precision_state()
        started = datetime.fromtimestamp(self.start, timezone.utc).isoformat(timespec="seconds")
        self.data = {"session": {"device": args.device, "size": args.size, "budget_s": args.budget,
                                 "started": started, "argv": sys.argv[1:], "machine": machine()},
                     "sections": {}}

    def left(self) -> float:
        return self.args.budget - (time.time() - self.start)

    def record(self, name: str, entry: dict) -> None:
        self.data["sections"][name] = {"budget_s": self.budget[name], **entry}
        self.data["session"]["wall_s"] = time.time() - self.start
        self.save()

    def run(self, name: str, section: Callable[[], dict], skip: str | None = None,
            partial: dict | None = None) -> dict | None:
        """Run `section` if its budget fits in what is left (else record it skipped, with the reason),
        cut off at twice its budget or the session's end; record and save either way. `partial`: a dict
        the section fills as it goes, recorded where it does not finish."""
        budget, left = self.budget[name], self.left()
        if skip is None and self.args.only and name not in ("install", *self.args.only):  # the install always
            skip = "not named by --only"
        if skip is None and budget > left:
            skip = (f"its budget of {budget:.0f} s does not fit in the {max(left, 0):.0f} s left of the session's "
                    f"{self.args.budget:.0f} s")
        if skip:
            print(f"[{name}] skipped: {skip}", flush=True)
            self.record(name, {"status": "skipped", "reason": skip})
            return None
        print(f"[{name}] budget {budget:.0f} s, {left:.0f} s left", flush=True)
        cut = max(1, int(min(2 * budget, left)))
        restore_matmul_precision(self.matmul_precision)  # whatever a section before switched on
        suite.settle(self.device)  # before the alarm is set: the cut-off is the section's own time
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(cut)
        start, cpu = time.perf_counter(), time.process_time()
        try:
            result = suite.measured(self.device, section, settled=True)
            entry = {"status": "done", "result": result}
        except SectionCutOff:
            entry = {"status": "cut off", "reason": f"still running after {cut} s (budget {budget:.0f} s)"}
        except Exception as error:  # a CUDA failure is a finding: recorded, and the session goes on
            entry = {"status": "failed", "reason": f"{type(error).__name__}: {error}"[:2000],
                     "traceback": traceback.format_exc()[-6000:]}
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        if entry["status"] != "done" and partial:
            entry["partial"] = partial
        entry["wall_s"] = time.perf_counter() - start
        entry["cpu_s"] = time.process_time() - cpu  # this process's threads: on a shared CPU, the steadier figure
        entry["over_budget"] = entry["wall_s"] > budget
        print(f"[{name}] {entry['status']} in {entry['wall_s']:.1f} s ({entry['cpu_s']:.1f} s of CPU)"
              + (f": {entry['reason'].splitlines()[0]}" if "reason" in entry else ""), flush=True)
        self.record(name, entry)
        return entry.get("result")

    @property
    def device(self) -> torch.device:
        return torch.device(self.args.device)

    def save(self) -> None:
        out = self.args.out
        for name, text in (("session.json", json.dumps(self.data, indent=1, default=str)),
                           ("session.md", markdown(self.data))):
            temporary = out / f".{name}.tmp"  # a cut-off command never leaves half a file
            temporary.write_text(text)
            temporary.replace(out / name)


# ------------------------------------------------------------------------------------------ sections

def install_section(args: argparse.Namespace) -> dict:
    """What scripts/gpu_session.sh reported, and whether each package it installed imports."""
    site = Path(args.installed) if args.installed else None
    result = {"seconds": args.install_seconds, "site": str(site) if site else None}
    packages, failures = {}, {}
    for dist in importlib.metadata.distributions(path=[str(site)]) if site else []:
        name = dist.metadata["Name"]
        packages[name] = dist.version
        for module in _top_level_modules(dist):
            try:
                importlib.import_module(module)
            except Exception as error:
                failures[f"{name}: {module}"] = f"{type(error).__name__}: {error}"[:300]
    result.update(packages=packages, import_failures=failures)
    if failures:
        raise RuntimeError(f"{len(failures)} installed modules do not import: {failures}")
    return result


def _top_level_modules(dist) -> list[str]:
    """The importable top-level names a distribution installed (its top_level.txt, else its files)."""
    text = dist.read_text("top_level.txt")
    names = text.split() if text else {Path(str(f)).parts[0].removesuffix(".py") for f in dist.files or []}
    return sorted(n for n in names if n.isidentifier() and not n.startswith("_") and n not in ("bin", "tests"))


def environment_section(args: argparse.Namespace) -> dict:
    device = torch.device(args.device)
    smi = shutil.which("nvidia-smi")
    out = {"python": sys.version.split()[0], "platform": platform.platform(), "cpu_count": os.cpu_count(),
           "torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
           "nvidia_smi": (subprocess.run([smi], capture_output=True, text=True).stdout if smi
                          else "nvidia-smi: not found"),
           "pip_list": _pip_list()}
    print(out["nvidia_smi"], flush=True)
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        out["device"] = {"name": p.name, "capability": f"{p.major}.{p.minor}",
                         "multiprocessors": p.multi_processor_count,
                         "memory_bytes": p.total_memory, "bf16": torch.cuda.is_bf16_supported()}
    size = args.peak_size or (8192 if device.type == "cuda" else 512)
    dtypes = {"bf16": torch.bfloat16, "fp32": torch.float32} if device.type == "cuda" else {"fp32": torch.float32}
    out["peaks"] = {name: matmul_peak(dtype, device, size) for name, dtype in dtypes.items()}
    out["peak_size"] = size
    print(f"torch {out['torch']}, CUDA {out['cuda']}, cuDNN {out['cudnn']}; matmul peaks "
          + ", ".join(f"{k} {v / 1e12:.1f} TFLOP/s" for k, v in out["peaks"].items()), flush=True)
    return out


def launch_overhead_section(args: argparse.Namespace, launches: int = 5000) -> dict:
    """Host time per launch of a one-element kernel: issued one by one (what an eager step pays per
    kernel), and as one CUDA graph replaying them all (what `mode="reduce-overhead"` would pay)."""
    device = torch.device(args.device)
    x = torch.zeros(1, device=device)

    def issue():
        for _ in range(launches):
            x.add_(1)

    issue()
    sync(device)
    start = time.perf_counter()
    issue()
    issued = time.perf_counter() - start  # the host's side: enqueueing, before the device catches up
    sync(device)
    drained = time.perf_counter() - start
    out = {"launches": launches, "issue_us": 1e6 * issued / launches, "drained_us": 1e6 * drained / launches}
    if device.type == "cuda":
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            issue()  # graphs are captured on a side stream, after a warm-up there
        torch.cuda.current_stream().wait_stream(stream)
        with torch.cuda.graph(graph):
            issue()
        graph.replay()
        torch.cuda.synchronize()
        start = time.perf_counter()
        graph.replay()
        torch.cuda.synchronize()
        out["graph_us"] = 1e6 * (time.perf_counter() - start) / launches
    # every launch ran: two issues, and on CUDA the side stream's warm-up and two replays (capture runs nothing)
    out["all_ran"] = float(x.item()) == (5 if device.type == "cuda" else 2) * launches
    print(f"one kernel launch: {out['issue_us']:.1f} us issued, {out['drained_us']:.1f} us until done"
          + (f", {out['graph_us']:.2f} us in a CUDA graph" if "graph_us" in out else ""), flush=True)
    return out


def profile_pretrain_section(args: argparse.Namespace, size: str, seq_batch: tuple[int, int]) -> dict:
    """One step of ours (eager) under torch.profiler, after two untimed ones: where the step's time goes."""
    from torch.profiler import ProfilerActivity, profile

    seq_len, batch_size = seq_batch
    argv = [*suite.common_args(suite_args(args, size, False)), "--seq-len", str(seq_len),
            "--batch-size", str(batch_size)]
    bench = pretrain_throughput.parser().parse_args(argv)
    device = torch.device(args.device)
    precision = pretrain_throughput.resolve_precision("auto", device)
    cfg, vocab_path, shards = pretrain_throughput.prepare(bench)
    step, *_ = pretrain_throughput.build_ours(cfg, vocab_path, shards, device, precision, total_steps=4)
    for _ in range(2):
        step()
    sync(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        step()
        sync(device)
        wall = time.perf_counter() - start
    averages = prof.key_averages()
    on_device = [e for e in prof.events() if e.device_type.name == "CUDA"]
    busy_us = sum(e.device_time for e in on_device)  # kernel and copy time, summed (they run one at a time)
    top = sorted(averages, key=lambda e: e.self_device_time_total, reverse=True)[:12]
    cpu_top = sorted(averages, key=lambda e: e.self_cpu_time_total, reverse=True)[:8]
    out = {"seq_len": seq_len, "batch_size": batch_size, "precision": precision, "step_wall_s": wall,
           "device_busy_s": busy_us / 1e6, "device_busy_fraction": busy_us / 1e6 / wall,
           "device_ops": len(on_device),
           "top_device_ops": [{"name": e.key, "self_device_ms": e.self_device_time_total / 1e3, "count": e.count}
                              for e in top],
           "top_host_ops": [{"name": e.key, "self_cpu_ms": e.self_cpu_time_total / 1e3, "count": e.count}
                            for e in cpu_top]}
    print(f"one step {1e3 * wall:.1f} ms: device busy {1e3 * out['device_busy_s']:.1f} ms "
          f"({100 * out['device_busy_fraction']:.0f}%), {len(on_device)} device ops", flush=True)
    return out


def step_ab_section(args: argparse.Namespace, size: dict, compile: bool, out: dict) -> dict:
    """benchmarks.step_overhead at the size's width, at each of its row counts (64 then 256 at base): a
    cut-off keeps the counts it finished (`out`)."""
    from benchmarks import step_overhead

    sides = ["today", "static", *(["static-compiled"] if compile else []),
             *(["static-graphed"] if compile and args.device.startswith("cuda") else [])]
    for rows in size["step_rows"]:
        argv = ["--device", args.device, "--size", size["throughput_size"], "--batch-size", str(rows),
                "--sides", *sides, "--work-dir", str(args.work_dir), "--data-dir", str(args.data_dir),
                *size["step_args"]]
        result = step_overhead.run(step_overhead.parser().parse_args(argv))
        print(step_overhead.report(result), flush=True)
        out[str(rows)] = result
    return dict(out)


def profile_step_section(args: argparse.Namespace, size: dict, compiled: bool, graphed: bool = False,
                         rows: int | None = None, precision: str = "fp32") -> dict:
    """One sync-free step (benchmarks.step_overhead: graphed where `graphed` and on CUDA, else compiled where
    `compiled`, else eager) in `precision`'s autocast under torch.profiler, after two untimed ones: the
    device's busy fraction, the kernels of a step, and the attention (SDPA) kernels chosen."""
    from torch.profiler import ProfilerActivity, profile

    from benchmarks import step_overhead
    from datamodules.pretrain.vocab import read_vocab

    rows = rows or size["step_rows"][-1]
    bench = step_overhead.parser().parse_args(["--device", args.device, "--size", size["throughput_size"],
                                               "--batch-size", str(rows), "--work-dir", str(args.work_dir),
                                               "--data-dir", str(args.data_dir), "--precision", precision,
                                               *size["step_args"]])
    device = start_run(bench)
    cfg, vocab_path, shards = pretrain_throughput.prepare(bench)
    vocab = read_vocab(vocab_path)
    side = ("static-graphed" if graphed and device.type == "cuda" else "static-compiled" if compiled
            else "static")
    step = step_overhead.build_sides(cfg, vocab, device, 4, [side], precision)[side]
    data = step_overhead.batches(cfg, vocab, shards, 3, bench.max_predictions, device)
    for batch in data[:2]:
        step(batch)
    sync(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        step(data[2])
        sync(device)
        wall = time.perf_counter() - start
    on_device = [e for e in prof.events() if e.device_type.name == "CUDA"]
    busy_us = sum(e.device_time for e in on_device)
    averages = prof.key_averages()
    top = sorted(averages, key=lambda e: e.self_device_time_total, reverse=True)[:12]
    attention = sorted({e.key for e in averages if any(k in e.key.lower() for k in ATTENTION_KERNELS)})
    out = {"side": side, "precision": precision, "batch_size": rows, "step_wall_s": wall,
           "device_busy_s": busy_us / 1e6, "device_busy_fraction": busy_us / 1e6 / wall, "device_ops": len(on_device),
           "attention_kernels": attention[:8],
           "top_device_ops": [{"name": e.key, "self_device_ms": e.self_device_time_total / 1e3, "count": e.count}
                              for e in top if e.self_device_time_total > 0]}
    print(f"{side}, {rows} rows, {precision}: one step {1e3 * wall:.1f} ms, device busy "
          f"{1e3 * out['device_busy_s']:.1f} ms, {len(on_device)} device ops; attention: {attention[:3]}", flush=True)
    return out


# names of the attention kernels SDPA may pick (flash, memory-efficient, cuDNN, math), on either device
ATTENTION_KERNELS = ("scaled_dot_product", "flash", "fmha", "efficient_attention", "cudnn_attention")


def headline_section(args: argparse.Namespace, size: dict, compile: bool, packing: bool) -> dict:
    """benchmarks.pretrain_throughput at the headline's size, in bf16: ours eager, compiled and graphed
    (CUDA) against hf-strong compiled (hf-strong eager where nothing is compiled: the CPU rehearsal), with
    `max_predictions` set (one static shape), each side's warm-up (compile) seconds."""
    extra = list(size["headline_args"])
    if not compile:
        at = extra.index("--sides")
        extra[at + 1:at + 4] = ["hf-strong"]
    return pretrain_run(args, size["throughput_size"], size["headline"], extra + (["--packing"] if packing else []),
                        compile)


def lightning_path_section(args: argparse.Namespace, size: dict, compile: bool, out: dict) -> dict:
    """`bioablate pretrain` (Lightning, the run's callbacks, logger and loader workers) at the headline's
    model, rows and predictions, bf16-mixed: `lightning_steps[0]` steps (compiled as CUDA graphs on CUDA),
    then `lightning_steps[1]` at accumulate 2 (compiled, no graphs: they refuse accumulation). Tokens/s as
    the module logs it (the median over the steps after the first), against the headline's bare step."""
    from mlflow.tracking import MlflowClient

    from ablations import api
    from benchmarks.pretrain_throughput import SIZES as MODELS

    seq_len, rows = size["headline"]
    predictions = size["headline_args"][size["headline_args"].index("--max-predictions") + 1]
    accelerator = "gpu" if torch.device(args.device).type == "cuda" else "cpu"
    common = [*(f"model.{k}={v}" for k, v in MODELS[size["lightning_model"]].items()),
              f"trainer.accelerator={accelerator}", "trainer.devices=1", "trainer.progress_bar=false",
              "trainer.precision=bf16-mixed", "trainer.log_every_n_steps=10", "trainer.num_workers=2",
              f"pretrain.seq_len={seq_len}", f"pretrain.batch_size={rows}", f"pretrain.max_predictions={predictions}",
              "pretrain.vocab=pubmedbert-uncased", "pretrain.max_words=300000", "pretrain.masking=wwm",
              f"trainer.compile={str(compile).lower()}"]
    for name, steps, accumulate, mode in (("graphed", size["lightning_steps"][0], 1, "reduce-overhead"),
                                          ("accumulate_2", size["lightning_steps"][1], 2, "default")):
        work = args.work_dir / f"lightning-{name}"
        shutil.rmtree(work, ignore_errors=True)
        cfg = api.config("mini", [*common, f"pretrain.max_steps={steps}", f"pretrain.checkpoint_every={steps}",
                                  f"pretrain.accumulate={accumulate}", f"trainer.compile_mode={mode}"],
                         task="pretrain", experiment_name="pretrain", data_dir=str(args.data_dir), work_dir=str(work))
        start = time.perf_counter()
        result = api.pretrain(cfg)
        wall = time.perf_counter() - start
        rates = sorted(m.value for m in MlflowClient(result.tracking_uri).get_metric_history(
            result.run_id, "train/tokens_per_s") if m.step > 0)
        out[name] = {"steps": steps, "accumulate": accumulate, "compile_mode": mode if compile else None,
                     "wall_s": wall, "tokens_per_s": rates[len(rates) // 2] if rates else None,
                     "losses": len(result.losses)}
        print(f"lightning {name}: {steps} steps in {wall:.1f} s, {out[name]['tokens_per_s']} tokens/s", flush=True)
    return dict(out)


def compile_cache_section(args: argparse.Namespace, limit_mib: float = 48) -> dict:
    """The inductor cache the compiled sections wrote, as one tar.gz in `--out` if it is under `limit_mib`
    (a later call can start warm from it), else only its size."""
    import tarfile

    from lightning_modules.compiling import compile_cache_dir

    folder = Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or compile_cache_dir(args.work_dir))
    files = [f for f in folder.rglob("*") if f.is_file()] if folder.is_dir() else []
    size = sum(f.stat().st_size for f in files)
    out = {"folder": str(folder), "files": len(files), "bytes": size, "saved": None}
    if files and size <= limit_mib * 2 ** 20:
        archive = args.out / "compile-cache.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(folder, arcname="compile-cache")
        out["saved"] = archive.name
    print(f"compile cache: {len(files)} files, {size / 2 ** 20:.1f} MiB" + (f", saved as {out['saved']}" if out["saved"]
          else ""), flush=True)
    return out


def _pip_list() -> dict[str, str]:
    """Every installed distribution and its version (the image's, plus the wheelhouse's)."""
    return {d.metadata["Name"]: d.version for d in importlib.metadata.distributions()}


def suite_args(args: argparse.Namespace, size: str, compile: bool) -> argparse.Namespace:
    """The namespace benchmarks.suite's sections read."""
    return argparse.Namespace(device=args.device, size=size, work_dir=args.work_dir, data_dir=args.data_dir,
                              threads=args.threads, compile=compile, out=args.work_dir, smoke_steps=None)


def pretrain_run(args: argparse.Namespace, size: str, seq_batch: tuple[int, int], extra: list[str],
                 compile: bool) -> dict:
    seq_len, batch_size = seq_batch
    argv = [*suite.common_args(suite_args(args, size, compile)), "--seq-len", str(seq_len),
            "--batch-size", str(batch_size), *extra]
    out = pretrain_throughput.run(pretrain_throughput.parser().parse_args(argv))
    print(pretrain_throughput.report(out), flush=True)
    return out


def finetune_run(args: argparse.Namespace, size: str, tasks: list[str], extra: list[str], compile: bool) -> dict:
    argv = [*suite.common_args(suite_args(args, size, compile)), "--task", *tasks, *extra]
    out = finetune_throughput.run(finetune_throughput.parser().parse_args(argv))
    print(finetune_throughput.report(out), flush=True)
    return out


def smoke_run(args: argparse.Namespace, steps: int) -> dict:
    """suite's smoke at micro, in bf16 where the device computes it (micro's profile says fp32)."""
    namespace = suite_args(args, "micro", compile=False)
    namespace.smoke_steps = steps
    bf16 = ["trainer.precision=bf16-mixed"] if torch.device(args.device).type == "cuda" else []
    return suite.smoke_section(namespace, bf16)


def runs_per_device_section(args: argparse.Namespace, size: dict, out: dict) -> dict:
    """The same `size['runs']` fine-tuning runs one after another, then `--runs-per-device` that many at
    once on the one device, each from a work directory of its own (nothing reused between the two);
    `out` fills as it goes (a cut-off keeps the first half)."""
    from ablations import api

    runs = size["runs"]
    tasks = ["bc5-chem", "chemprot"]
    yaml = args.work_dir / "runs-per-device.yaml"
    yaml.write_text(f"name: gpu-session-runs\nmodels:\n  random: {{name_or_path: random-bert}}\n"
                    f"tasks: [{', '.join(tasks)}]\nseeds: {runs // len(tasks)}\n"
                    "table: {rows: task, columns: model}\n")
    accelerator = "gpu" if torch.device(args.device).type == "cuda" else "cpu"
    overrides = [*size["runs_overrides"], f"trainer.accelerator={accelerator}", "trainer.progress_bar=false"]
    out.update(runs=runs, profile=size["runs_profile"], tasks=tasks, overrides=overrides)
    for mode, per_device in (("one_after_another", 1), ("at_once", runs)):
        work = args.work_dir / f"runs-{mode}"
        shutil.rmtree(work, ignore_errors=True)
        experiment = api.experiment(yaml, profile=size["runs_profile"], overrides=overrides,
                                    data_dir=str(args.data_dir), work_dir=str(work))
        start = time.perf_counter()
        summary = api.run(experiment, runs_per_device=per_device)
        out[mode] = {"runs_per_device": per_device, "wall_s": time.perf_counter() - start,
                     "summary": summary.lines(), "ok": summary.ok}
        print(f"{mode} (--runs-per-device {per_device}): {out[mode]['wall_s']:.1f} s; {summary.lines()[0]}", flush=True)
        if not summary.ok:
            raise RuntimeError(f"{mode}: " + "; ".join(summary.lines()))
    out["speedup"] = out["one_after_another"]["wall_s"] / out["at_once"]["wall_s"]
    return out


# ------------------------------------------------------------------------------------------ report

def compiled_passed(session: Session, name: str, result: dict | None) -> bool:
    """Whether preflight `name` timed its compiled sides; True where it did not run (skipped: nothing
    known against compiling)."""
    if session.data["sections"][name]["status"] == "skipped":
        return True
    if result is None:
        return False
    found = [result] if "sides" in result else result.get("results", [])
    return bool(found) and all("ours-compiled" in r and "hf-strong-compiled" in r for r in found)


def markdown(data: dict) -> str:
    s = data["session"]
    lines = [f"# GPU session: {s['size']} on {s['device']}", "",
             f"Machine: `{s['machine']}`. Started {s['started']} (UTC), {s.get('wall_s', 0):.0f} s of the "
             f"{s['budget_s']:.0f} s budget. Ratios are ours / each baseline, from steps interleaved in one process.",
             ""]
    if "compiled" in s:
        lines += ["Compiled sides in the base sections: " + ", ".join(
            f"{k} {'yes' if v else 'no'}" for k, v in s["compiled"].items())
            + " (no: not asked for, or its preflight did not time them).", ""]
    lines += ["| section | status | budget | wall |", "|---|---|---|---|"]
    titles = {x.name: x.title for x in SECTIONS}
    for name, entry in data["sections"].items():
        wall = f"{entry['wall_s']:.1f} s" if "wall_s" in entry else "-"
        lines.append(f"| {name} | {entry['status']} | {entry['budget_s']:.0f} s | {wall} |")
    lines.append("")
    for name, entry in data["sections"].items():
        lines += [f"## {titles[name]} (`{name}`)", ""]
        if entry["status"] != "done":
            lines += [f"**{entry['status']}**: {entry.get('reason', '')}", ""]
            if entry.get("partial"):
                lines += [f"- done before that: `{json.dumps(entry['partial'], default=str)[:1500]}`", ""]
            continue
        try:
            lines += _section_lines(name, entry["result"]) + [""]
        except (KeyError, TypeError, ValueError) as error:  # a result of another shape: the JSON, not a lost file
            raw = json.dumps(entry["result"], default=str)[:1000]
            lines += [f"- (not rendered: {type(error).__name__} {error}) `{raw}`", ""]
    return "\n".join(lines)


def _section_lines(name: str, r: dict) -> list[str]:
    """A section's result as markdown lines (the throughput tables are benchmarks.suite's, under
    their own second-level headings)."""
    if name == "install":
        return [f"- {len(r['packages'])} packages from `{r['site']}` in {r['seconds']} s; all import"]
    if name == "environment":
        dev = r.get("device", {})
        peaks = ", ".join(f"{k} {v / 1e12:.1f} TFLOP/s" for k, v in r["peaks"].items())
        return [f"- Python {r['python']}, torch {r['torch']}, CUDA {r['cuda']}, cuDNN {r['cudnn']}, "
                f"{r['cpu_count']} CPUs",
                *([f"- {dev['name']}, compute capability {dev['capability']}, {dev['multiprocessors']} SMs, "
                   f"{dev['memory_bytes'] / 2 ** 30:.0f} GiB"] if dev else []),
                f"- matmul peaks ({r['peak_size']}^3, measured now): {peaks}"]
    if name == "launch_overhead":
        graph = f"; replayed in a CUDA graph {r['graph_us']:.2f} us" if "graph_us" in r else ""
        return [f"- one one-element kernel, {r['launches']} launches: issued {r['issue_us']:.1f} us each, "
                f"{r['drained_us']:.1f} us each until the device finished{graph}"]
    if name == "step_ab":
        from benchmarks import step_overhead

        return [line for rows in r.values() if isinstance(rows, dict) and "sides" in rows
                for line in ["```", *step_overhead.report(rows).splitlines(), "```"]]
    if name in ("profile_step", "profile_graphed"):
        return [f"- {r['side']}, {r.get('precision', 'fp32')}, batch {r['batch_size']} x 128: one step "
                f"{1e3 * r['step_wall_s']:.1f} ms, the device busy {1e3 * r['device_busy_s']:.1f} ms of it "
                f"({100 * r['device_busy_fraction']:.0f}%) over {r['device_ops']} kernels and copies; attention: "
                f"{', '.join(f'`{k[:60]}`' for k in r.get('attention_kernels', [])) or '-'}",
                *[f"  - `{o['name'][:80]}` {o['self_device_ms']:.2f} ms x {o['count']}" for o in r["top_device_ops"]]]
    if name == "profile_pretrain":
        lines = [f"- ours, eager, {r['precision']}, batch {r['batch_size']} x {r['seq_len']}: one step "
                 f"{1e3 * r['step_wall_s']:.1f} ms, the device busy {1e3 * r['device_busy_s']:.1f} ms of it "
                 f"({100 * r['device_busy_fraction']:.0f}%) over {r['device_ops']} kernels and copies", ""]
        if r["device_ops"]:  # none on a CPU
            lines += ["| op (device time) | ms | calls |", "|---|---|---|"]
            lines += [f"| `{o['name'][:80]}` | {o['self_device_ms']:.2f} | {o['count']} |" for o in r["top_device_ops"]]
            lines.append("")
        lines += ["| op (host time) | ms | calls |", "|---|---|---|"]
        lines += [f"| `{o['name'][:80]}` | {o['self_cpu_ms']:.2f} | {o['count']} |" for o in r["top_host_ops"]]
        return lines
    if name in ("headline", "headline_packed"):
        lines = suite.pretrain_markdown([r])[2:]  # the table without suite's heading
        warm = ", ".join(f"{side} {r[side]['warmup_s']:.1f} s" for side in r["sides"])
        graphed = (f"; ours-graphed / hf-strong-compiled **{r['graphed_ratio']:.2f}x**" if "graphed_ratio" in r
                   else "")
        return lines + [f"- warm-up (compile) seconds: {warm}{graphed}"]
    if name == "lightning_path":
        return [f"- {k}: {v['steps']} steps at accumulate {v['accumulate']} (compile mode {v['compile_mode']}) in "
                f"{v['wall_s']:.1f} s, {v['tokens_per_s'] or 0:,.0f} tokens/s (median as logged), {v['losses']} losses"
                for k, v in r.items() if isinstance(v, dict)]
    if name == "compile_cache":
        return [f"- `{r['folder']}`: {r['files']} files, {r['bytes'] / 2 ** 20:.1f} MiB; saved: {r['saved'] or 'no'}"]
    if name in ("preflight_finetune", "finetune_base"):
        return suite.finetune_markdown(r)[2:]
    if name == "preflight_smoke":
        return suite.smoke_markdown(r)[2:]
    if name == "runs_per_device":
        a, b = r["one_after_another"], r["at_once"]
        return [f"- {r['runs']} `{r['profile']}` fine-tuning runs ({', '.join(r['tasks'])}; "
                f"{' '.join(r['overrides'])}): one after another {a['wall_s']:.0f} s, "
                f"`--runs-per-device {b['runs_per_device']}` {b['wall_s']:.0f} s: "
                f"**{r['speedup']:.2f}x**"]
    return [f"- `{json.dumps(r, default=str)[:1000]}`"]


# ------------------------------------------------------------------------------------------ main

def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=folder_argument,
                        help="where session.json and session.md go (the device's $OUT); required unless --plan")
    parser.add_argument("--plan", nargs="?", const="pretrain", choices=sorted(PLANS),
                        help="print a plan's sections with their budgets and the total, and exit (default: pretrain)")
    parser.add_argument("--session", choices=sorted(PLANS), default="pretrain",
                        help="the plan to run: pretrain (the headline first), finetune (a warm second call), extra")
    parser.add_argument("--device", type=device_argument, default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--size", choices=sorted(SIZES), help="default: base on CUDA, micro on a CPU")
    parser.add_argument("--budget", type=seconds_argument, default=480,
                        help="seconds for the whole session, install included")
    parser.add_argument("--section-budget", nargs="+", default=[], metavar="NAME=SECONDS", type=_budget,
                        help=f"another budget for a section ({', '.join(SECTION_NAMES)})")
    parser.add_argument("--only", nargs="+", choices=SECTION_NAMES[1:], metavar="NAME",
                        help="run these sections, record the others skipped (a rerun of what failed, after a fix)")
    parser.add_argument("--no-compile", action="store_true", help="eager only (the CPU rehearsal's default: "
                        "compiling on 2 CPU cores takes minutes)")
    parser.add_argument("--base-rounds", type=COUNT, help="timed rounds of finetune_base (default: the size's)")
    parser.add_argument("--data-dir", type=Path, help="staged data (default: $BIOABLATE_DATA)")
    parser.add_argument("--work-dir", type=Path, help="caches and the runs' stores (default: <out>/../work)")
    parser.add_argument("--threads", type=COUNT)
    parser.add_argument("--peak-size", type=COUNT, help="matmul size of the environment's peaks")
    parser.add_argument("--started-at", type=float, help="epoch seconds the session began (the wrapper's start, "
                        "so that the install counts against the budget)")
    parser.add_argument("--installed", help="where the wrapper installed the wheelhouse")
    parser.add_argument("--install-seconds", type=float)
    parser.add_argument("--install-status", choices=["ok", "failed", "skipped"], default="skipped")
    parser.add_argument("--install-reason", default="not installed by scripts/gpu_session.sh")
    return parser


def _budget(text: str) -> tuple[str, float]:
    name, _, seconds = text.partition("=")
    if name not in SECTION_NAMES or not seconds:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=SECONDS with NAME one of {', '.join(SECTION_NAMES)}")
    return name, seconds_argument(seconds)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.plan:
        print("\n".join(plan_lines(args.plan)))
        return 0
    if args.out is None:
        parser().error("the following arguments are required: --out (or --plan to print a plan)")
    device = chosen_device(args, parser())
    from ablations.places import resolve_data_dir

    args.size = args.size or ("base" if device.type == "cuda" else "micro")
    compile = not args.no_compile and device.type == "cuda"
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    args.work_dir = (args.work_dir or args.out.parent / f"{args.out.name}-work").resolve()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    args.data_dir = resolve_data_dir(str(args.data_dir) if args.data_dir else None)
    from lightning_modules.compiling import compile_cache_dir, use_compile_cache

    use_compile_cache(compile_cache_dir(args.work_dir))  # one cache for every section's compiles, saved at the end
    size = SIZES[args.size]
    session = Session(args)
    print("\n".join(plan_lines(args.session)), flush=True)

    if args.install_status == "ok":
        session.run("install", lambda: install_section(args))
    elif args.install_status == "failed":
        session.record("install", {"status": "failed", "reason": args.install_reason, "wall_s": args.install_seconds})
    else:
        session.record("install", {"status": "skipped", "reason": args.install_reason})
    rounds = ["--rounds", str(args.base_rounds)] if args.base_rounds else []
    progress: dict = {}
    step_progress: dict = {}
    sections: dict[str, Callable[[], dict]] = {
        "environment": lambda: environment_section(args),
        "headline": lambda: headline_section(args, size, compile, packing=False),
        "headline_packed": lambda: headline_section(args, size, compile, packing=True),
        "lightning_path": lambda: lightning_path_section(args, size, compile, progress),
        "profile_graphed": lambda: profile_step_section(args, size, compile, graphed=True,
                                                        rows=size["headline"][1], precision="bf16"),
        "compile_cache": lambda: compile_cache_section(args),
        "preflight_finetune": lambda: finetune_run(args, "micro", ["bc5-chem"], size["preflight_finetune_args"],
                                                   compile),
        "finetune_base": lambda: finetune_run(args, size["throughput_size"], ["bc5-chem", "chemprot"],
                                              size["finetune_args"] + rounds, compile and compiled_passed(
                                                  session, "preflight_finetune",
                                                  session.data["sections"].get("preflight_finetune", {}).get(
                                                      "result"))),
        "runs_per_device": lambda: runs_per_device_section(args, size, progress),
        "launch_overhead": lambda: launch_overhead_section(args),
        "step_ab": lambda: step_ab_section(args, size, compile, step_progress),
        "preflight_smoke": lambda: smoke_run(args, size["smoke_steps"]),
        "profile_pretrain": lambda: profile_pretrain_section(args, size["throughput_size"], size["pretrain"]),
    }
    partial = {"lightning_path": progress, "runs_per_device": progress, "step_ab": step_progress}
    for name in PLANS[args.session][1:]:  # the install is the wrapper's, recorded above
        session.run(name, sections[name], partial=partial.get(name))
    gc.collect()
    statuses = {name: entry["status"] for name, entry in session.data["sections"].items()}
    print(f"\n{session.data['session']['wall_s']:.0f} s; {statuses}; results in {args.out}/session.json and session.md",
          flush=True)
    print(Path(args.out / "session.md").read_text())
    return 0 if all(s in ("done", "skipped") for s in statuses.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""What every throughput benchmark shares: the machine's measured matmul peak, model FLOPs, and timing
two training steps side by side (interleaved, in one process) so that their ratio is fair even on a
noisy machine.

MFU (model FLOP utilisation) = model FLOPs per second / measured peak. Model FLOPs count the matmuls a
transformer must do (6 x parameters-in-matmuls per trained token, plus attention scores), not what an
implementation happens to do: a baseline that computes the MLM output layer at every position gets no
credit for the positions the loss throws away.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import resource
import statistics
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from bioablate_core.counts import count_argument
from bioablate_core.hardware import machine  # noqa: F401  (re-exported for the benchmarks)
from datamodules.spec import MAX_SEQUENCE, MIN_SEQUENCE
from lightning_modules.compute import transformer_train_flops_per_token  # noqa: F401  (re-exported: one count for runs and benchmarks)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bf16_native(device: torch.device | str) -> bool:
    """Whether `device` computes bf16 matmuls in hardware: a CUDA GPU that supports bf16, or a CPU with
    avx512_bf16 or AMX. Elsewhere bf16 is emulated and slower than fp32, so the best configuration a
    practitioner would pick there (and `--precision auto` of the benchmarks) is fp32."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_precision(precision: str, device: torch.device | str) -> str:
    """`auto` -> bf16 where the device computes it natively, else fp32; bf16 / fp32 as given."""
    if precision != "auto":
        return precision
    return "bf16" if bf16_native(device) else "fp32"


def reset_peak_memory(device: torch.device | str) -> None:
    """Start a new peak-memory measurement: CUDA's allocator statistics, or the process's peak RSS
    (Linux resets VmHWM when "5" is written to /proc/self/clear_refs; elsewhere the peak stays the
    process's since it started, as `peak_memory` then says)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_memory(device: torch.device | str) -> dict:
    """Peak memory since `reset_peak_memory`: `torch.cuda.max_memory_allocated` on CUDA, the peak RSS
    (VmHWM) on a CPU. `what` names which one (`rss_since_start` where the peak could not be reset)."""
    device = torch.device(device)
    if device.type == "cuda":
        return {"bytes": torch.cuda.max_memory_allocated(device), "what": "cuda_max_memory_allocated"}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return {"bytes": int(line.split()[1]) * 1024, "what": "peak_rss"}
    except OSError:
        pass
    return {"bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "what": "rss_since_start"}


def matmul_peak(dtype: torch.dtype, device: torch.device | str = "cpu", size: int | None = None,
                seconds: float = 1.0) -> float:
    """Best FLOP/s of a square matmul in `dtype` on `device`: the ceiling MFU is measured against."""
    device = torch.device(device)
    size = size or (8192 if device.type == "cuda" else 1024)
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    sync(device)
    best, spent = 0.0, 0.0
    while spent < seconds:
        start = time.perf_counter()
        a @ b
        sync(device)
        elapsed = time.perf_counter() - start
        spent += elapsed
        best = max(best, 2 * size ** 3 / elapsed)
    return best


@dataclass
class Timing:
    name: str
    seconds: list[float]  # per measured step
    items: list[float]    # examples or tokens processed by each measured step
    warmup_s: float = 0.0  # the untimed steps first: where a compiled side compiles

    @property
    def per_second(self) -> float:
        return sum(self.items) / sum(self.seconds)

    @property
    def spread(self) -> float:
        """Relative spread of the step times (stdev / mean): how noisy the measurement was."""
        return statistics.pstdev(self.seconds) / statistics.mean(self.seconds)


def interleaved(steps: dict[str, Callable[[], float]], rounds: int, warmup: int = 2,
                device: torch.device | str = "cpu") -> dict[str, Timing]:
    """Time each step function `rounds` times, alternating between them so that any slowdown of the
    machine hits all of them alike. A step returns how many items (examples or tokens) it processed."""
    device = torch.device(device)
    out = {name: Timing(name, [], []) for name in steps}
    for name, fn in steps.items():
        start = time.perf_counter()
        for _ in range(warmup):
            fn()
        sync(device)
        out[name].warmup_s = time.perf_counter() - start
    for _ in range(rounds):
        for name, fn in steps.items():
            start = time.perf_counter()
            items = fn()
            sync(device)
            out[name].seconds.append(time.perf_counter() - start)
            out[name].items.append(items)
    return out


# Every count a benchmark takes, bounded where argparse reads it (one usage line, exit 2): `--rounds 0`
# divided by zero, `--seq-len 100000` asked for a 320 GB attention matrix.
COUNT = count_argument(1, 1_000_000)  # rounds, steps, batch sizes, repeats, seeds
WARMUP = count_argument(0, 1_000_000)  # untimed rounds: none is fine
SEQUENCE = count_argument(MIN_SEQUENCE, MAX_SEQUENCE)  # tokens per input row


def seconds_argument(text: str) -> float:
    """An argparse `type` for a time budget: a finite number of seconds above 0 (`--budget -5` ran nothing
    and exited 0)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    return seconds


def device_argument(text: str) -> str:
    """An argparse `type` for `--device`: a name torch knows (`cpu`, `cuda`, `cuda:1`, ...)."""
    try:
        torch.device(text)
    except (RuntimeError, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a torch device; e.g. cpu, cuda, cuda:1") from None
    return text


def folder_argument(text: str) -> Path:
    """An argparse `type` for an output folder: one that may not exist yet, but not a file."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file; give a folder for the results")
    return path


def add_shared_arguments(parser: argparse.ArgumentParser, cache: str) -> None:
    """The options both throughput benchmarks take: the peak's size and time, where data and `cache` live,
    --json."""
    parser.add_argument("--peak-size", type=COUNT, help="matmul size of the peak measurement (default: "
                        "benchmarks.common's)")
    parser.add_argument("--peak-seconds", type=float, default=1.0, help="how long each peak measurement runs "
                        "(default 1; the CPU rehearsal of benchmarks.gpu_session takes less)")
    parser.add_argument("--data-dir", type=Path, help="staged data (default: $BIOABLATE_DATA)")
    parser.add_argument("--work-dir", type=Path, help=f"for the {cache} (default: ./outputs)")
    parser.add_argument("--json", type=Path, help="also write the results here")


def start_run(args: argparse.Namespace) -> torch.device:
    """What every benchmark's run begins with: libraries quiet, the data and work directories resolved in
    `args`; fp32 matmuls in IEEE fp32 only where the benchmark measures fp32 on purpose (its `--precision`
    resolves to fp32, as its peak does), else the process's own choice, left answerable to Lightning; the
    device."""
    from ablations.places import resolve_data_dir, resolve_work_dir

    warnings.filterwarnings("ignore")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    args.data_dir = resolve_data_dir(str(args.data_dir) if args.data_dir else None)
    args.work_dir = resolve_work_dir(None) if args.work_dir is None else args.work_dir.resolve()
    device = torch.device(args.device)
    precision = getattr(args, "precision", None)
    if precision is not None and resolve_precision(precision, device) == "fp32":
        fp32_matmul_in_fp32()
    else:
        from lightning_modules.matmul_precision import answerable_matmul_precision

        answerable_matmul_precision()
    return device


def fp32_matmul_in_fp32() -> None:
    """fp32 matmuls in fp32 (the fp32 baseline's peak), whatever a side before switched on (the HF Trainer
    with `torch_compile` and bf16: TF32 through torch's new API), set so that the legacy getter Lightning asks
    answers (lightning_modules/matmul_precision.py says why it may not)."""
    torch.backends.fp32_precision = "ieee"  # the new API's global switch, the one the Trainer turned
    torch.set_float32_matmul_precision("highest")


# every switch of torch's per-backend fp32 precision API, the global one first (the others inherit it)
PRECISION_BACKENDS = ("", "cuda.matmul", "cudnn", "mkldnn", "mkldnn.matmul")


def _backend(name: str):
    backend = torch.backends
    for part in filter(None, name.split(".")):
        backend = getattr(backend, part)
    return backend


def matmul_precision_state() -> dict[str, str]:
    """The fp32 precision every backend was given (`none`: inherited), to restore with `restore_matmul_precision`."""
    return {name: _backend(name).fp32_precision for name in PRECISION_BACKENDS}


def restore_matmul_precision(state: dict[str, str]) -> None:
    """The precisions of `state` again, whatever a section since switched on (the HF Trainer: TF32), left
    answerable to Lightning's legacy getter."""
    from lightning_modules.matmul_precision import answerable_matmul_precision

    for name in PRECISION_BACKENDS:
        _backend(name).fp32_precision = state[name]
    answerable_matmul_precision()


def benchmark_main(make_parser: Callable[[], argparse.ArgumentParser], run: Callable, report: Callable,
                   argv: list[str] | None) -> int:
    """The command line both throughput benchmarks share: threads, device check, run, report, --json."""
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device visible")
    out = run(args)
    print(report(out))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


def chosen_device(args, parser) -> torch.device:
    """The benchmark's `--device` (refused in one line when CUDA is asked for and none is visible), with
    torch limited to `--threads` threads where given."""
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device visible")
    if args.threads:
        torch.set_num_threads(args.threads)
    return device

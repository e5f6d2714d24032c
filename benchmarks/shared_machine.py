"""The quick start on a shared CPU: wall time and CPU seconds with other processes keeping its CPUs busy
(`--spinners N`: N processes spinning, pinned to the same CPUs) and without, before and after a change.

    git archive BASE | tar -x -C /tmp/before     # the tree to compare against
    python -m benchmarks.shared_machine --before /tmp/before --spinners 0 2 --out outputs/shared-machine
    python -m benchmarks.shared_machine --before /tmp/before --whole   # the whole quick start (minutes each)

Each side (`--before` tree, this checkout) runs the same command in a fresh work folder, alternating the
sides within each load so both see the same machine: by default one cell of the quick start (its BC5-chem
linear-head run over MiniLM-L6, or micro's random BERT, fp32, on `--overrides`' reduced data: enough to show
the waste), with
`--whole` the quick start's `bioablate run quickstart`. CPU seconds are the command's process tree's user +
system time (getrusage of the waited children). The spinners stand for the other jobs of a shared
workstation: `os.sched_setaffinity` pins them and the command to the same CPUs. Writes `results.json` and
`summary.md` to `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import machine

REPO_ROOT = Path(__file__).resolve().parents[1]
REDUCED = ["finetune.max_train_examples=64", "finetune.max_eval_examples=32", "finetune.epochs=1"]
# the quick start's first cell under mini (experiments/quickstart.yaml): BC5-chem, linear head, MiniLM-L6, fp32
CELL = ["finetune", "--task", "bc5-chem", "finetune.head=linear", "finetune.max_length=128", "finetune.batch_size=8",
        "finetune.lr=2e-4", "trainer.precision=32-true"]


def measure(tree: Path, work: Path, args: argparse.Namespace, cpus: set[int]) -> dict:
    env = {k: v for k, v in os.environ.items()  # the command chooses (a thread count given would decide instead)
           if k not in ("MKL_NUM_THREADS", "OMP_NUM_THREADS", "OMP_WAIT_POLICY", "KMP_BLOCKTIME")}
    env["PYTHONPATH"] = str(tree)
    cell = [*CELL, "--model", args.model or ("random-bert" if args.profile == "micro" else "general-minilm")]
    command = [sys.executable, "-m", "ablations.cli", *(["run", "quickstart"] if args.whole else cell), "--profile",
               args.profile, "--work-dir", str(work), *args.overrides]
    if args.data_dir:
        command += ["--data-dir", args.data_dir]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True,
                          preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: exit {done.returncode}\n{done.stderr[-3000:]}")
    said = [line for line in done.stderr.splitlines() if line.startswith("bioablate: torch threads")]
    return {"wall_s": wall, "user_s": after.ru_utime - before.ru_utime, "sys_s": after.ru_stime - before.ru_stime,
            "load_before": load, "load_after": os.getloadavg()[0], "threads_line": said[0] if said else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the tree to compare against (git archive)")
    parser.add_argument("--spinners", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--profile", default="mini")
    parser.add_argument("--whole", action="store_true", help="the whole quick start, not one cell")
    parser.add_argument("--model", help="the cell's model (default: the quick start's under the profile)")
    parser.add_argument("--overrides", nargs="*", default=REDUCED)
    parser.add_argument("--data-dir", default=os.environ.get("BIOABLATE_DATA"))
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "outputs" / "shared-machine")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cpus = set(sorted(os.sched_getaffinity(0))[:2])
    rows = []
    for spinners in args.spinners:
        spinning = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                     preexec_fn=lambda cpu=cpu: os.sched_setaffinity(0, {cpu}))
                    for cpu in (sorted(cpus) * spinners)[:spinners]]
        try:
            for side, tree in (("before", args.before.resolve()), ("after", REPO_ROOT)):
                row = {"spinners": spinners, "side": side,
                       **measure(tree, args.out / f"work-{side}-{spinners}", args, cpus)}
                rows.append(row)
                print(json.dumps(row), flush=True)
        finally:
            for process in spinning:
                process.kill()
                process.wait()
    out = {"machine": machine(), "cpus": sorted(cpus), "profile": args.profile, "overrides": args.overrides,
           "rows": rows}
    (args.out / "results.json").write_text(json.dumps(out, indent=1))
    what = "run quickstart" if args.whole else " ".join(CELL) + " --model ..."
    lines = [f"# The quick start on a shared CPU ({machine()}, CPUs {sorted(cpus)})", "",
             f"`bioablate {what} --profile {args.profile} {' '.join(args.overrides)}`", "",
             "| spinners | side | wall (s) | CPU user+sys (s) | load before |", "|---:|---|---:|---:|---:|"]
    lines += [f"| {r['spinners']} | {r['side']} | {r['wall_s']:.1f} | {r['user_s'] + r['sys_s']:.1f} | "
              f"{r['load_before']:.1f} |" for r in rows]
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

"""A whole table's wall time: `bioablate run` against a shell loop of Hugging Face `Trainer` scripts.

    python -m benchmarks.table_benchmark --out outputs/table-bench                       # mini, both sides
    python -m benchmarks.table_benchmark --profile micro --sides ours --out /tmp/tb       # CI plumbing
    python -m benchmarks.table_benchmark --train-examples 400 800 --runs-per-device 1 2  # memory growth

The table: a tagging task (BC5-chem) and a relation-classification task (ChemProt), `--seeds` seeds
each, the profile's randomly initialised BERT, capped data at `mini` (TABLE_SETTINGS: a table takes
minutes, not hours). The same cells run two ways, back to back (`--repeats` alternates them again):

- **ours**: one `bioablate run` of the table's experiment (written to the output folder from
  TABLE_SETTINGS), one process executing every cell; each run's timing profile (`system/time/*`, logged to
  MLflow by lightning_modules/timing.py) gives the breakdown;
- **hf**: one `python -m benchmarks.hf_cell` process per cell, in turn, as a researcher's shell loop
  over `run_ner.py` / `run_glue.py`: the `hf-strong` Trainer, dev evaluated every epoch, the best
  checkpoint tested (benchmarks/hf_cell.py).

Both sides get the same precision (`--precision auto`: bf16 where the CPU computes it natively). Peak
RSS is sampled (psutil, every 0.2 s) over each invocation's whole process tree. Writes `results.json` and
`summary.md` to `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from benchmarks.common import COUNT, bf16_native, folder_argument, machine
from bioablate_core.hardware import TIME_PREFIX

REPO_ROOT = Path(__file__).resolve().parents[1]
TASKS = ("bc5-chem", "chemprot")
PARTS = ("process_start_imports", "model_load", "tokenization", "train_steps", "dev_eval", "test",
         "checkpoint_writes", "mlflow_logging", "other")  # lightning_modules.timing.PARTS, without importing torch
# the table's fine-tuning settings per profile (micro keeps its own tiny caps)
TABLE_SETTINGS = {"micro": {}, "mini": {"finetune.max_eval_examples": 200, "finetune.max_length": 128,
                                        "finetune.epochs": 2}}
DEFAULT_TRAIN_EXAMPLES = {"micro": None, "mini": 400}


class PeakRSS:
    """The peaks of the summed resident memory of a process and its descendants, sampled: RSS, which counts a
    page that forked processes share (the table's resampling workers, fork's copy-on-write) once in each, and
    PSS (proportional set size, Linux), which splits it between them, so that its sum is the tree's memory."""

    def __init__(self, pid: int, every: float = 0.2):
        self.pid, self.every, self.peak, self.peak_pss = pid, every, 0, 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.done.wait(self.every):
            try:
                root = psutil.Process(self.pid)
                tree = [root, *root.children(recursive=True)]
                total = sum(p.memory_info().rss for p in tree)
                pss = sum(getattr(p.memory_full_info(), "pss", 0) for p in tree)
            except psutil.Error:
                continue
            self.peak, self.peak_pss = max(self.peak, total), max(self.peak_pss, pss)

    def stop(self) -> tuple[float, float]:
        """(peak RSS, peak PSS) in MiB; PSS 0 where the system does not report it."""
        self.done.set()
        self.thread.join()
        return self.peak / 2**20, self.peak_pss / 2**20


def timed(command: list[str], env: dict[str, str], log: Path) -> tuple[float, tuple[float, float]]:
    """Run `command` (stdout and stderr to `log`); (wall seconds, (peak RSS, peak PSS) of its process tree in
    MiB)."""
    start = time.perf_counter()
    with open(log, "ab") as out:
        process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        peak = PeakRSS(process.pid)
        code = process.wait()
    wall, memory = time.perf_counter() - start, peak.stop()
    if code != 0:
        raise SystemExit(f"{' '.join(command[:4])} ... failed (exit {code}); its output is in {log}")
    return wall, memory


def settings(profile: str, train_examples: int | None) -> dict[str, object]:
    keys = dict(TABLE_SETTINGS[profile])
    if train_examples is not None:
        keys["finetune.max_train_examples"] = train_examples
    return keys


def experiment_yaml(profile: str, keys: dict[str, object], precision: str, seeds: int) -> str:
    """The table as a bioablate experiment: `keys` under every profile, the precision both sides use."""
    finetune = {k.split(".", 1)[1]: v for k, v in keys.items()}
    lines = ["name: table_benchmark", "description: the table benchmark's cells (benchmarks/table_benchmark.py)",
             f"profile: {profile}", "models:", "  random: {label: random BERT, name_or_path: random-bert}",
             f"tasks: [{', '.join(TASKS)}]", f"seeds: {seeds}", "overrides:",
             f"  trainer: {{precision: {precision}, progress_bar: false}}"]
    if finetune:
        lines.append("  finetune: {" + ", ".join(f"{k}: {v}" for k, v in finetune.items()) + "}")
    lines += ["table:", "  title: table benchmark", "  rows: task", "  columns: model"]
    return "\n".join(lines) + "\n"


def run_ours(args: argparse.Namespace, env: dict[str, str], keys: dict[str, object], folder: Path,
             runs_per_device: int) -> dict:
    """One `bioablate run` of the table; its runs' timing profiles from the MLflow store."""
    from mlflow.tracking import MlflowClient

    folder.mkdir(parents=True, exist_ok=True)
    yaml = folder / "table_benchmark.yaml"
    yaml.write_text(experiment_yaml(args.profile, keys, "bf16-mixed" if args.bf16 else "32-true", args.seeds))
    command = [sys.executable, "-m", "ablations.cli", "run", str(yaml), "--profile", args.profile,
               "--work-dir", str(folder / "work"), "--runs-per-device", str(runs_per_device)]
    wall, (rss, pss) = timed(command, env, folder / "ours.log")
    client = MlflowClient(f"sqlite:///{folder / 'work' / 'mlruns.db'}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = []
    for run in client.search_runs(experiments, "tags.kind = 'finetune'", order_by=["attributes.start_time ASC"]):
        seconds = {k.removeprefix(TIME_PREFIX): v for k, v in run.data.metrics.items() if k.startswith(TIME_PREFIX)}
        runs.append({"task": run.data.tags["task"], "seed": int(run.data.tags["seed"]), "seconds": seconds,
                     "tokenization_cache": run.data.tags.get("tokenization_cache"),
                     "mlflow_s": (run.info.end_time - run.info.start_time) / 1000,
                     "test": run.data.metrics.get("test/score"), "dev": run.data.metrics.get("best_dev/score")})
    return {"wall_s": wall, "peak_rss_mb": rss, "peak_pss_mb": pss, "runs_per_device": runs_per_device, "runs": runs,
            "outside_runs_s": wall - sum(r["seconds"].get("wall", 0.0) for r in runs)}


def run_hf(args: argparse.Namespace, env: dict[str, str], keys: dict[str, object], folder: Path,
           cells: list[tuple[str, int]]) -> dict:
    """One `benchmarks.hf_cell` process per cell, one after another (a shell loop)."""
    folder.mkdir(parents=True, exist_ok=True)
    runs, start = [], time.perf_counter()
    for task, seed in cells:
        out = folder / f"{task}-s{seed}.json"
        command = [sys.executable, "-m", "benchmarks.hf_cell", "--task", task, "--seed", str(seed), "--profile",
                   args.profile, "--precision", "bf16" if args.bf16 else "fp32", "--out", str(out),
                   "--output-dir", str(folder / f"{task}-s{seed}"), *(f"{k}={v}" for k, v in keys.items())]
        wall, (rss, pss) = timed(command, env, folder / "hf.log")
        runs.append({**json.loads(out.read_text()), "process_wall_s": wall, "peak_rss_mb": rss, "peak_pss_mb": pss})
    return {"wall_s": time.perf_counter() - start, "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
            "peak_pss_mb": max(r["peak_pss_mb"] for r in runs), "runs": runs}


def run(args: argparse.Namespace) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "BIOABLATE_WORK")}
    env.update(PYTHONPATH=str(REPO_ROOT), TOKENIZERS_PARALLELISM="false")
    if args.data_dir:
        env["BIOABLATE_DATA"] = str(args.data_dir)
    args.bf16 = args.precision == "bf16" or (args.precision == "auto" and bf16_native("cpu"))
    sizes = args.train_examples or [DEFAULT_TRAIN_EXAMPLES[args.profile]]
    out = {"machine": machine(), "profile": args.profile, "precision": "bf16" if args.bf16 else "fp32",
           "load_average_before": os.getloadavg(), "tables": []}
    for repeat in range(args.repeats):
        for size in sizes:
            keys = settings(args.profile, size)
            for k in args.runs_per_device:
                tag = f"r{repeat}-n{size}-k{k}"
                table = {"repeat": repeat, "train_examples": size, "settings": keys}
                table["ours"] = run_ours(args, env, keys, args.out / tag / "ours", k)
                cells = [(r["task"], r["seed"]) for r in table["ours"]["runs"]]
                if "hf" in args.sides and k == args.runs_per_device[0]:
                    table["hf"] = run_hf(args, env, keys, args.out / tag / "hf", cells)
                    table["ratio"] = table["hf"]["wall_s"] / table["ours"]["wall_s"]
                out["tables"].append(table)
    out["load_average_after"] = os.getloadavg()
    return out


def breakdown(ours: dict) -> dict[str, float]:
    """Seconds per part summed over the table's runs, and the table's time outside any run."""
    parts = {part: sum(r["seconds"].get(part, 0.0) for r in ours["runs"]) for part in PARTS}
    parts["outside runs (planning, table, exit)"] = ours["outside_runs_s"]
    return parts


def report(out: dict) -> str:
    lines = [f"# Table benchmark ({out['profile']}, {out['precision']})", "",
             f"Host: {out['machine']}; load average before {out['load_average_before'][0]:.1f}, after "
             f"{out['load_average_after'][0]:.1f}.", ""]
    for table in out["tables"]:
        ours = table["ours"]
        lines += [f"## {table['train_examples'] or 'profile'} training examples, --runs-per-device "
                  f"{ours['runs_per_device']} (repeat {table['repeat']})", ""]
        hf = {(r["task"], r["seed"]): r for r in table.get("hf", {}).get("runs", [])}
        lines += ["| cell | ours (s) | HF loop (s) | HF / ours | ours test | HF test |",
                  "|---|---:|---:|---:|---:|---:|"]
        for r in ours["runs"]:
            h = hf.get((r["task"], r["seed"]))
            hf_wall = h["process_wall_s"] if h else None
            lines.append(f"| {r['task']} s{r['seed']} | {r['seconds']['wall']:.1f} | "
                         + (f"{hf_wall:.1f} | {hf_wall / r['seconds']['wall']:.2f}x | " if h else "- | - | ")
                         + f"{r['test'] or 0:.3f} | " + (f"{h['test']:.3f} |" if h else "- |"))
        total = f"| table (one process) | {ours['wall_s']:.1f} | "
        lines.append(total + (f"{table['hf']['wall_s']:.1f} | {table['ratio']:.2f}x | | |" if "hf" in table
                              else "- | - | | |"))
        lines += ["", "Our time by part (summed over runs; system/time/* of each run's timing profile):", "",
                  "| part | seconds | share of table |", "|---|---:|---:|"]
        for part, seconds in breakdown(ours).items():
            lines.append(f"| {part} | {seconds:.1f} | {100 * seconds / ours['wall_s']:.0f}% |")
        caches = ", ".join(f"{r['task']} s{r['seed']} {r['tokenization_cache']} "
                           f"{r['seconds'].get('tokenization', 0):.1f} s" for r in ours["runs"])
        lines += ["", f"Tokenization per run (cache, time): {caches}.",
                  f"Peak RSS: ours {ours['peak_rss_mb']:.0f} MiB (whole process tree; "
                  f"PSS {ours['peak_pss_mb']:.0f} MiB)"
                  + (f"; HF {table['hf']['peak_rss_mb']:.0f} MiB (largest cell process; PSS "
                     f"{table['hf']['peak_pss_mb']:.0f} MiB)" if "hf" in table else "")
                  + ".", ""]
    return "\n".join(lines)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", choices=sorted(TABLE_SETTINGS), default="mini")
    parser.add_argument("--sides", nargs="+", choices=("ours", "hf"), default=["ours", "hf"])
    parser.add_argument("--seeds", type=COUNT, default=2)
    parser.add_argument("--train-examples", type=COUNT, nargs="+",
                        help="training examples per cell, one table each (default: mini 400, micro its own)")
    parser.add_argument("--runs-per-device", type=COUNT, nargs="+", default=[1],
                        help="ours at each (the HF loop runs once, beside the first)")
    parser.add_argument("--repeats", type=COUNT, default=1)
    parser.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto")
    parser.add_argument("--data-dir", type=Path, help="staged data (default: $BIOABLATE_DATA)")
    parser.add_argument("--out", type=folder_argument, required=True,
                        help="results.json, summary.md and the runs' folders")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    out = run(args)
    (args.out / "results.json").write_text(json.dumps(out, indent=1))
    summary = report(out)
    (args.out / "summary.md").write_text(summary)
    print(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

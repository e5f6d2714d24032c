"""How long a table's statistics take (issue 35): a 27-run table (3 NER tasks x 3 columns x 3 seeds), its
runs' test predictions built from the staged test sets (the gold spans, each found with a column's recall,
plus spurious mentions), logged to a real MLflow store; then `publish_runs` renders it with every statistic
(bootstrap CIs, per-seed and pooled permutation tests, agreement), first with an empty resampling cache and
then again from the cache.

    python -m benchmarks.table_statistics --data-dir ../shared/data [--max-test 250]

`--max-test N` keeps the first N test sentences of each task (250: the quick start's mini test sets; 0: whole
test sets). Prints one JSON line with the host's CPU.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

COLUMNS = {"bio": 0.80, "bioul": 0.78, "io": 0.83}  # recall of each column's predictions
TASKS = ("bc5-chem", "bc5-disease", "jnlpba")
SEEDS = (1, 2, 3)


def _records(instances, recall: float, rng: random.Random) -> list[dict]:
    out = []
    for x in instances:
        gold = [[s.start, s.end, s.label] for s in x.spans]
        pred = [g for g in gold if rng.random() < recall]
        if rng.random() < 0.1 and len(x.tokens) > 1:
            pred.append([0, 1, gold[0][2] if gold else "Entity"])
        out.append({"id": x.id, "gold": gold, "prediction": pred})
    return out


def main() -> None:
    from mlflow.tracking import MlflowClient

    from ablations.results import FINISHED, CellRun, TableLayout
    from ablations.tables.publish import publish_runs
    from ablations.tables.scored_units import units_from_records
    from bioablate_core.hardware import machine
    from datamodules.registry import get_dataset

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--max-test", type=int, default=250)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="table-statistics-"))
    uri = f"sqlite:///{work / 'mlruns.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("bench", artifact_location=str(work / "artifacts"))
    rng, runs, sizes = random.Random(0), [], {}
    for task in TASKS:
        test = get_dataset(task).read(Path(args.data_dir))["test"]
        test = test[:args.max_test] if args.max_test else test
        sizes[task] = len(test)
        for column, recall in COLUMNS.items():
            for seed in SEEDS:
                records = _records(test, recall, rng)
                value = units_from_records(get_dataset(task), records).score(range(len(records)))
                run = client.create_run(experiment)
                path = work / run.info.run_id / "test_predictions.jsonl"
                path.parent.mkdir()
                path.write_text("".join(json.dumps(r) + "\n" for r in records))
                client.log_artifact(run.info.run_id, str(path))
                client.set_terminated(run.info.run_id)
                runs.append(CellRun(task, column, task, seed, FINISHED, value, run_id=run.info.run_id))
    layout = TableLayout(title="bench", rows="task", columns="tagging", baseline="bio",
                         column_order=tuple(COLUMNS), paper={"bc5-chem": {"bio": 93.33, "bioul": 93.37, "io": 93.11}})
    seconds, cpu = [], []
    for _ in range(2):  # empty cache, then cached
        start, start_cpu = time.perf_counter(), _cpu_seconds()
        publish_runs("bench", layout, runs, uri, work / "table", work / "mlartifacts", cache_dir=work / "cache")
        seconds.append(time.perf_counter() - start)
        cpu.append(_cpu_seconds() - start_cpu)
    print(json.dumps({"runs": len(runs), "test_sentences": sizes, "render_s_uncached": round(seconds[0], 1),
                      "render_s_cached": round(seconds[1], 1), "cpu_s_uncached": round(cpu[0], 1),
                      "cpu_s_cached": round(cpu[1], 1), "host": machine()}))


def _cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (the forked resampling workers): on a shared
    machine, what the work costs, whatever else runs."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


if __name__ == "__main__":
    main()

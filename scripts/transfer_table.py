"""The transfer table of docs/results/findings.md: which of the paper's ablation conclusions (Tables 9, 12, 13,
14) hold in each cheaper setting, read from the rendered tables' CSVs (ablations/tables/transfer.py says how
each verdict follows from a table's own marks).

    python scripts/transfer_table.py            # prints the markdown table
    python scripts/transfer_table.py --check docs/results/findings.md   # exit 1 if findings.md lacks it

Settings and their tables (a table not rendered yet says "not run"; a table a setting cannot run, "does not
apply": Table 9 compares pretraining, which a shipped MiniLM does not vary; Tables 12 and 14 were not run on
the `mini`-pretrained model):
- `mini` from scratch: the 4-layer BERTs pretrained by bioablate at `mini` (table9_proxy-mini, table13_tagging-mini);
- MiniLM at `mini`: the shipped MiniLM-L6, fine-tuned at the same 2-core budget (table1*_minilm-mini).
The paper's differences come from the packaged experiments' `table.paper` (Table 9's from table9_corpora_time,
whose paper numbers include the BLURB score its conclusions are about).

A cell that did not learn (at its floor, or collapsed) is left out of every comparison. A table rendered before
cells carried their state has its tasks' floors in docs/results/floors.json, computed from the staged data on the
test units its runs scored (`--write-floors`; a cell whose interval does not clear its floor is left out).

    python scripts/transfer_table.py --write-floors --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from ablations.tables.transfer import markdown

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
PAPER_EXPERIMENTS = {"Table 9": "table9_corpora_time", "Table 12": "table12_heads", "Table 13": "table13_tagging",
                     "Table 14": "table14_relation"}
SETTINGS = {
    "`mini` from scratch": {"Table 9": "table9_proxy-mini", "Table 13": "table13_tagging-mini",
                            "Table 12": "table12_heads-mini", "Table 14": "table14_relation-mini"},
    "all-MiniLM-L6-v2 at `mini`": {"Table 12": "table12_heads_minilm-mini", "Table 13": "table13_tagging_minilm-mini",
                         "Table 14": "table14_relation_minilm-mini"},
}


def settings(results: Path = RESULTS) -> dict[str, dict[str, Path]]:
    return {name: {table: results / folder / "table.csv" for table, folder in tables.items()}
            for name, tables in SETTINGS.items()}


FLOORS = RESULTS / "floors.json"
EXPERIMENTS = {folder: folder.rsplit("-", 1)[0] for tables in SETTINGS.values() for folder in tables.values()}


def floors() -> dict[str, dict[str, float]]:
    return json.loads(FLOORS.read_text()) if FLOORS.is_file() else {}


def write_floors(data_dir: str) -> dict[str, dict[str, float]]:
    """Per rendered table whose CSV has no `cell_state`: each task's floor (x100, datamodules.floors) on the test
    units its runs scored (the experiment's `finetune.max_eval_examples` under `mini`), and the BLURB score of
    those floors."""
    from ablations.experiment import load_experiment
    from datamodules.finetune_data import subsample
    from datamodules.floors import floor_of
    from datamodules.metrics import blurb_score
    from datamodules.registry import get_dataset
    from datamodules.split_checks import read_checked
    from datamodules.task_kinds import make_encoder
    from lightning_modules.models import RANDOM_BERT

    out = {}
    for folder, name in sorted(EXPERIMENTS.items()):
        path = RESULTS / folder / "table.csv"
        if not path.is_file() or "cell_state" in path.read_text().splitlines()[0].split(","):
            continue
        experiment = load_experiment(name, profile="mini", data_dir=data_dir)
        caps = {cell.task: experiment.finetune_config(cell, RANDOM_BERT).finetune.max_eval_examples
                for cell in experiment.cells()}
        found = {}
        for task, cap in sorted(caps.items()):
            spec = get_dataset(task)
            encoder = make_encoder(spec, None, 128)
            test = subsample(read_checked(spec, Path(data_dir), warn=False)["test"], cap, encoder.group_by)
            found[task] = round(100 * floor_of(encoder, test).score, 4)
        if experiment.layout.blurb_row:
            found["BLURB score"] = round(blurb_score(found, {t: get_dataset(t).task_type for t in found})["score"], 4)
        out[folder] = found
    FLOORS.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return out


def paper_numbers() -> dict[str, dict]:
    return {table: yaml.safe_load((ROOT / "experiments" / f"{name}.yaml").read_text())["table"]["paper"]
            for table, name in PAPER_EXPERIMENTS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", type=Path, help="a markdown file that must contain the table as printed")
    parser.add_argument("--write-floors", action="store_true",
                        help=f"compute the floors of the tables rendered without cell states into {FLOORS.name}")
    parser.add_argument("--data-dir", help="the staged datasets (for --write-floors; default $BIOABLATE_DATA)")
    args = parser.parse_args(argv)
    if args.write_floors:
        import os

        write_floors(args.data_dir or os.environ["BIOABLATE_DATA"])
    table = markdown(settings(), paper_numbers(), floors=floors())
    if args.check is not None:
        if table not in args.check.read_text():
            print(f"{args.check}: the transfer table is not the one the rendered tables give; paste:\n{table}",
                  file=sys.stderr)
            return 1
        return 0
    print(table, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

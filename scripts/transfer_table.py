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
"""

from __future__ import annotations

import argparse
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
    "MiniLM at `mini`": {"Table 12": "table12_heads_minilm-mini", "Table 13": "table13_tagging_minilm-mini",
                         "Table 14": "table14_relation_minilm-mini"},
}


def settings(results: Path = RESULTS) -> dict[str, dict[str, Path]]:
    return {name: {table: results / folder / "table.csv" for table, folder in tables.items()}
            for name, tables in SETTINGS.items()}


def paper_numbers() -> dict[str, dict]:
    return {table: yaml.safe_load((ROOT / "experiments" / f"{name}.yaml").read_text())["table"]["paper"]
            for table, name in PAPER_EXPERIMENTS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", type=Path, help="a markdown file that must contain the table as printed")
    args = parser.parse_args(argv)
    table = markdown(settings(), paper_numbers())
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

"""The `bioablate` command line.

    bioablate finetune --task bc5-chem --model random-bert --profile micro [key=value ...]
    bioablate data stats [--task NAME ...]
    bioablate list tasks|models

User mistakes (`BioablateError`) print one line and exit 2; a run that fails exits 1 after marking its
MLflow run FAILED.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from pathlib import Path

from datamodules.errors import BioablateError

EXIT_USER_ERROR = 2


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", help="folder with the staged datasets (default: $BIOABLATE_DATA)")


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    _add_common(parser)
    parser.add_argument("--profile", default="micro", help="micro | mini | base (default: micro)")
    parser.add_argument("--work-dir", help="outputs, checkpoints, caches (default: $BIOABLATE_WORK or ./work)")
    parser.add_argument("--tracking-uri",
                        help="MLflow tracking URI (default: sqlite:///<work-dir>/mlruns.db)")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="config overrides, e.g. finetune.lr=3e-5 finetune.epochs=5")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bioablate", description="Ablation studies of biomedical language models (BLURB).")
    parser.add_argument("-v", "--verbose", action="store_true", help="show library logs and warnings")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    ft = sub.add_parser("finetune", help="fine-tune an encoder on one BLURB dataset, logged to MLflow")
    ft.add_argument("--task", required=True, help="dataset name, e.g. bc5-chem (see `bioablate list tasks`)")
    ft.add_argument("--model", help="Hugging Face-format directory, or a named model (see `bioablate list models`)")
    ft.add_argument("--seed", type=int)
    ft.add_argument("--force", action="store_true", help="rerun even if an identical run already finished")
    ft.add_argument("--datasets", action="append", metavar="YAML",
                    help="register a user dataset from YAML (repeatable; see datamodules/custom.py)")
    _add_run_options(ft)

    data = sub.add_parser("data", help="dataset utilities")
    data_sub = data.add_subparsers(dest="data_command", required=True, metavar="SUBCOMMAND")
    stats = data_sub.add_parser("stats", help="counts per dataset and split beside the paper's Table 3")
    stats.add_argument("--task", action="append", help="only this dataset (repeatable)")
    _add_common(stats)

    lst = sub.add_parser("list", help="list registered names")
    lst.add_argument("what", choices=["tasks", "models"])
    _add_common(lst)
    return parser


def _quiet_libraries() -> None:
    """Keep the terminal for our progress and results: Lightning's banner lines and library warnings
    are noise for a user running experiments (`-v` brings them back). The libraries set their own
    levels when imported, so import them first."""
    import mlflow  # noqa: F401
    import pytorch_lightning  # noqa: F401

    for name in ("pytorch_lightning", "lightning", "lightning.pytorch", "lightning_fabric", "mlflow",
                 "alembic", "transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def cmd_finetune(args: argparse.Namespace) -> int:
    from ablations.config import build_config
    from ablations.finetune import run_finetune

    cfg = build_config(args.profile, args.overrides, task=args.task, seed=args.seed,
                       data_dir=args.data_dir, work_dir=args.work_dir, tracking_uri=args.tracking_uri,
                       **{"model.name_or_path": args.model,
                          "datasets": f"[{','.join(args.datasets)}]" if args.datasets else None})
    result = run_finetune(cfg, force=args.force)
    state = "reused finished run" if result.reused else "finished"
    print(f"{cfg.task}: {state} {result.run_id} (fingerprint {result.fingerprint})")
    print("  best dev: " + ", ".join(f"{k}={v:.4f}" for k, v in sorted(result.best_dev.items())
                                     if k in ("score", "f1", "precision", "recall")))
    print("  test:     " + ", ".join(f"{k}={v:.4f}" for k, v in sorted(result.test.items())
                                     if k in ("score", "f1", "precision", "recall")))
    print(f"  MLflow: {result.tracking_uri}  (browse: mlflow ui --backend-store-uri {result.tracking_uri})")
    return 0


def cmd_data_stats(args: argparse.Namespace) -> int:
    from ablations.config import resolve_data_dir
    from datamodules.registry import check_data_dir, dataset_names, get_dataset
    from datamodules.stats import dataset_stats, render

    data_dir = resolve_data_dir(args.data_dir)
    names = args.task or dataset_names()
    for name in names:
        get_dataset(name)  # an unknown name fails before any reading
    check_data_dir(data_dir, names)
    rows, notes = [], {}
    for name in names:
        spec = get_dataset(name)
        rows += dataset_stats(spec, data_dir)
        notes[name] = spec.notes
    print(render(rows, notes))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    if args.what == "tasks":
        from datamodules.registry import dataset_names, get_dataset

        for name in dataset_names():
            spec = get_dataset(name)
            print(f"{name:<14} {spec.task_type:<15} {spec.metric:<20} max_length={spec.max_length}")
    else:
        from lightning_modules.models import known_models

        print("\n".join(known_models()) + "\n(or any Hugging Face-format model directory)")
    return 0


COMMANDS = {"finetune": cmd_finetune, "list": cmd_list, ("data", "stats"): cmd_data_stats}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not args.verbose:
        _quiet_libraries()
    key = (args.command, args.data_command) if args.command == "data" else args.command
    try:
        return COMMANDS[key](args)
    except BioablateError as error:
        print(f"bioablate: error: {error}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("bioablate: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""The `bioablate` command line.

    bioablate finetune --task bc5-chem --model random-bert --profile micro [key=value ...]
    bioablate data stats [--task NAME ...]
    bioablate data fetch [--to DIR] [--only NAME ...] [--mirror URL] [--jobs N]
    bioablate list tasks|models|variants|corpora
    bioablate table EXPERIMENT.yaml [--format markdown|latex|csv] [--out DIR] [--zero-based]

User mistakes (`BioablateError`) print one line and exit 2; a run that fails exits 1 after marking its
MLflow run FAILED. SIGINT (Ctrl-C) and SIGTERM mark the run KILLED and exit 130 and 143 (128 + the
signal, `core.interrupts`); `bioablate run` stops at the first one. A run another live process is working
on is waited for (one "waiting for ..." line), then reused; with `--no-wait` the command prints who holds
it and exits 75 (EX_TEMPFAIL: try again later).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from core.claims import ClaimHeld
from core.console import quiet_libraries
from core.errors import BioablateError
from core.interrupts import Interrupted, handling_interrupts

EXIT_USER_ERROR = 2
EXIT_CLAIM_HELD = 75  # EX_TEMPFAIL: another live process holds the run (--no-wait)


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", help="folder with the staged datasets (default: $BIOABLATE_DATA)")


def _add_no_wait(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-wait", dest="wait", action="store_false",
                        help="if another live process is running the same run, say who and exit 75 "
                             "(default: wait for it, then reuse its result)")


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    """What every command that trains takes: profile, seed, where things go, --force, overrides."""
    _add_common(parser)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--force", action="store_true", help="rerun even if an identical run already finished")
    _add_no_wait(parser)
    parser.add_argument("--profile", default="micro", help="micro | mini | base (default: micro)")
    parser.add_argument("--work-dir", help="outputs, checkpoints, caches (default: $BIOABLATE_WORK or ./outputs)")
    parser.add_argument("--tracking-uri",
                        help="MLflow tracking URI (default: sqlite:///<work-dir>/mlruns.db)")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="config overrides, e.g. finetune.lr=3e-5 finetune.epochs=5")


def _finetune_command(sub) -> None:
    ft = sub.add_parser("finetune", help="fine-tune an encoder on one BLURB dataset, logged to MLflow")
    ft.add_argument("--task", help="dataset name, e.g. bc5-chem (see `bioablate list tasks`); required unless "
                                   "a --config file sets `task`")
    ft.add_argument("--config", action="append", default=[], metavar="YAML",
                    help="a YAML layer of config keys, applied after the profile and before key=value "
                         "overrides (repeatable; e.g. the file `bioablate sweep best` writes)")
    ft.add_argument("--model", help="Hugging Face-format directory, or a named model (see `bioablate list models`)")
    ft.add_argument("--datasets", action="append", metavar="YAML",
                    help="register a user dataset from YAML (repeatable; see datamodules/custom.py)")
    _add_run_options(ft)


def _command_group(sub, name: str, help: str):
    """A command with subcommands of its own (`bioablate data stats`): their parsers are added to this."""
    group = sub.add_parser(name, help=help)
    return group.add_subparsers(dest=f"{name}_command", required=True, metavar="SUBCOMMAND")


def _data_command(sub) -> None:
    data_sub = _command_group(sub, "data", "dataset utilities")
    stats = data_sub.add_parser("stats", help="counts per dataset and split beside the paper's Table 3")
    stats.add_argument("--task", action="append", help="only this dataset (repeatable)")
    stats.add_argument("--tagging", choices=["bio", "bioul", "io"],
                       help="io: also count the gold mentions IO tagging would merge with a neighbour")
    _add_common(stats)
    fetch = data_sub.add_parser("fetch", help="download the BLURB datasets and vocabularies from their pinned "
                                "public origins, verify them, then print `data stats` of the folder")
    fetch.add_argument("--to", metavar="DIR", help="folder to fill (default: the user data folder, "
                       "~/.local/share/bioablate/data on Linux, which --data-dir/BIOABLATE_DATA default to)")
    fetch.add_argument("--only", action="append", metavar="NAME",
                       help="only this dataset, or 'vocab' (repeatable; default: everything)")
    fetch.add_argument("--mirror", metavar="URL", help="fetch from URL instead of https://raw.githubusercontent.com "
                       "(same <owner>/<repo>/<commit>/<path> layout below it)")
    fetch.add_argument("--jobs", type=int, default=8, help="parallel downloads (default: 8)")


def _pretrain_command(sub) -> None:
    pt = sub.add_parser("pretrain", help="pretrain an encoder (BERT / ALBERT / ELECTRA) into a Hugging Face directory")
    pt.add_argument("--corpus", help="a corpus name (bioablate list corpora) or a corpus YAML; a+b mixes, "
                                     "a>b continues (e.g. general>pubmed)")
    pt.add_argument("--vocab", help="staged vocabulary, vocab.txt path, train:SIZE[:cased], or init")
    pt.add_argument("--masking", help="wwm | wordpiece")
    pt.add_argument("--objective", help="bert | albert | electra")
    pt.add_argument("--adversarial", action="store_true", default=None, help="ALUM adversarial pretraining")
    pt.add_argument("--init", help="scratch, or a checkpoint (HF directory / named model) to continue from")
    pt.add_argument("--devices", help="Lightning devices (e.g. 2)")
    pt.add_argument("--num-nodes", type=int)
    pt.add_argument("--strategy", help="Lightning strategy (e.g. ddp)")
    pt.add_argument("--dry-run", action="store_true",
                    help="print the corpus size, steps, tokens seen and passes over the corpus; build nothing")
    _add_run_options(pt)


def _vocab_command(sub) -> None:
    voc_sub = _command_group(sub, "vocab", "vocabulary utilities")
    vt = voc_sub.add_parser("train", help="train a WordPiece vocabulary on a pretraining corpus")
    vt.add_argument("--corpus", default="pubmed", help="a corpus name (`bioablate list corpora`) or YAML path")
    vt.add_argument("--size", type=int, default=30000)
    vt.add_argument("--cased", action="store_true")
    vt.add_argument("--max-words", type=int)
    vt.add_argument("--min-words", type=int, default=128)
    vt.add_argument("--out", required=True, help="output folder (vocab.txt is written there)")
    _add_common(vt)
    vc = voc_sub.add_parser("compare", help="the paper's Table 1 (term splits) and Table 8 (input lengths)")
    vc.add_argument("--vocab", action="append",
                    help="vocabularies for Table 1 (repeatable; default: the three staged ones)")
    vc.add_argument("--general", default="bert-base-uncased", help="general-domain vocabulary for Table 8")
    vc.add_argument("--domain", default="pubmedbert-uncased", help="in-domain vocabulary for Table 8")
    vc.add_argument("--task", action="append", help="Table 8 for this dataset only (repeatable)")
    vc.add_argument("--no-table8", action="store_true", help="only Table 1")
    vc.add_argument("--format", default="markdown", help="markdown | latex | csv (default: markdown)")
    _add_common(vc)


def _list_command(sub) -> None:
    lst = sub.add_parser("list", help="list registered names")
    lst.add_argument("what", choices=["tasks", "models", "variants", "corpora"])
    _add_common(lst)


def _sweep_command(sub) -> None:
    sw = sub.add_parser(
        "sweep", help="Optuna hyperparameter sweep from a YAML (see docs/sweeps.md); `sweep best STUDY` "
                      "exports the best configuration")
    sw.add_argument("target", metavar="SWEEP.yaml|best", help="a sweep YAML, or `best` to export a study's best")
    sw.add_argument("rest", nargs="*", metavar="key=value|STUDY",
                    help="config overrides for every trial; after `best`: the study name")
    sw.add_argument("--storage", help="Optuna storage URL (default: $BIOABLATE_SWEEP_STORAGE, else "
                                      "sqlite:///<work-dir>/optuna.db); PostgreSQL/MySQL for several workers")
    sw.add_argument("--n-trials", type=int, help="finished trials the study should have (default: the YAML's)")
    sw.add_argument("--workers", type=int, default=1,
                    help="local worker processes sharing the study (default 1; >1 needs a server database)")
    sw.add_argument("--worker-index", type=int, default=0,
                    help="offset added to the sampler seed: give each machine sharing a study its own")
    sw.add_argument("--task", help="dataset, overriding the YAML's `task`")
    sw.add_argument("--study", help="study name (default: the YAML's `study`, else <yaml name>-<task>)")
    sw.add_argument("--output", help="`best` only: write the YAML here (default: <work-dir>/sweeps/<study>.yaml)")
    sw.add_argument("--work-dir", help="outputs, checkpoints, caches (default: $BIOABLATE_WORK or ./outputs)")
    sw.add_argument("--tracking-uri", help="MLflow tracking URI (default: sqlite:///<work-dir>/mlruns.db)")
    _add_common(sw)


def _run_command(sub) -> None:
    rn = sub.add_parser("run", help="run an experiment YAML (one per paper table): pretraining stages, "
                                    "fine-tuning runs, then its table; finished runs are reused")
    rn.add_argument("experiment", metavar="EXPERIMENT.yaml", help="e.g. experiments/quickstart.yaml")
    rn.add_argument("--profile", help="micro | mini | base (default: the experiment's)")
    rn.add_argument("--devices", type=int, default=1,
                    help="runs at a time, one per device (GPUs; on CPU the cores are split); with --ddp: "
                         "devices per run (default 1)")
    rn.add_argument("--ddp", action="store_true", help="give each run --devices devices (DDP) instead")
    rn.add_argument("--dry-run", action="store_true", help="print the plan (what would be computed or reused)")
    _add_no_wait(rn)
    rn.add_argument("--work-dir", help="outputs, checkpoints, caches (default: $BIOABLATE_WORK or ./outputs)")
    rn.add_argument("--tracking-uri", help="MLflow tracking URI (default: sqlite:///<work-dir>/mlruns.db)")
    rn.add_argument("overrides", nargs="*", metavar="key=value",
                    help="config overrides for every run, e.g. finetune.epochs=5")
    _add_common(rn)


def _table_command(sub) -> None:
    tb = sub.add_parser("table", help="render an experiment's table from the runs in the tracking store "
                                      "(markdown / LaTeX / CSV and a plot; runs nothing)")
    tb.add_argument("experiment", metavar="EXPERIMENT.yaml", help="e.g. experiments/table13_tagging.yaml")
    tb.add_argument("--format", default="markdown", help="markdown | latex | csv (default: markdown)")
    tb.add_argument("--out", help="write table.md/.tex/.csv and the figure (.png/.svg/.pdf) here "
                                  "(default: <work-dir>/tables/<experiment>/)")
    tb.add_argument("--zero-based", action="store_true",
                    help="start the figure's y axis at 0 (default: it spans the data, min to max)")
    tb.add_argument("--profile", help="micro | mini | base (default: the experiment's)")
    tb.add_argument("--work-dir", help="where the runs went (default: $BIOABLATE_WORK or ./outputs)")
    tb.add_argument("--tracking-uri", help="MLflow tracking URI (default: sqlite:///<work-dir>/mlruns.db)")
    tb.add_argument("overrides", nargs="*", metavar="key=value", help="overrides the experiment ran with")
    _add_common(tb)


def _ui_command(sub) -> None:
    ui = sub.add_parser("ui", help="MLflow UI over the work directory's store (loopback only by default)")
    ui.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ui.add_argument("--port", type=int, default=5000, help="port (default 5000)")
    ui.add_argument("--allow-remote", action="store_true",
                    help="allow a non-loopback --host (the UI has no authentication)")
    ui.add_argument("--work-dir", help="work directory whose store to show (default: $BIOABLATE_WORK or ./outputs)")
    ui.add_argument("--tracking-uri", help="MLflow store to show (default: sqlite:///<work-dir>/mlruns.db)")
    ui.add_argument("--storage", help="Optuna storage, for the optuna-dashboard hint")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bioablate", description="Ablation studies of biomedical language models (BLURB).")
    parser.add_argument("-v", "--verbose", action="store_true", help="show library logs and warnings")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _finetune_command(sub)
    _data_command(sub)
    _pretrain_command(sub)
    _vocab_command(sub)
    _list_command(sub)
    _sweep_command(sub)
    _run_command(sub)
    _table_command(sub)
    _ui_command(sub)
    return parser


def cmd_finetune(args: argparse.Namespace) -> int:
    from ablations.config import build_config
    from ablations.finetune import run_finetune

    from core.errors import ConfigError

    if args.task is None and not args.config:
        raise ConfigError("--task is required (or a --config file that sets `task`)")
    cfg = build_config(args.profile, args.overrides, config_files=args.config, task=args.task, seed=args.seed,
                       data_dir=args.data_dir, work_dir=args.work_dir, tracking_uri=args.tracking_uri,
                       **{"model.name_or_path": args.model,
                          "datasets": f"[{','.join(args.datasets)}]" if args.datasets else None})
    result = run_finetune(cfg, force=args.force, wait=args.wait)
    if result.run_id is None:  # a DDP worker process: rank 0 reports
        return 0
    state = "reused finished run" if result.reused else "finished"
    print(f"{cfg.task}: {state} {result.run_id} (fingerprint {result.fingerprint})")
    print("  best dev: " + ", ".join(f"{k}={v:.4f}" for k, v in sorted(result.best_dev.items())
                                     if k in ("score", "f1", "precision", "recall")))
    print("  test:     " + ", ".join(f"{k}={v:.4f}" for k, v in sorted(result.test.items())
                                     if k in ("score", "f1", "precision", "recall")))
    print(f"  MLflow: {result.tracking_uri}  (browse: bioablate ui --tracking-uri {result.tracking_uri})")
    return 0


def cmd_data_stats(args: argparse.Namespace) -> int:
    from ablations.config import resolve_data_dir
    from datamodules.registry import dataset_names, get_dataset

    data_dir = resolve_data_dir(args.data_dir)
    names = args.task or dataset_names()
    for name in names:
        get_dataset(name)  # an unknown name fails before any reading
    _print_stats(data_dir, names, args.tagging)
    return 0


def _print_stats(data_dir: Path, names: list[str], tagging: str | None) -> None:
    from datamodules.registry import check_data_dir, get_dataset
    from datamodules.stats import dataset_stats, render

    check_data_dir(data_dir, names)
    rows, notes = [], {}
    for name in names:
        spec = get_dataset(name)
        rows += dataset_stats(spec, data_dir, tagging)
        notes[name] = spec.notes
    print(render(rows, notes))


def cmd_data_fetch(args: argparse.Namespace) -> int:
    """Stats go to stdout, progress and the summary to stderr: stdout equals `data stats` of the folder."""
    from datamodules.fetch import fetch_data, summary

    result = fetch_data(Path(args.to) if args.to else None, args.only, args.mirror, args.jobs,
                        show_progress=sys.stderr.isatty())
    print(summary(result), file=sys.stderr)
    names = [name for name in result.groups if name != "vocab"]
    if names:
        _print_stats(result.data_dir, names, None)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    if args.what == "tasks":
        from datamodules.registry import dataset_names, get_dataset

        for name in dataset_names():
            spec = get_dataset(name)
            print(f"{name:<14} {spec.task_type:<15} {spec.metric:<20} max_length={spec.max_length}")
    elif args.what == "variants":
        from ablations.variants import describe

        print(describe())
    elif args.what == "corpora":
        from datamodules.pretrain.corpora import corpus_names, resolve_corpus

        for name in corpus_names():
            spec = resolve_corpus(name)
            formats = ", ".join(dict.fromkeys(part.format for part in spec.parts))
            print(f"{name:<10} {spec.description}  [{formats}]  {spec.path}")
        print("(or the path of a corpus YAML; mixtures a+b, sequences a>b; see docs/pretraining.md)")
    else:
        from lightning_modules.models import known_models

        print("\n".join(known_models()) + "\n(or any Hugging Face-format model directory)")
    return 0


def cmd_pretrain(args: argparse.Namespace) -> int:
    from ablations.config import build_config
    from ablations.pretrain import EXPERIMENT, dry_run, run_pretrain

    overrides = list(args.overrides)
    if not any(o.startswith("experiment_name=") for o in overrides):
        overrides.insert(0, f"experiment_name={EXPERIMENT}")
    cfg = build_config(args.profile, overrides, task="pretrain", seed=args.seed, data_dir=args.data_dir,
                       work_dir=args.work_dir, tracking_uri=args.tracking_uri,
                       **{"pretrain.corpus": args.corpus, "pretrain.vocab": args.vocab,
                          "pretrain.masking": args.masking, "pretrain.objective": args.objective,
                          "pretrain.adversarial": args.adversarial, "pretrain.init": args.init,
                          "trainer.devices": args.devices, "trainer.num_nodes": args.num_nodes,
                          "trainer.strategy": args.strategy})
    if args.dry_run:
        print("\n".join(dry_run(cfg)))
        return 0
    result = run_pretrain(cfg, force=args.force, wait=args.wait)
    if result.run_id is None:  # a DDP worker process: rank 0 reports
        return 0
    state = "reused finished run" if result.reused else "finished"
    print(f"pretrain: {state} {result.run_id} (fingerprint {result.fingerprint})")
    if result.losses:
        print(f"  {'loss' if cfg.pretrain.objective == 'electra' else 'MLM loss'}: "
              f"{result.losses[0]:.3f} -> {result.losses[-1]:.3f}")
    print(f"  model: {result.model_dir}  (bioablate finetune --model {result.model_dir} --task ...)")
    print(f"  MLflow: {result.tracking_uri}")
    return 0


def cmd_vocab_train(args: argparse.Namespace) -> int:
    from ablations.config import resolve_data_dir
    from datamodules.pretrain.corpora import evaluation_pmids, load_corpus
    from datamodules.pretrain.vocab import train_wordpiece

    data_dir = resolve_data_dir(args.data_dir)
    corpus = load_corpus(args.corpus, data_dir, max_words=args.max_words, min_words=args.min_words,
                         exclude_pmids=evaluation_pmids(data_dir))
    path = train_wordpiece(corpus.sentences(), args.size, not args.cased, Path(args.out))  # one streamed pass
    print(f"{path}: {sum(1 for _ in open(path, encoding='utf-8'))} entries from {corpus.stats.words} words "
          f"of {args.corpus}")
    return 0


def cmd_vocab_compare(args: argparse.Namespace) -> int:
    from ablations.config import resolve_data_dir
    from ablations.tables import FORMATS, render_grid, table1_grid, table8_grid
    from ablations.vocab_compare import table1, table8
    from core.errors import UnknownNameError
    from datamodules.registry import dataset_names, get_dataset

    if args.format not in FORMATS:  # before computing anything
        raise UnknownNameError("table format", args.format, FORMATS)
    data_dir = resolve_data_dir(args.data_dir)
    vocabs = args.vocab or ["bert-base-uncased", "scibert-scivocab-uncased", "pubmedbert-uncased"]
    print(render_grid(table1_grid(table1(vocabs, data_dir)), args.format), end="")
    if not args.no_table8:
        names = args.task or dataset_names()
        for name in names:
            get_dataset(name)
        print()
        print(render_grid(table8_grid(table8(args.general, args.domain, data_dir, names), args.general, args.domain),
                          args.format), end="")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from ablations.config import resolve_work_dir
    from ablations.sweep import (STORAGE_ENV, Place, SweepPaths, best_command, best_config, default_storage,
                                 finetune_command, load_sweep, run_sweep, ui_command)
    from core.errors import ConfigError

    if args.target == "best":
        work_dir = resolve_work_dir() if args.work_dir is None else Path(args.work_dir).expanduser().resolve()
        place = Place(str(work_dir), args.storage, args.data_dir, args.tracking_uri)
        if len(args.rest) != 1:
            raise ConfigError("usage: bioablate sweep best STUDY [--work-dir DIR] [--storage URL] [--output FILE]")
        storage = args.storage or os.environ.get(STORAGE_ENV) or default_storage(work_dir)
        best = best_config(args.rest[0], storage)
        out = Path(args.output).resolve() if args.output else work_dir / "sweeps" / f"{args.rest[0]}.yaml"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(best.text)
        print(best.text, end="")
        print(f"# written to {out}")
        print(f"# rerun it: {finetune_command(out, best.profile, best.seeds[0], place)}")
        return 0
    spec = load_sweep(args.target, task=args.task, overrides=args.rest, n_trials=args.n_trials,
                      study=args.study)
    summary = run_sweep(spec, args.storage, args.workers, args.worker_index,
                        SweepPaths(args.data_dir, args.work_dir, args.tracking_uri), verbose=args.verbose)
    counts = ", ".join(f"{n} {state.lower()}" for state, n in sorted(summary.counts.items()))
    print(f"study '{summary.study}' ({summary.storage}): {counts or 'no trials'}; "
          f"target {summary.n_trials} finished")
    if summary.best_value is not None:
        print(f"  best {spec.metric}: {summary.best_value:.4f} with "
              + ", ".join(f"{k}={v}" for k, v in summary.best_params.items()))
    place = Place(summary.work_dir, args.storage, args.data_dir, args.tracking_uri)
    print(f"  MLflow parent run {summary.parent_run_id} in {summary.tracking_uri}")
    print(f"  browse: {ui_command(place)}")
    print(f"  export the best: {best_command(summary.study, place)}")
    failed_workers = [code for code in summary.worker_exit_codes if code != 0]
    return 0 if summary.complete and not failed_workers else 1


def cmd_run(args: argparse.Namespace) -> int:
    from ablations.experiment import load_experiment, plan_lines
    from ablations.runner import run_experiment
    from core.distributed import is_ddp_worker
    from core.errors import ConfigError

    if args.devices < 1:
        raise ConfigError(f"--devices must be at least 1 (got {args.devices})")
    overrides = list(args.overrides)
    if args.ddp:
        overrides += [f"trainer.devices={args.devices}", "trainer.strategy=ddp"]
    experiment = load_experiment(args.experiment, profile=args.profile, overrides=overrides,
                                 data_dir=args.data_dir, work_dir=args.work_dir, tracking_uri=args.tracking_uri)
    if args.dry_run:
        print("\n".join(plan_lines(experiment)))
        return 0
    summary = run_experiment(experiment, devices=args.devices, ddp=args.ddp, wait=args.wait)
    if is_ddp_worker():  # a process Lightning started for another rank: rank 0 reports
        return 0
    print("\n".join(summary.lines()))
    print()
    print(render_table(experiment, summary.tracking_uri), end="")
    print(f"MLflow: {summary.tracking_uri} (bioablate ui --tracking-uri {summary.tracking_uri}); "
          f"parent run {summary.parent_run_id}")
    return 0 if summary.ok else 1


def render_table(experiment, tracking_uri: str) -> str:
    """The experiment's table as markdown (also written to <work-dir>/tables/<name>/ and logged)."""
    from ablations.tables import render_experiment

    return render_experiment(experiment, tracking_uri, fmt="markdown")


def cmd_table(args: argparse.Namespace) -> int:
    from ablations.experiment import load_experiment
    from ablations.tables import FORMATS, render_experiment
    from core.errors import UnknownNameError

    if args.format not in FORMATS:  # before loading anything
        raise UnknownNameError("table format", args.format, FORMATS)
    experiment = load_experiment(args.experiment, profile=args.profile, overrides=args.overrides,
                                 data_dir=args.data_dir, work_dir=args.work_dir, tracking_uri=args.tracking_uri)
    work_dir, tracking_uri = experiment.store()
    out = Path(args.out) if args.out else work_dir / "tables" / experiment.name
    print(render_experiment(experiment, tracking_uri, args.format, out, zero_based=args.zero_based), end="")
    print(f"written to {out}/ (table.md, .tex, .csv; figure .png, .svg, .pdf); MLflow: {tracking_uri}, "
          "experiment 'tables'",
          file=sys.stderr)  # stderr: stdout is the table alone (`--format csv > t.csv`)
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    from ablations.ui import serve

    serve(args.host, args.port, args.allow_remote, args.work_dir, args.tracking_uri, args.storage)
    return 0


COMMANDS = {"finetune": cmd_finetune, "list": cmd_list, ("data", "stats"): cmd_data_stats,
            ("data", "fetch"): cmd_data_fetch,
            "pretrain": cmd_pretrain, ("vocab", "train"): cmd_vocab_train,
            ("vocab", "compare"): cmd_vocab_compare,
            "sweep": cmd_sweep, "ui": cmd_ui, "table": cmd_table, "run": cmd_run}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not args.verbose:
        quiet_libraries()
    key = (args.command, args.data_command) if args.command == "data" else args.command
    if args.command == "vocab":
        key = ("vocab", args.vocab_command)
    try:
        with handling_interrupts():
            return COMMANDS[key](args)
    except BioablateError as error:
        print(f"bioablate: error: {error}", file=sys.stderr)
        return EXIT_USER_ERROR
    except ClaimHeld as held:
        print(f"bioablate: {held}", file=sys.stderr)
        return EXIT_CLAIM_HELD
    except Interrupted as stop:
        print(f"bioablate: interrupted ({stop})", file=sys.stderr)
        return stop.exit_code
    except KeyboardInterrupt:  # before the handlers were installed
        print("bioablate: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

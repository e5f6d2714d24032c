"""The `bioablate` argument parser: one sub-parser per command, each help page ending with examples
(ablations/cli/help.py). `main` (ablations/cli/__init__.py) dispatches the parsed arguments."""

from __future__ import annotations

import argparse
import math

from ablations import api
from ablations.cli.help import VersionAction, add_common, add_datasets, add_store_options, describe_commands, examples
from ablations.cli.predictions import export_command, predict_command, predictions_command
from bioablate_core.counts import MAX_TRIALS, count_argument


def _add_no_wait(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-wait", dest="wait", action="store_false",
                        help="if another live process is running the same run, say who and exit 75 "
                             "(default: wait for it, then reuse its result)")


def _add_max_runs(parser: argparse.ArgumentParser) -> None:
    # default None: the planner's own limit (ablations.experiment.spec.MAX_RUNS), without importing the
    # planner to build the parser
    parser.add_argument("--max-runs", type=int, metavar="N",
                        help="refuse an experiment that plans more fine-tuning runs than this (default 5,000: a "
                             "typo'd grid is refused in milliseconds, not planned for minutes)")


def _add_experiment_options(parser: argparse.ArgumentParser, work_dir_help: str, overrides_help: str,
                            profile_help: str = "micro | mini | base (default: the experiment's)") -> None:
    """What finds an experiment's runs again (`status`, `table`): profile, store, the overrides it ran with."""
    parser.add_argument("--profile", help=profile_help)
    _add_max_runs(parser)
    add_store_options(parser, work_dir_help)
    parser.add_argument("overrides", nargs="*", metavar="key=value", help=overrides_help)
    add_common(parser)


def _add_run_options(parser: argparse.ArgumentParser, override_example: str) -> None:
    """What every command that trains takes: profile, seed, where things go, --force, overrides."""
    add_common(parser)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--force", action="store_true", help="rerun even if an identical run already finished")
    _add_no_wait(parser)
    parser.add_argument("--profile", default="micro", help="micro | mini | base (default: micro)")
    add_store_options(parser)
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help=f"config overrides (`bioablate list keys`), e.g. {override_example}")


def _add_launcher_options(parser: argparse.ArgumentParser) -> None:
    """`--launcher slurm`: submit the work as SLURM jobs (docs/cluster.md) instead of running it here."""
    parser.add_argument("--launcher", choices=["local", "slurm"], default="local",
                        help="local: run here (default); slurm: submit SLURM jobs (see docs/cluster.md)")
    parser.add_argument("--launcher-config", metavar="YAML",
                        help="a YAML with a `launcher:` block (partition, account, time, gpus_per_run, ...)")
    parser.add_argument("--wait", dest="follow", action="store_true",
                        help="with --launcher slurm: follow the jobs until they end, then report (default: print "
                             "job ids and return)")


def _finetune_command(sub) -> None:
    ft = sub.add_parser("finetune", help="fine-tune an encoder on one BLURB dataset, logged to MLflow", **examples(
        "bioablate finetune --task bc5-chem --profile micro",
        "bioablate finetune --task chemprot --model general-minilm --seed 2 finetune.lr=3e-5 finetune.epochs=5"))
    ft.add_argument("--task", help="dataset name, e.g. bc5-chem (see `bioablate list tasks`); required unless "
                                   "a --config file sets `task`")
    ft.add_argument("--config", action="append", default=[], metavar="YAML",
                    help="a YAML layer of config keys, applied after the profile and before key=value "
                         "overrides (repeatable; e.g. the file `bioablate sweep best` writes)")
    ft.add_argument("--model", help="Hugging Face-format directory, or a named model (see `bioablate list models`)")
    add_datasets(ft)
    _add_run_options(ft, "finetune.lr=3e-5 finetune.epochs=5")


def _command_group(sub, name: str, help: str, examples: dict):
    """A command with subcommands of its own (`bioablate data stats`): their parsers are added to this."""
    group = sub.add_parser(name, help=help, **examples)
    return group.add_subparsers(dest=f"{name}_command", required=True, metavar="SUBCOMMAND")


def _data_command(sub) -> None:
    data_sub = _command_group(sub, "data", "dataset utilities",
                              examples("bioablate data fetch", "bioablate data stats --task gad"))
    stats = data_sub.add_parser("stats", help="counts per dataset and split beside the paper's Table 3",
                                **examples("bioablate data stats", "bioablate data stats --task bc5-chem --tagging io",
                                           "bioablate data stats --datasets my-ner.yaml"))
    stats.add_argument("--task", action="append", help="only this dataset (repeatable)")
    add_datasets(stats, ": count it, every line of its files read (without --task: only these)")
    stats.add_argument("--tagging", choices=["bio", "bioul", "io"],
                       help="io: also count the gold mentions IO tagging would merge with a neighbour")
    add_common(stats)
    fetch = data_sub.add_parser("fetch", help="download the BLURB datasets and vocabularies from their pinned "
                                "public origins, verify them, then print `data stats` of the folder",
                                **examples("bioablate data fetch",
                                           "bioablate data fetch --to data --only gad --only vocab"))
    fetch.add_argument("--to", metavar="DIR", help="folder to fill (default: the user data folder, "
                       "~/.local/share/bioablate/data on Linux, which --data-dir/BIOABLATE_DATA default to)")
    fetch.add_argument("--only", action="append", metavar="NAME",
                       help="only this dataset, or 'vocab' (repeatable; default: everything)")
    fetch.add_argument("--mirror", metavar="URL", help="fetch from URL instead of https://raw.githubusercontent.com "
                       "(same <owner>/<repo>/<commit>/<path> layout below it)")
    fetch.add_argument("--jobs", type=int, default=8, help="parallel downloads (default: 8)")


def _pretrain_command(sub) -> None:
    pt = sub.add_parser("pretrain", help="pretrain an encoder (BERT / ALBERT / ELECTRA) into a Hugging Face directory",
                        **examples("bioablate pretrain --corpus pubmed --profile micro",
                                    "bioablate pretrain --corpus 'general>pubmed' --objective electra --dry-run "
                                    "pretrain.max_steps=2000"))
    pt.add_argument("--corpus", help="a corpus name (bioablate list corpora) or a corpus YAML; a+b mixes, "
                                     "a>b continues (e.g. general>pubmed)")
    pt.add_argument("--vocab", help="staged vocabulary, vocab.txt path, train:SIZE[:cased], or init")
    pt.add_argument("--masking", help=" | ".join(api.options("pretrain.masking")))
    pt.add_argument("--objective", help=" | ".join(api.options("pretrain.objective")))
    pt.add_argument("--adversarial", action="store_true", default=None, help="ALUM adversarial pretraining")
    pt.add_argument("--init", help="scratch, or a checkpoint (HF directory / named model) to continue from")
    pt.add_argument("--devices", help="Lightning devices (e.g. 2)")
    pt.add_argument("--num-nodes", type=int)
    pt.add_argument("--strategy", help="Lightning strategy (e.g. ddp)")
    pt.add_argument("--dry-run", action="store_true",
                    help="print the corpus size, steps, tokens seen and passes over the corpus; build nothing")
    pt.add_argument("--nodes", type=int, help="with --launcher slurm: nodes of the one DDP job (default: "
                                              "launcher.nodes)")
    pt.add_argument("--gpus-per-node", type=int, help="with --launcher slurm: DDP ranks per node (default: "
                                                      "launcher.gpus_per_node, else launcher.gpus_per_run)")
    _add_launcher_options(pt)
    _add_run_options(pt, "pretrain.max_steps=2000 pretrain.lr=3e-4")


def _vocab_command(sub) -> None:
    voc_sub = _command_group(sub, "vocab", "vocabulary utilities",
                             examples("bioablate vocab compare --no-table8", "bioablate vocab train --out my-vocab"))
    vt = voc_sub.add_parser("train", help="train a WordPiece vocabulary on a pretraining corpus",
                            **examples("bioablate vocab train --corpus pubmed --size 30000 --out my-vocab"))
    vt.add_argument("--corpus", default="pubmed", help="a corpus name (`bioablate list corpora`) or YAML path")
    vt.add_argument("--size", type=int, default=30000)
    vt.add_argument("--cased", action="store_true")
    vt.add_argument("--max-words", type=int)
    vt.add_argument("--min-words", type=int, default=128)
    vt.add_argument("--out", required=True, help="output folder (vocab.txt is written there)")
    add_common(vt)
    vc = voc_sub.add_parser("compare", help="the paper's Table 1 (term splits) and Table 8 (input lengths)",
                            **examples("bioablate vocab compare",
                                        "bioablate vocab compare --vocab my-vocab/vocab.txt --no-table8 --format csv"))
    vc.add_argument("--vocab", action="append",
                    help="vocabularies for Table 1 (repeatable; default: the three staged ones)")
    vc.add_argument("--general", default="bert-base-uncased", help="general-domain vocabulary for Table 8")
    vc.add_argument("--domain", default="pubmedbert-uncased", help="in-domain vocabulary for Table 8")
    vc.add_argument("--task", action="append", help="Table 8 for this dataset only (repeatable)")
    vc.add_argument("--no-table8", action="store_true", help="only Table 1")
    vc.add_argument("--format", default="markdown", help="markdown | latex | csv (default: markdown)")
    add_common(vc)


def _list_command(sub) -> None:
    lst = sub.add_parser("list", help="list what there is: datasets, models, variants, corpora, the packaged "
                                      "experiments, profiles and sweeps, every config key",
                         **examples("bioablate list experiments", "bioablate list keys --profile mini"))
    lst.add_argument("what", nargs="?", choices=["tasks", "models", "variants", "corpora", "experiments",
                                                 "profiles", "sweeps", "keys"],
                     help="what to list (none: the choices, each with what it lists)")
    lst.add_argument("--profile", default="micro", help="keys: show the values under this profile (default: micro)")
    add_common(lst)


def _sweep_command(sub) -> None:
    sw = sub.add_parser(
        "sweep", help="Optuna hyperparameter sweep from a YAML (see docs/sweeps.md); `sweep best STUDY` "
                      "exports the best configuration",
        **examples("bioablate sweep micro --n-trials 4", "bioablate sweep ner --task ncbi-disease --n-trials 20",
                    "bioablate sweep best micro-pubmedqa"))
    sw.add_argument("target", metavar="SWEEP|best",
                    help="a packaged sweep (`bioablate list sweeps`, e.g. ner) or a sweep YAML; or `best` to "
                         "export a study's best")
    sw.add_argument("rest", nargs="*", metavar="key=value|STUDY",
                    help="config overrides for every trial; after `best`: the study name")
    sw.add_argument("--storage", help="Optuna storage URL (default: $BIOABLATE_SWEEP_STORAGE, else "
                                      "sqlite:///<work-dir>/optuna.db); PostgreSQL/MySQL for several workers")
    sw.add_argument("--n-trials", type=count_argument(1, MAX_TRIALS),
                    help="finished trials the study should have (default: the YAML's)")
    sw.add_argument("--workers", type=int, default=1,
                    help="local worker processes sharing the study (default 1; >1 needs a server database)")
    sw.add_argument("--worker-index", type=int, default=0,
                    help="offset added to the sampler seed: give each machine sharing a study its own")
    sw.add_argument("--task", help="dataset, overriding the YAML's `task`")
    add_datasets(sw, ": every trial's `datasets`")
    sw.add_argument("--study", help="study name (default: the YAML's `study`, else <yaml name>-<task>)")
    sw.add_argument("--output", help="`best` only: write the YAML here (default: <work-dir>/sweeps/<study>.yaml)")
    add_store_options(sw)
    _add_launcher_options(sw)
    add_common(sw)


def _run_command(sub) -> None:
    rn = sub.add_parser("run", help="run an experiment (one per paper table): pretraining stages, "
                                    "fine-tuning runs, then its table; finished runs are reused",
                        **examples("bioablate run quickstart --profile micro",
                                    "bioablate run table13_tagging --dry-run",
                                    "bioablate run my_study.yaml --devices 2",
                                    "bioablate run table13_tagging --profile base --launcher slurm "
                                    "--launcher-config cluster.yaml"))
    rn.add_argument("experiment", metavar="EXPERIMENT",
                    help="a packaged experiment (`bioablate list experiments`, e.g. quickstart) or a YAML path")
    rn.add_argument("--profile", help="micro | mini | base (default: the experiment's)")
    rn.add_argument("--devices", type=int, default=1,
                    help="runs at a time, one per device (GPUs; on CPU the cores are split); with --ddp: "
                         "devices per run (default 1)")
    rn.add_argument("--runs-per-device", type=int, default=1, metavar="K",
                    help="runs at a time on each device, each in its own process with its share of the host's "
                         "cores (small profiles leave a GPU mostly idle; default 1)")
    rn.add_argument("--ddp", action="store_true", help="give each run --devices devices (DDP) instead")
    rn.add_argument("--dry-run", action="store_true", help="print the plan (what would be computed or reused)")
    _add_no_wait(rn)
    _add_max_runs(rn)
    add_store_options(rn)
    _add_table_statistics(rn)
    rn.add_argument("overrides", nargs="*", metavar="key=value",
                    help="config overrides for every run, e.g. finetune.epochs=5")
    _add_launcher_options(rn)
    add_common(rn)


def _status_command(sub) -> None:
    st = sub.add_parser("status", help="each planned run of an experiment as MLflow and SLURM see it "
                                       "(after `run --launcher slurm`)",
                        **examples("bioablate status table13_tagging --profile base",
                                   "bioablate status my-exp.yaml --tracking-uri http://login1:5000"))
    st.add_argument("experiment", metavar="EXPERIMENT.yaml")
    add_datasets(st, ", registered before the experiment is read (as its own `datasets:` are)")
    _add_experiment_options(st, "outputs, checkpoints, caches", "the overrides the run was given")


def _server_command(sub) -> None:
    sv = sub.add_parser("server", help="a shared MLflow tracking server for many jobs: PostgreSQL backend, "
                                       "artifacts on a shared filesystem (docs/cluster.md)",
                        **examples("bioablate server --backend-store-uri postgresql://mlflow@dbhost/mlflow "
                                   "--artifacts /shared/mlartifacts"))
    sv.add_argument("--backend-store-uri", required=True,
                    help="the database runs are stored in, e.g. postgresql://user@dbhost/mlflow")
    sv.add_argument("--artifacts", required=True, metavar="DIR",
                    help="artifact root on a filesystem every job can reach")
    sv.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    sv.add_argument("--port", type=int, default=5000)
    sv.add_argument("--workers", type=int, default=4, help="server worker processes (default 4)")
    sv.add_argument("--allow-remote", action="store_true",
                    help="listen on a non-loopback address (the server has no authentication)")


# the smallest difference the seeds needed are solved for: what the table shows at its two decimals
# (statsmodels warns and gives nothing for a vanishing one); the largest: the width of Pearson's range
EFFECT_RANGE = (0.01, 200.0)


def _effect(text: str) -> float:
    """`--effect`: a difference of points, nonzero, within EFFECT_RANGE either way."""
    try:
        points = float(text)
    except ValueError:
        points = math.nan
    least, most = EFFECT_RANGE
    if not least <= abs(points) <= most:  # NaN too: it compares false
        raise argparse.ArgumentTypeError(f"expected a difference of {least} to {most:.0f} points (either sign), "
                                         f"got {text!r}")
    return points


def _add_table_statistics(parser) -> None:
    """The table's statistics options, shared by `table` and `run` (docs/experiments.md, "Statistics")."""
    parser.add_argument("--correction", help="multiple-comparison correction of the table's significance marks: "
                                             "holm (default, or the YAML's table.correction), bonferroni, fdr_bh, "
                                             "... none")
    parser.add_argument("--effect", type=_effect, metavar="POINTS",
                        help="difference (x100, as the table shows) the seeds needed are solved for "
                             "(default: the paper's difference to the baseline)")
    parser.add_argument("--cost", action="store_true", default=None,
                        help="show each column's compute (FLOPs, device-hours, peak memory) under the scores "
                             "(also the YAML's table.cost: true)")


def _table_command(sub) -> None:
    tb = sub.add_parser("table", help="render an experiment's table from the runs in the tracking store "
                                      "(markdown / LaTeX / CSV and a plot; runs nothing)",
                        **examples("bioablate table quickstart --profile micro",
                                    "bioablate table table13_tagging --format latex --out tables/"))
    tb.add_argument("experiment", metavar="EXPERIMENT", nargs="?",
                    help="a packaged experiment (`bioablate list experiments`, e.g. table13_tagging) or a YAML path")
    tb.add_argument("--from", dest="from_dir", metavar="DIR",
                    help="render the table bundle in DIR (a rendered table's folder: bundle.jsonl) alone, with no "
                         "store; with --out")
    tb.add_argument("--format", default="markdown", help="markdown | latex | csv (default: markdown)")
    tb.add_argument("--out", help="write table.md/.tex/.csv and the figure (.png/.svg/.pdf) here "
                                  "(default: <work-dir>/tables/<experiment>-<profile>/)")
    tb.add_argument("--stats", action="store_true",
                    help="print every statistic behind the table, cell by cell (CIs per run, per-seed tests, "
                         "corrected p values, seeds needed, cost, agreement with the paper)")
    _add_table_statistics(tb)
    _add_experiment_options(tb, "where the runs went", "overrides the experiment ran with",
                            "micro | mini | base (default: the one profile and overrides the store has runs of; "
                            "none: the experiment's)")


def _import_command(sub) -> None:
    im = sub.add_parser("import", help="put a table bundle's finished runs into the store, where `run` reuses them",
                        **examples("bioablate import docs/results/quickstart-mini",
                                   "bioablate import shared/table12 --work-dir outputs"))
    im.add_argument("folder", metavar="DIR", help="a rendered table's folder, holding its bundle.jsonl")
    add_store_options(im)


def _ui_command(sub) -> None:
    ui = sub.add_parser("ui", help="MLflow UI over the work directory's store (loopback only by default)",
                        **examples("bioablate ui", "bioablate ui --work-dir outputs --port 5001",
                                   "bioablate ui --optuna --port 5000"))
    ui.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ui.add_argument("--port", type=int, default=5000, help="port (default 5000)")
    ui.add_argument("--allow-remote", action="store_true",
                    help="allow a non-loopback --host (the UI has no authentication)")
    ui.add_argument("--work-dir", help="work directory whose store to show (default: $BIOABLATE_WORK or ./outputs)")
    ui.add_argument("--tracking-uri", help="MLflow store to show (default: sqlite:///<work-dir>/mlruns.db)")
    ui.add_argument("--storage", help="the sweeps' Optuna storage (default: $BIOABLATE_SWEEP_STORAGE, else "
                                      "sqlite:///<work-dir>/optuna.db)")
    ui.add_argument("--optuna", action="store_true",
                    help="also serve the Optuna dashboard over that storage, on the same host (needs the `ui` "
                         "extra: pip install 'bioablate[ui]')")
    ui.add_argument("--optuna-port", type=int, help="the dashboard's port (default: --port + 1)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bioablate", description="Ablation studies of biomedical language models (BLURB).",
        **examples("bioablate data fetch", "bioablate finetune --task bc5-chem --profile micro",
                    "bioablate run quickstart --profile micro", "bioablate list experiments",
                    "bioablate finetune --help"))
    parser.add_argument("-v", "--verbose", action="store_true", help="show library logs and warnings")
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _finetune_command(sub)
    _data_command(sub)
    _pretrain_command(sub)
    _vocab_command(sub)
    _list_command(sub)
    _sweep_command(sub)
    _run_command(sub)
    _status_command(sub)
    _server_command(sub)
    _table_command(sub)
    _import_command(sub)
    _ui_command(sub)
    export_command(sub)
    predict_command(sub)
    predictions_command(sub)
    describe_commands(parser)
    return parser

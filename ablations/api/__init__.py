"""The study layer's front door: everything bioablate does, as plain functions of plain values.

    from ablations import api

    cfg = api.config("mini", ["finetune.lr=3e-5"], task="bc5-chem")
    result = api.finetune(cfg)                  # computed, or reused by fingerprint, or resumed
    experiment = api.experiment("table13_tagging", profile="micro")
    summary = api.run(experiment, devices=2)    # every planned run the store does not hold yet
    print(api.table(experiment).text)           # the paper's table, ours beside the paper's numbers
    api.export(result.run_id, Path("my-model")); api.predict(Path("my-model"), Path("in.txt"))

The command line (ablations/cli/) parses its arguments, calls these and prints what they return, and
imports nothing else of the project but `bioablate_core` (tests/bioablate_core/test_layering.py); the benchmarks and the
report notebook call them as they are. Nothing here parses arguments or prints. Runs, experiments,
tables, sweeps and models are here; beside them, re-exported here:

- catalog.py: what there is (`listing`: `bioablate list`; a choice's `options`; `version`);
- data.py: the staged data and vocabularies (`data_stats`, `fetch_data`, `train_vocab`, `compare_vocabs`);
- launch.py: SLURM submissions and their decisions (`pretrain_on_slurm`, `experiment_on_slurm`,
  `sweep_on_slurm`, and following each);
- store.py: reading the stores back for reports (`browse_lines`, `stored_invocations`, `sweep_best`, the
  MLflow `ui` and `server`, `store_failure`).

Every import that takes time (Lightning, MLflow, transformers, torch, the planner) is inside the function
that needs it: importing this package costs milliseconds, so a command's typo answers at once.

Below this module, SLURM jobs and sweep workers run one run each through the run layer
(`ablations.experiment.workers.execute`, `ablations.run.finetune.run_finetune`), never through argv:
this module submits them, so they do not import it back (tests/bioablate_core/test_layering.py: no import loop).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Literal, Optional, Sequence

from ablations.api.catalog import listing, options, version
from ablations.api.data import compare_vocabs, data_stats, fetch_data, train_vocab
from ablations.api.launch import (
    experiment_on_slurm,
    follow_experiment,
    follow_pretraining,
    follow_sweep,
    pretrain_on_slurm,
    sweep_on_slurm,
)
from ablations.api.store import (
    browse_lines,
    import_bundle,
    server,
    store_failure,
    stored_invocations,
    sweep_best,
    sweep_commands,
    table_from_bundle,
    ui,
)
from bioablate_core.console import libraries_quieted

if TYPE_CHECKING:
    from omegaconf import DictConfig

__all__ = ["Table", "browse_lines", "check_parallelism", "compare_vocabs", "config", "corrections", "data_stats",
           "experiment", "experiment_on_slurm", "experiments_markdown", "export", "fetch_data", "finetune",
           "follow_experiment", "follow_pretraining", "follow_sweep", "import_bundle", "listing", "options", "plan",
           "predict", "predictions", "pretrain", "register_datasets",
           "pretrain_config", "pretrain_on_slurm", "pretrain_plan", "report_tracking_uri", "run", "server",
           "status", "store_failure", "stored_invocations", "stored_tables", "sweep", "sweep_best",
           "sweep_commands", "sweep_on_slurm", "sweep_spec", "table", "table_formats", "table_from_bundle",
           "train_vocab", "ui",
           "version"]


def config(profile: str = "micro", overrides: Sequence[str] = (), config_files: Iterable[Path | str] = (),
           **keys: Any) -> DictConfig:
    """A validated run config: schema defaults, the profile, `config_files`, `key=value` overrides, then
    `keys` (dotted config keys as keyword names: `**{"model.name_or_path": ...}`; None: not given)."""
    from ablations.config import build_config

    return build_config(profile, list(overrides), config_files=config_files, **keys)


def pretrain_config(profile: str = "micro", overrides: Sequence[str] = (), **keys: Any) -> DictConfig:
    """A pretraining run's config (`task=pretrain`, logged to the `pretrain` MLflow experiment unless the
    overrides name another)."""
    from ablations.config import PRETRAIN_EXPERIMENT, build_config

    overrides = list(overrides)
    if not any(o.startswith("experiment_name=") for o in overrides):
        overrides.insert(0, f"experiment_name={PRETRAIN_EXPERIMENT}")
    return build_config(profile, overrides, task="pretrain", **keys)


def finetune(cfg: DictConfig, force: bool = False, wait: bool = True, tags: Optional[dict[str, str]] = None,
             progress_lines: bool = False):
    """One fine-tuning run of `cfg`: a finished run with its fingerprint is reused, an unfinished one
    resumed from its checkpoint; `force` computes it anew. While another live process holds it this waits
    and reuses its result (`wait=False`: raises `bioablate_core.claims.ClaimHeld`). `progress_lines`: log a
    line per epoch (output without a terminal, where no bar is drawn). Returns its `FinetuneResult`."""
    from ablations.run.finetune import run_finetune  # Lightning, MLflow, transformers: once a config checked out
    from lightning_modules.progress import ProgressLines

    callbacks = [ProgressLines(f"finetune {cfg.task}")] if progress_lines else []
    with libraries_quieted():
        return run_finetune(cfg, force=force, tags=tags, wait=wait, callbacks=callbacks)


def pretrain(cfg: DictConfig, force: bool = False, wait: bool = True):
    """One pretraining run of `cfg` (reused, resumed or computed, as `finetune`), its model exported to a
    Hugging Face folder. Returns its `PretrainResult`."""
    from ablations.run.pretrain import run_pretrain

    with libraries_quieted():
        return run_pretrain(cfg, force=force, wait=wait)


def pretrain_plan(cfg: DictConfig) -> list[str]:
    """What `pretrain(cfg)` would train on and how often it would see it, without training."""
    from ablations.run.pretrain_identity import dry_run

    return dry_run(cfg)


def register_datasets(files: Sequence[str]) -> list[str]:
    """Register user dataset YAMLs (`--datasets`), as a run's `datasets` key does; returns their names."""
    from ablations.run.exported_dataset import register_datasets as register

    return [spec.name for spec in register(files)]


def experiment(path: Path | str, profile: Optional[str] = None, overrides: Sequence[str] = (),
               data_dir: Optional[str] = None, work_dir: Optional[str] = None, tracking_uri: Optional[str] = None,
               max_runs: Optional[int] | Literal["default"] = "default"):
    """An experiment YAML (or a packaged experiment's name), validated for `profile` (default: its own):
    every mistake is a one-line ConfigError before anything runs. A grid of more than `max_runs` fine-tuning
    runs is refused ("default": the planner's limit; None: no limit)."""
    from ablations.experiment import load_experiment
    from ablations.experiment.spec import MAX_RUNS

    return load_experiment(path, profile=profile, overrides=list(overrides), data_dir=data_dir, work_dir=work_dir,
                           tracking_uri=tracking_uri, max_runs=MAX_RUNS if max_runs == "default" else max_runs)


def plan(experiment) -> Iterator[str]:
    """The experiment's runs, each resolved against the store (reuse, resume, compute), one line each."""
    from ablations.experiment import plan_lines

    return plan_lines(experiment)


def check_parallelism(devices: int = 1, ddp: bool = False, runs_per_device: int = 1) -> None:
    """`run`'s devices, DDP and runs per device together (a one-line ConfigError each way they cannot be),
    checked before an experiment loads."""
    from ablations.experiment.workers import check_parallelism as check

    check(devices, ddp, runs_per_device)


def run(experiment, devices: int = 1, ddp: bool = False, runs_per_device: int = 1, wait: bool = True):
    """Every planned run of `experiment` the store does not hold yet: `devices x runs_per_device` at a
    time in worker processes, or each run on all `devices` (`ddp`). Returns the `RunSummary`."""
    from ablations.experiment.runner import run_experiment  # (it checks the three together first)

    with libraries_quieted():
        return run_experiment(experiment, devices=devices, ddp=ddp, wait=wait, runs_per_device=runs_per_device)


def status(experiment) -> list[str]:
    """Where each planned run stands in the store (and in SLURM, for submitted jobs)."""
    from ablations.launch import status_lines

    return status_lines(experiment)


def table_formats() -> tuple[str, ...]:
    """The formats `table` renders (markdown, latex, csv)."""
    from ablations.tables import FORMATS

    return tuple(FORMATS)


def corrections() -> tuple[str, ...]:
    """The multiple-comparison corrections a table's significance marks can use (`table.correction`)."""
    from ablations.results import CORRECTIONS

    return tuple(CORRECTIONS)


@dataclass(frozen=True)
class Table:
    text: str  # in the format asked for
    out_dir: Path  # table.md / .tex / .csv and the figure
    tracking_uri: str
    recorded: Any = None  # the plan recorded with the runs, used when no data directory was given
    figures: bool = True  # whether the figures were drawn (the config's `figures`; the micro profile: no)


def table(experiment, fmt: str = "markdown", out_dir: Optional[Path] = None) -> Table:
    """The experiment's table from the runs in its store (nothing is run), written to `out_dir` (default
    `<work dir>/tables/<name>-<profile>/`) and logged to MLflow. The runs' fingerprints hash the data: without a data
    directory, they are read from the plan recorded with the runs."""
    from ablations.experiment import recorded_plan
    from ablations.places import has_data_dir
    from ablations.tables import render_experiment
    from ablations.tables.report import table_dir

    _, tracking_uri = experiment.store()
    recorded = None
    if experiment.kind == "finetune" and not has_data_dir(experiment.shared_config().data_dir):
        recorded = recorded_plan(experiment)
    out = out_dir or table_dir(experiment)
    text = render_experiment(experiment, tracking_uri, fmt, out, recorded=recorded)
    return Table(text, out, tracking_uri, recorded, experiment.draws_figures())


def sweep_spec(path: Path | str, task: Optional[str] = None, overrides: Sequence[str] = (),
               n_trials: Optional[int] = None, study: Optional[str] = None, datasets: Sequence[str] = ()):
    """A sweep YAML (or a packaged sweep's name), validated; command-line values win over the file's.
    `datasets`: user dataset YAMLs every trial registers (the `datasets` config key)."""
    from ablations.sweep import load_sweep

    return load_sweep(path, task=task, overrides=list(overrides), n_trials=n_trials, study=study,
                      datasets=datasets)


def sweep(spec, storage: Optional[str] = None, workers: int = 1, worker_index: int = 0,
          data_dir: Optional[str] = None, work_dir: Optional[str] = None, tracking_uri: Optional[str] = None,
          verbose: bool = False):
    """Run (or resume) the Optuna study of `spec` (`sweep_spec`): each trial one fine-tuning run in
    MLflow, `workers` local processes. Returns the `SweepSummary`."""
    from ablations.sweep import SweepPaths, run_sweep

    return run_sweep(spec, storage, workers, worker_index, SweepPaths(data_dir, work_dir, tracking_uri),
                     verbose=verbose)


def export(run: str, to: Path, work_dir: Optional[str] = None, tracking_uri: Optional[str] = None,
           datasets: Sequence[str] = ()) -> str:
    """A finished fine-tuning run (id or fingerprint) as a Hugging Face model folder with its head, card
    and bioablate.json (with a user dataset's definition: `datasets` registers YAMLs for a model stored
    before models carried it); returns what was written and how to use it."""
    from ablations.run.export import export_command

    return export_command(run, Path(to), work_dir, tracking_uri, datasets)


def predict(model_dir: Path, input_path: Path, output: Optional[Path] = None, task: Optional[str] = None,
            datasets: Sequence[str] = ()) -> int:
    """Predictions of an exported model for every example of `input_path`, as JSON lines to `output`
    (else stdout); returns how many. `datasets`: user dataset YAMLs, for a model that does not carry its
    dataset's definition."""
    from ablations.run.predict import predict_file

    return predict_file(Path(model_dir), task, Path(input_path), Path(output) if output else None, datasets)


def predictions(run: str, fmt: str = "conll", output: Optional[Path] = None, work_dir: Optional[str] = None,
                tracking_uri: Optional[str] = None, data_dir: Optional[str] = None, datasets: Sequence[str] = ()):
    """A finished tagging run's (id or fingerprint) test predictions as a CoNLL file (`token gold pred`,
    IOB2) at `output` (else stdout), words read from its dataset; returns what was written (`.line()`)."""
    from ablations.run.conll_export import predictions_file

    return predictions_file(run, fmt, Path(output) if output else None, work_dir, tracking_uri, data_dir, datasets)


def stored_tables(tracking_uri: str) -> list:
    """Every table rendered into the store (one per experiment and invocation), newest first, its markdown
    and figure read back from MLflow: what the report notebook shows."""
    from ablations.tables import stored_tables as read_tables

    return read_tables(tracking_uri)


def experiments_markdown(tracking_uri: str) -> str:
    """The experiments in the store, one row per invocation, with each one's table run or the command
    that renders it."""
    from ablations.tables import experiments_markdown as describe

    return describe(tracking_uri)


def report_tracking_uri(explicit: Optional[str] = None) -> str:
    """The store the report notebook reads: `explicit`, else $BIOABLATE_TRACKING_URI, else
    $MLFLOW_TRACKING_URI, else the default work directory's store."""
    from ablations.tables import report_tracking_uri as default_store

    return default_store(explicit)

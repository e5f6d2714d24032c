"""An experiment's table end to end: `render_experiment` collects its runs from the store (nothing is run),
or computes a `kind: vocab` table from the staged vocabularies, and publishes it. The one module of
ablations/tables that imports `ablations.experiment`. `stored_tables` and `experiments_markdown` read
tables back for notebooks/ablation_report.ipynb.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ablations.tables.bundle import BUNDLE, Bundle, write_bundle
from ablations.tables.pretrain_curves import StageChain, StageSegment, tokens_per_step, write_pretraining_curves
from ablations.tables.provenance import RunSetup, rendered_from_runs, setup_line
from ablations.tables.publish import TABLE_KIND, TABLE_MLFLOW_EXPERIMENT, publish_grid, publish_runs
from ablations.tables.render import Grid, check_format, md_escape
from ablations.tables.vocab_grids import table1_grid, table8_grid
from bioablate_core.errors import ConfigError
from bioablate_core.hardware import COMPUTE_PREFIX
from datamodules.qa_spans import QA_MERGES, describe_merge
from datamodules.registry import get_dataset
from datamodules.task_encoder import scoring_group
from datamodules.task_types import TASK_TYPES

PAPER_SCALE_PROFILE = "base"  # the paper's recipe for BERT-base: the one profile whose seed spreads are its models'


@dataclass
class StoredTable:
    """An experiment's table run in a tracking store, with its rendered markdown and plot."""

    experiment: str
    run_id: str
    title: str
    profile: str
    rendered_at: str  # the run's end time, UTC
    markdown: str
    png: bytes | None
    overrides: str = ""  # the command-line overrides of the invocation it was rendered for
    compute_png: bytes | None = None  # score against compute (pareto.py), where the runs logged their compute


def stored_tables(tracking_uri: str) -> list[StoredTable]:
    """Every table run in the store (one per experiment and invocation), newest first, with its markdown and
    PNG read back from the run's artifacts."""
    from mlflow.tracking import MlflowClient

    from ablations.run.tracking import preserved_tracking_env

    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name(TABLE_MLFLOW_EXPERIMENT)
    if experiment is None:
        return []
    runs = client.search_runs([experiment.experiment_id], f"tags.kind = '{TABLE_KIND}'",
                              order_by=["attributes.end_time DESC"])
    with _env(MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR="false"), preserved_tracking_env():  # no progress bars
        return [_stored_table(run, tracking_uri) for run in runs]


@contextmanager
def _env(**values: str) -> Iterator[None]:
    import os

    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _stored_table(run, tracking_uri: str) -> StoredTable:
    import datetime
    import tempfile

    from mlflow.artifacts import download_artifacts
    from mlflow.exceptions import MlflowException

    files: dict[str, bytes | None] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("table.md", "table.png", "compute.png"):
            try:
                files[name] = Path(download_artifacts(run_id=run.info.run_id, artifact_path=name, dst_path=tmp,
                                                      tracking_uri=tracking_uri)).read_bytes()
            except (MlflowException, OSError):  # the run lacks the file: show what exists
                files[name] = None
    end = run.info.end_time or run.info.start_time
    when = datetime.datetime.fromtimestamp(end / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    markdown = files["table.md"].decode("utf-8") if files["table.md"] else "(table.md missing from the run)"
    return StoredTable(run.data.tags.get("experiment", ""), run.info.run_id, run.data.tags.get("title", ""),
                       run.data.tags.get("profile", ""), when, markdown, files["table.png"],
                       run.data.tags.get("cli_overrides", ""), files["compute.png"])


def experiments_in_store(tracking_uri: str) -> list[dict[str, Any]]:
    """One entry per experiment invocation (profile, command-line overrides) seen in the store: its
    `bioablate run` parent runs (tag `kind=experiment`), the newest one's status, and its table run if that
    invocation's table was rendered (tag `kind=table`)."""
    from mlflow.tracking import MlflowClient

    from ablations.experiment import PARENT_KIND
    from ablations.experiment.invocations import parent_overrides

    client = MlflowClient(tracking_uri)
    ids = [e.experiment_id for e in client.search_experiments()]
    summary: dict[tuple[str, str, str], dict[str, Any]] = {}

    def entry(name: str, profile: str, overrides: str) -> dict[str, Any]:
        return summary.setdefault((name, profile, overrides), {
            "experiment": name, "profile": profile, "overrides": overrides, "invocations": 0, "last_status": "",
            "table_run": None})

    for kind in (PARENT_KIND, TABLE_KIND):
        runs = client.search_runs(ids, f"tags.kind = '{kind}'", order_by=["attributes.start_time DESC"],
                                  max_results=5000) if ids else []
        for run in runs:
            name, profile = run.data.tags.get("experiment") or run.info.run_name, run.data.tags.get("profile", "")
            if kind == TABLE_KIND:
                e = entry(name, profile, run.data.tags.get("cli_overrides", ""))
                e["table_run"] = e["table_run"] or run.info.run_id  # newest first
                continue
            e = entry(name, profile, " ".join(parent_overrides(run)))
            if not e["invocations"]:  # newest first
                e["last_status"] = run.info.status
            e["invocations"] += 1
    return sorted(summary.values(), key=lambda e: (e["experiment"], e["profile"], e["overrides"]))


def experiments_markdown(tracking_uri: str) -> str:
    """The experiments in the store, one row per invocation (profile and overrides): how often `bioablate
    run` ran it, its newest status, and its table run, or the command that renders it."""
    rows = experiments_in_store(tracking_uri)
    if not rows:
        return f"No experiments in {tracking_uri} yet: run `bioablate run EXPERIMENT.yaml` first."
    lines = ["| experiment | profile | overrides | `bioablate run` invocations | newest status | table run |",
             "|---|---|---|---:|---|---|"]
    for r in rows:
        command = " ".join(["bioablate table", r["experiment"], "--profile", r["profile"], r["overrides"]]).strip()
        table = f"`{r['table_run']}`" if r["table_run"] else f"(not rendered: `{command}`)"
        lines.append(f"| {md_escape(r['experiment'])} | {md_escape(r['profile'])} | "
                     f"{md_escape(r['overrides']) or '(none)'} | {r['invocations']} | {r['last_status']} | "
                     f"{md_escape(table)} |")
    return "\n".join(lines) + "\n"


def report_tracking_uri(explicit: str | None = None) -> str:
    """The store the report notebook reads: `explicit`, else $BIOABLATE_TRACKING_URI, else
    $MLFLOW_TRACKING_URI, else the default work directory's store (<repo>/outputs/mlruns.db)."""
    import os

    from ablations.config import REPO_ROOT

    return (explicit or os.environ.get("BIOABLATE_TRACKING_URI") or os.environ.get("MLFLOW_TRACKING_URI")
            or f"sqlite:///{REPO_ROOT / 'outputs' / 'mlruns.db'}")


def vocab_grid(experiment) -> Grid:
    """A `kind: vocab` experiment's table, computed from the staged vocabularies (and, for input lengths,
    the staged datasets) by ablations/tables/vocab_compare.py."""
    from ablations.places import resolve_data_dir
    from ablations.tables.vocab_compare import table1, table8

    vocab = experiment.vocab
    data_dir = resolve_data_dir(experiment.data_dir)
    if vocab.table == "terms":
        grid = table1_grid(table1(list(vocab.vocabs), data_dir))
    else:
        grid = table8_grid(table8(vocab.general, vocab.domain, data_dir, list(experiment.tasks)), vocab.general,
                           vocab.domain)
    if experiment.layout.title and experiment.layout.title != experiment.name:
        grid.title = experiment.layout.title
    return grid


def table_dir(experiment) -> Path:
    """Where an experiment's table files go by default: `<work_dir>/tables/<name>-<profile>/`, one folder
    per profile (as docs/results/ names them: quickstart-mini), so rendering the micro table does not
    overwrite the mini one."""
    work_dir, _ = experiment.store()
    return work_dir / "tables" / f"{experiment.name}-{experiment.profile}"


def keep_existing_tables(experiment, runs, out: Path) -> None:
    """A table with no run in any cell never replaces one in `out` rendered from runs: a ConfigError instead.
    An empty table still replaces an empty one."""
    from ablations.results import NOT_RUN

    if all(r.status == NOT_RUN and r.run_id is None for r in runs) and rendered_from_runs(out / "table.md"):
        given = " ".join(experiment.cli_overrides)
        raise ConfigError(f"no run of {experiment.name} under profile {experiment.profile}"
                          f"{f' with {given}' if given else ''} is in the store: the table in {out}, rendered "
                          "from runs, is left as it was; check the overrides, or pass --out DIR for a table "
                          "of what is to run")


def render_experiment(experiment, tracking_uri: str | None = None, fmt: str = "markdown",
                      out_dir: Path | str | None = None, recorded=None) -> str:
    """Collect the experiment's runs, render its table and figure to `out_dir` (default `table_dir`), log
    them to the table run of this invocation, and return the table in `fmt` ("stats": every statistic, cell by
    cell); with `recorded` (a RecordedPlan) the runs are found by its
    identities, without the data."""
    from ablations.config import REPO_ROOT
    from ablations.places import shown_place

    if fmt != "stats":
        check_format(fmt)
    work_dir, store_uri = experiment.store()
    tracking_uri = tracking_uri or store_uri
    out = Path(out_dir) if out_dir is not None else table_dir(experiment)
    tags = {"experiment_file": shown_place(experiment.path, REPO_ROOT),
            "cli_overrides": " ".join(experiment.cli_overrides)}
    figures = experiment.draws_figures()
    if experiment.kind == "vocab":
        import time

        start = time.perf_counter()
        grid = vocab_grid(experiment)
        published = publish_grid(experiment.name, grid, tracking_uri, out, work_dir / "mlartifacts",
                                 experiment.profile, tags, time.perf_counter() - start,
                                 experiment.invocation(),
                                 list(experiment.tasks) if experiment.vocab.table == "lengths" else [], figures)
        grid_fields = {k: v for k, v in vars(grid).items() if k != "figure_data"}
        write_bundle(out / BUNDLE, Bundle("vocab", experiment.name, experiment.profile, published.header,
                                          grid=grid_fields))
    else:
        from dataclasses import replace

        from ablations.experiment import Store, record_plan, resolve

        plan = resolve(experiment, Store(tracking_uri)) if recorded is None else \
            resolve(experiment, Store(tracking_uri), recorded)
        runs = plan.cell_runs(experiment.layout.metric, experiment.layout)
        keep_existing_tables(experiment, runs, out)  # before anything is written
        if recorded is None:
            record_plan(experiment, plan)
        stages = [(s.name, s.status, s.run_id) for s in plan.stages.values()]
        layout = replace(experiment.layout, setup=setup_line(run_setups(experiment, plan)),
                         paper_scale=experiment.profile == PAPER_SCALE_PROFILE)
        costs = stage_costs(experiment, plan)
        published = publish_runs(experiment.name, layout, runs, tracking_uri, out, work_dir / "mlartifacts",
                                 experiment.profile, tags, stages, experiment.invocation(),
                                 work_dir / "cache" / "resampling", costs, figures)
        write_bundle(out / BUNDLE, Bundle("finetune", experiment.name, experiment.profile, published.header, layout,
                                          runs, _run_records(plan, runs, tracking_uri), costs))
        if figures:
            write_pretraining_curves(stage_chains(experiment, plan), tracking_uri, out, experiment.layout.title)
    return published.texts.get(fmt, published.texts["markdown"])


def _run_records(plan, runs, tracking_uri: str) -> dict:
    """The finished runs of a table's cells as its bundle keeps them, each with its test units."""
    from ablations.tables.bundle import finished_run_ids, run_record
    from ablations.tables.scored_units import NoPredictions, load_units

    wanted, out = set(finished_run_ids(runs)), {}
    for planned in plan.cells:
        if planned.run is not None and planned.run.info.run_id in wanted and planned.run.info.run_id not in out:
            try:
                units = load_units(tracking_uri, planned.run.info.run_id, planned.cell.task)
            except NoPredictions:  # logged without its predictions: the bundle says so by holding none
                units = None
            out[planned.run.info.run_id] = run_record(planned.run, planned.identity.experiment_name, units)
    return out


def stage_costs(experiment, plan) -> dict[str, list[tuple[str, dict]]]:
    """Per column, the finished pretraining stages its models were trained in (a continual stage and the
    stages it continues from) with their `system/compute/*` metrics: what the column's pretraining cost."""
    from ablations.results import FINISHED

    out: dict[str, dict[str, dict]] = {}
    for planned in plan.cells:
        column = planned.cell.column
        for stage_name in stage_chain(experiment, planned.cell.model):
            stage = plan.stages.get(stage_name)
            if stage is not None and stage.status == FINISHED and stage.run is not None:
                data = stage.run.data
                out.setdefault(column, {})[stage_name] = {k: v for k, v in {**data.metrics, **data.tags}.items()
                                                          if k.startswith(COMPUTE_PREFIX)}
    return {column: list(stages.items()) for column, stages in out.items()}


def run_setups(experiment, plan) -> list[RunSetup]:
    """What each planned cell of `plan` runs, from its resolved config (a cell still BLOCKED behind its
    pretraining stage: the config it will get, less the model directory)."""
    from lightning_modules.models import RANDOM_BERT

    sizes: dict[tuple, str] = {}  # a model's size, read once
    labels = experiment.layout.column_labels
    out = []
    for planned in plan.cells:
        cell = planned.cell
        model = experiment.models[cell.model]
        cfg = planned.config if planned.config is not None else \
            experiment.finetune_config(cell, model.name_or_path or RANDOM_BERT)
        shown = f"{cell.model} (pretrained by this experiment)" if model.is_stage else \
            f"{cell.model} ({model.finetuned.source} fine-tuned on {model.finetuned.task} by this experiment)" \
            if model.finetuned else shown_model(str(model.name_or_path))
        if not (model.is_planned and planned.config is None):  # a stage not run yet has no model to measure
            path = str(cfg.model.name_or_path)
            key = (path, cfg.model.num_layers, cfg.model.hidden_size) if path == RANDOM_BERT else (path,)
            if key not in sizes:
                sizes[key] = model_size(path, cfg)
            shown += f" ({sizes[key]})" if sizes[key] else ""
        spec = get_dataset(cell.task)
        extractive, merge = TASK_TYPES.of(spec.task_type).spans, str(cfg.finetune.qa_merge)
        by_question = scoring_group(spec) is not None and (not extractive or QA_MERGES.get(merge).pooled)
        out.append(RunSetup(cell.task, cell.row, labels.get(cell.column, cell.column), shown,
                            int(cfg.finetune.epochs), float(cfg.finetune.lr), int(cfg.finetune.batch_size),
                            cfg.finetune.max_train_examples, cfg.finetune.max_eval_examples, by_question,
                            describe_merge(spec, merge) if extractive else ""))
    return out


def shown_model(name_or_path: str) -> str:
    """A model as a shipped table names it: a local folder by its own name (where it lay is the
    machine's), a named or Hub model as it is named."""
    path = Path(name_or_path).expanduser()
    local = path.is_absolute() or name_or_path.startswith((".", "~")) or ("/" in name_or_path and path.is_dir())
    return path.name if local else name_or_path


def model_size(name_or_path: str, cfg) -> str:
    """"6 layers × 384 hidden": a random BERT's from the config, another model's from its config.json where
    it is on this machine (a directory, a named model's package, the Hub cache); "" where it is not."""
    import json

    from lightning_modules.models import NAMED_MODELS, RANDOM_BERT, split_revision

    if name_or_path == RANDOM_BERT:
        return f"{cfg.model.num_layers} layers × {cfg.model.hidden_size} hidden"
    config = Path(name_or_path).expanduser() / "config.json"
    if not config.is_file():
        name, revision = split_revision(name_or_path)
        entry = NAMED_MODELS.get(name) if name in NAMED_MODELS else None
        if entry is not None and entry.package_dir is not None:
            folder = entry.package_dir()
            config = folder / "config.json" if folder is not None else config
        else:
            from huggingface_hub import try_to_load_from_cache

            hub_id = entry.hub_id if entry is not None else name
            try:
                cached = try_to_load_from_cache(hub_id, "config.json", revision=revision)
            except Exception:  # noqa: BLE001 -- not a Hub id: no size shown
                cached = None
            config = Path(cached) if isinstance(cached, str) else config
    try:
        values = json.loads(config.read_text(encoding="utf-8"))
        return f"{int(values['num_hidden_layers'])} layers × {int(values['hidden_size'])} hidden"
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def stage_chains(experiment, plan) -> list[StageChain]:
    """Each fine-tuned model that was pretrained here, as the chain of its finished stages (root first);
    a chain stops at its first stage without a run in the store (a running stage shows its progress)."""
    chains = []
    for name in experiment.finetuned_models():
        if not experiment.models[name].is_stage:
            continue
        segments = []
        for stage in stage_chain(experiment, name):
            planned = plan.stages.get(stage)
            if planned is None or planned.run is None:
                break
            segments.append(StageSegment(planned.run.info.run_id, tokens_per_step(planned.run.data.params), stage))
        if segments:
            chains.append(StageChain(experiment.models[name].label or name, tuple(segments)))
    return chains


def stage_chain(experiment, model: str) -> list[str]:
    """The pretraining stages of this experiment that model `model` was trained in, the first (from
    scratch) first: the stage itself and the stages it continues from. Empty for a model not pretrained here."""
    if model not in experiment.models or not experiment.models[model].is_stage:
        return []
    chain = [model]
    while experiment.init_stage(chain[0]) is not None:
        chain.insert(0, experiment.init_stage(chain[0]))
    return chain

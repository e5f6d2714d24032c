"""Planned runs: an experiment's pretraining stages and fine-tuning cells, each resolved against the
tracking store in one place (`resolve_stage`, `resolve_cell`) into a `PlannedRun`: its config, its
identity (the fingerprint `bioablate pretrain` / `bioablate finetune` gives it, which finds it in the
store), its status and the reason it is not FINISHED. Nothing here runs anything:

- the runner (ablations/experiment/runner.py) executes the planned runs that are not FINISHED (or BLOCKED);
- `plan_lines` prints what the runner would do with each (`bioablate run --dry-run`);
- `collect` hands the tables one `results.CellRun` per planned cell.

A run's identity is computed from its config and the staged data (`Identities`), or, where no data
directory is at hand, read from the plan recorded when it was last resolved with the data (record.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple, Optional

from omegaconf import DictConfig

from ablations import results
from ablations.experiment.definition import Experiment, PlannedCell
from ablations.experiment.store import Store, run_status
from bioablate_core.errors import ConfigError
from bioablate_core.hardware import COMPUTE_PREFIX

PRETRAIN, FINETUNE = "pretrain", "finetune"  # PlannedRun.kind: a pretraining stage, a fine-tuning cell


class RunIdentity(NamedTuple):
    """What finds a run in the tracking store."""

    kind: str  # PRETRAIN | FINETUNE
    experiment_name: str  # the MLflow experiment its run goes to
    fingerprint: str  # the run's `fingerprint` tag
    model_dir: Optional[Path] = None  # PRETRAIN: the directory the pretrained model is exported to
    data_fingerprint: Optional[str] = None  # FINETUNE, computed with the data: handed to the run with `fingerprint`


def identify(kind: str, cfg: DictConfig) -> Optional[RunIdentity]:
    """The identity `bioablate pretrain` / `bioablate finetune` would give the run of `cfg` (the one place
    that turns their identities into a RunIdentity). None for a stage whose vocabulary the run itself trains."""
    if kind == PRETRAIN:
        from ablations.run.pretrain_identity import identify as identify_pretrain

        stage = identify_pretrain(cfg)
        if stage is None:
            return None
        return RunIdentity(PRETRAIN, cfg.experiment_name, stage.fingerprint, stage.model_dir)
    from ablations.run.finetune_identity import identify as identify_finetune

    identity = identify_finetune(cfg)
    return RunIdentity(FINETUNE, cfg.experiment_name, identity.fingerprint, data_fingerprint=identity.data_fingerprint)


class Identities:
    """Where planned runs' identities come from: computed from their configs and the staged data (this
    class; the fingerprints hash the data's content), or read from a recorded plan (record.RecordedPlan)."""

    def of(self, kind: str, name: str, cfg: DictConfig) -> tuple[Optional[RunIdentity], Optional[str]]:
        """(the identity of planned run `name` with config `cfg`; None with the reason when it has none yet)."""
        identity = identify(kind, cfg)
        if identity is None:  # only a stage whose vocabulary the run itself trains
            return None, f"pretraining stage '{name}' not run yet (its vocabulary is trained by the run)"
        return identity, None


COMPUTED = Identities()


@dataclass(frozen=True)
class PlannedRun:
    """A pretraining stage or a fine-tuning cell of an experiment, as the tracking store has it."""

    kind: str  # PRETRAIN | FINETUNE
    name: str  # the stage's name, or the cell's model/task/variant.../seed
    status: str  # results.FINISHED | FAILED | RUNNING | NOT_RUN | BLOCKED
    reason: Optional[str] = None  # why it is not FINISHED
    config: Optional[DictConfig] = None  # the run's config; None while BLOCKED
    identity: Optional[RunIdentity] = None  # None while BLOCKED, or while a stage's vocabulary is untrained
    cell: Optional[PlannedCell] = None  # FINETUNE: where it goes in the table
    run: Any = None  # the stored MLflow run its fingerprint found, if any
    run_id: Optional[str] = None  # that run's id (or, once the runner computed it, the new run's)

    @property
    def fingerprint(self) -> Optional[str]:
        return self.identity.fingerprint if self.identity is not None else None

    @property
    def model_dir(self) -> Optional[Path]:
        return self.identity.model_dir if self.identity is not None else None


def _found(kind: str, name: str, cfg: DictConfig, identity: RunIdentity, store: Store,
           cell: Optional[PlannedCell] = None) -> PlannedRun:
    run = store.find(identity.experiment_name, identity.fingerprint)
    status, reason = run_status(run)
    if kind == PRETRAIN and status == results.FINISHED and not (identity.model_dir / "config.json").is_file():
        status, reason = results.NOT_RUN, f"model directory {identity.model_dir} is missing: rerun the experiment"
    if kind == PRETRAIN and status != results.FINISHED:
        reason = f"pretraining stage '{name}': {reason}"
    if kind == FINETUNE and cell is None:  # a first stage: its kept best weights are the next stage's model
        if status == results.FINISHED and not (identity.model_dir / "config.json").is_file():
            status, reason = results.FAILED, (f"its run finished but its model directory {identity.model_dir} is "
                                              "missing (work directory moved?): rerun the experiment with --force")
        elif status != results.FINISHED:
            reason = f"first-stage fine-tuning '{name}': {reason}"
    return PlannedRun(kind, name, status, reason, cfg, identity, cell, run,
                      run.info.run_id if run is not None else None)


def _unfinished(stage: Optional[PlannedRun]) -> str:
    """How a stage that others wait for stands, for their BLOCKED reason (its own error is on its own row)."""
    if stage is not None and stage.status == results.FAILED:
        return "failed"
    if stage is not None and stage.status == results.BLOCKED:
        return "is blocked"
    return "has not finished"


def stage_init(experiment: Experiment, name: str,
               stages: dict[str, PlannedRun]) -> tuple[Optional[str], Optional[str]]:
    """(what stage `name` continues from: a directory, a named model or `scratch`; None with the reason
    when that is a stage of this experiment that has not finished)."""
    init = experiment.models[name].init
    if init is None:
        return "scratch", None
    if init not in experiment.models:
        return init, None
    if not experiment.models[init].is_stage:
        return experiment.models[init].name_or_path, None
    stage = stages.get(init)
    if stage is None or stage.status != results.FINISHED:
        return None, f"continues from pretraining stage '{init}', which {_unfinished(stage)}"
    return str(stage.model_dir), None


def model_for(experiment: Experiment, model: str,
              stages: dict[str, PlannedRun]) -> tuple[Optional[str], Optional[str]]:
    """(the model a cell fine-tunes: a name or directory; None with the reason while its pretraining stage
    or first-stage fine-tune has not finished)."""
    definition = experiment.models[model]
    if not definition.is_planned:
        return definition.name_or_path, None
    stage = stages.get(model)
    if stage is None or stage.status != results.FINISHED:
        what = "pretraining stage" if definition.is_stage else "first-stage fine-tuning"
        return None, f"needs {what} '{model}', which {_unfinished(stage)}"
    return str(stage.model_dir), None


def first_stage_model_dir(cfg: DictConfig, fingerprint: str) -> Path:
    """Where a finished fine-tuning run of `cfg` keeps its best weights (ablations.run.finetune `_store_model`)."""
    from ablations.places import resolve_work_dir

    return resolve_work_dir(cfg) / "runs" / fingerprint / "model"


def _resolved(kind: str, name: str, start: tuple[Optional[str], Optional[str]], config: Callable[[str], DictConfig],
              store: Store, identities: Identities, cell: Optional[PlannedCell] = None,
              model_dir: Optional[Callable[[DictConfig, str], Path]] = None) -> PlannedRun:
    """How every planned run is resolved: BLOCKED while the model it starts from is not there (`start`: the
    model, or None with the reason); else its config (`config(model)`), NOT_RUN while it has no identity
    yet; else what the store holds. `model_dir`: where the run keeps its model, when its identity does not say."""
    model, blocked = start
    if model is None:
        return PlannedRun(kind, name, results.BLOCKED, blocked, cell=cell)
    cfg = config(model)
    identity, reason = identities.of(kind, name, cfg)
    if identity is None:
        return PlannedRun(kind, name, results.NOT_RUN, reason, cfg, cell=cell)
    if model_dir is not None and identity.model_dir is None:
        identity = identity._replace(model_dir=model_dir(cfg, identity.fingerprint))
    return _found(kind, name, cfg, identity, store, cell)


def resolve_first_stage(experiment: Experiment, name: str, stages: dict[str, PlannedRun], store: Store,
                        identities: Identities = COMPUTED) -> PlannedRun:
    """The first stage of two-stage model `name`: its source model fine-tuned on the first task."""
    return _resolved(FINETUNE, name, model_for(experiment, experiment.models[name].finetuned.source, stages),
                     partial(experiment.first_stage_config, name), store, identities,
                     model_dir=first_stage_model_dir)


def resolve_stage(experiment: Experiment, name: str, stages: dict[str, PlannedRun], store: Store,
                  identities: Identities = COMPUTED) -> PlannedRun:
    """Pretraining stage (or first-stage fine-tune) `name`, given the stages it may continue from
    (`stages`, by name)."""
    if experiment.models[name].finetuned is not None:
        return resolve_first_stage(experiment, name, stages, store, identities)
    return _resolved(PRETRAIN, name, stage_init(experiment, name, stages), partial(experiment.stage_config, name),
                     store, identities)


def resolve_cell(experiment: Experiment, cell: PlannedCell, stages: dict[str, PlannedRun],
                 store: Store, identities: Identities = COMPUTED) -> PlannedRun:
    """Fine-tuning cell `cell`, given the pretraining stages (`stages`, by name) it may fine-tune."""
    return _resolved(FINETUNE, cell.name, model_for(experiment, cell.model, stages),
                     partial(experiment.finetune_config, cell), store, identities, cell)


def stage_states(experiment: Experiment, store: Store,
                 identities: Identities = COMPUTED) -> dict[str, PlannedRun]:
    """Every planned pretraining stage by name, each after the stage it continues from."""
    stages: dict[str, PlannedRun] = {}
    for name in experiment.stage_order():
        stages[name] = resolve_stage(experiment, name, stages, store, identities)
    return stages


@dataclass(frozen=True)
class Plan:
    """Every planned run of an experiment, resolved once (`resolve`)."""

    stages: dict[str, PlannedRun]  # by name, in the order they run
    cells: list[PlannedRun]  # in `experiment.cells()` order

    def cell_runs(self, metric: str, layout: Optional[results.TableLayout] = None) -> list[results.CellRun]:
        """The cells as the tables see them (`cell_result`); with a `metric` axis (layout.metrics), one per
        planned cell and metric, that metric's value at the metric's row or column."""
        if layout is None or not layout.metrics:
            return [cell_result(planned, metric) for planned in self.cells]
        axis = "row" if layout.rows == "metric" else "column"
        return [replace(cell_result(planned, m), **{axis: m}) for planned in self.cells for m in layout.metrics]


def resolve(experiment: Experiment, store: Store, identities: Identities = COMPUTED) -> Plan:
    """Every planned run of a `kind: finetune` experiment as the store has it."""
    stages = stage_states(experiment, store, identities)
    return Plan(stages, [resolve_cell(experiment, cell, stages, store, identities)
                         for cell in experiment.cells()])


def cell_result(planned: PlannedRun, metric: str) -> results.CellRun:
    """A planned cell as the tables see it: a FINISHED run with its test `metric` (a finished run without
    it counts as FAILED), else its status and reason."""
    cell = planned.cell
    status, reason, value, wall, compute = planned.status, planned.reason, None, None, {}
    floor = floor_kind = state = None
    run = planned.run
    if run is not None:
        if metric == "score":  # a floor is the primary score's
            floor, floor_kind = run.data.metrics.get("test/floor"), run.data.tags.get("test_floor_kind")
            state = run.data.tags.get("test_state")
        compute = {k: v for k, v in {**run.data.metrics, **run.data.tags}.items() if k.startswith(COMPUTE_PREFIX)}
        if status == results.FINISHED:
            value = run.data.metrics.get(f"test/{metric}")
            if value is None:
                status, reason = results.FAILED, f"finished run has no test/{metric} metric"
            elif not math.isfinite(value):  # no statistic over it: an undefined score, not a number (a NaN label)
                status, reason, value = (results.FAILED, f"test/{metric} is {value}: undefined, check the test data",
                                         None)
        if run.info.end_time and run.info.start_time:
            wall = (run.info.end_time - run.info.start_time) / 1000
    return results.CellRun(row=cell.row, column=cell.column, task=cell.task, seed=cell.seed, status=status,
                           value=value, reason=reason, run_id=planned.run_id, fingerprint=planned.fingerprint,
                           wall_time_s=wall, fold=cell.fold, compute=compute, floor=floor, floor_kind=floor_kind,
                           state=state)


def collect(experiment: Experiment, tracking_uri: Optional[str] = None) -> list[results.CellRun]:
    """One CellRun per planned fine-tuning run, found in the store by fingerprint (nothing is run):
    FINISHED with its test metric, FAILED with its error, RUNNING, NOT_RUN, or BLOCKED while its
    pretraining stage has not finished."""
    if experiment.kind != "finetune":
        raise ConfigError(f"{experiment.path}: kind {experiment.kind} has no runs to collect")
    return resolve(experiment, Store(tracking_uri or experiment.store()[1])).cell_runs(experiment.layout.metric,
                                                                                      experiment.layout)


# what `bioablate run` does with a planned run of each status
ACTIONS = {results.FINISHED: "reuse", results.RUNNING: "resume", results.FAILED: "resume",
           results.NOT_RUN: "compute", results.BLOCKED: "compute later"}


def _note(experiment: Experiment, planned: PlannedRun) -> str:
    first = experiment.models[planned.name].finetuned if planned.cell is None else None
    what = f" = {first.source} fine-tuned on {first.task} (s{first.seed}), first stage" if first else ""
    if planned.status == results.FINISHED:
        return f"{what} (run {planned.run_id})"
    if planned.status == results.BLOCKED and planned.cell is not None:
        stage = "pretraining stage" if experiment.models[planned.cell.model].is_stage else "first stage"
        return f" (after {stage} '{planned.cell.model}')"
    if planned.status != results.NOT_RUN and planned.reason:
        return f"{what} ({planned.reason})"
    return what


def plan_lines(experiment: Experiment) -> Iterator[str]:
    """One line per planned run: what `bioablate run` would do with it given the store as it is. Lines
    come as each run is resolved, and each run's config is dropped once its line is out: memory does not
    grow with the grid (a planned run's config is ~85 KB), and a long plan prints as it goes."""
    _, tracking_uri = experiment.store()
    if experiment.kind != "finetune":
        yield (f"{experiment.name} (kind {experiment.kind}): no runs; the table is computed from the staged "
               f"vocabularies and datasets")
        return
    store = Store(tracking_uri)
    yield f"plan for {experiment.name} (profile {experiment.profile}), store {tracking_uri}:"
    stages = stage_states(experiment, store, COMPUTED)
    counts: dict[str, int] = {}

    def line(planned: PlannedRun) -> str:
        what = ACTIONS[planned.status]
        counts[what] = counts.get(what, 0) + 1
        return f"  {what:<13} {planned.kind} {planned.name}{_note(experiment, planned)}"

    for planned in stages.values():
        yield line(planned)
    for cell in experiment.cells():
        yield line(resolve_cell(experiment, cell, stages, store, COMPUTED))
    yield "  " + ", ".join(f"{n} {what}" for what, n in counts.items())

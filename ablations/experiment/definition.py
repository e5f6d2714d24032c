"""A loaded experiment: the models, tasks, variants and seeds it names (`spec.load_experiment` builds
it from the YAML), the pretraining stages and fine-tuning cells they expand into, and the run config of
each, built in layers:

    schema <- profile <- overrides <- task_overrides <- model <- vary <- command line
"""

from __future__ import annotations

import hashlib
import itertools
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ablations import results
from ablations.config import PRETRAIN_EXPERIMENT, RunConfig, dotted_layer, merge_layer, parse_overrides, with_profile
from ablations.places import resolve_tracking_uri, resolve_work_dir
from bioablate_core.errors import ConfigError
from bioablate_core.schema import check_ranges, check_shapes, defaults
from datamodules.protocols import fold_name
from lightning_modules.models import RANDOM_BERT


@dataclass(frozen=True)
class FinetunedFrom:
    """A two-stage model: the best checkpoint of fine-tuning model `source` (of this experiment) on `task`
    with `seed`, a planned run of its own (the first stage); the experiment's cells fine-tune it again."""

    source: str
    task: str
    seed: int = 1


@dataclass(frozen=True)
class ModelDef:
    name: str
    label: str
    name_or_path: Optional[str]  # an existing model
    pretrain: Optional[dict[str, Any]]  # a stage: dotted `pretrain.*` keys with this profile's values
    init: Optional[str]  # a stage continuing from: a model of this experiment, or a named model / dir
    finetune: bool
    overrides: dict[str, Any]  # dotted config keys
    source: str  # the file that defines it (for messages)
    finetuned: Optional[FinetunedFrom] = None  # a first-stage fine-tune of another model

    @property
    def is_stage(self) -> bool:
        """A pretraining stage."""
        return self.pretrain is not None

    @property
    def is_planned(self) -> bool:
        """Its weights come from a planned run of this experiment: a pretraining stage or a first-stage
        fine-tune."""
        return self.pretrain is not None or self.finetuned is not None


@dataclass(frozen=True)
class Axis:
    name: str
    values: dict[str, dict[str, Any]]  # label -> dotted config keys


@dataclass(frozen=True)
class PlannedCell:
    """One planned fine-tuning run: a model on a task with a variant and a seed, at (row, column) of the
    experiment's table."""

    row: str
    column: str
    model: str
    task: str
    seed: int
    variant: tuple[tuple[str, str], ...]  # (axis, label) for every vary axis
    overrides: tuple[tuple[str, Any], ...]  # the variant's dotted config keys
    fold: Optional[int] = None  # a cross-validated task: the fold (1-based) this run trains and tests on

    @property
    def run_task(self) -> str:
        """The run's `task` config key: the task, or its fold (`euadr@fold3`, datamodules/protocols.py)."""
        return self.task if self.fold is None else fold_name(self.task, self.fold)

    @property
    def name(self) -> str:
        parts = [self.model, self.task, *[label for _, label in self.variant], f"s{self.seed}"]
        return "/".join(parts + ([] if self.fold is None else [f"fold{self.fold}"]))


@dataclass(frozen=True)
class VocabDef:
    table: str
    vocabs: tuple[str, ...]
    general: str
    domain: str


@dataclass
class Experiment:
    name: str
    description: str
    kind: str
    path: Path
    profile: str
    models: dict[str, ModelDef]
    tasks: list[str]
    axes: list[Axis]
    seeds_by_task: dict[str, list[int]]
    overrides: dict[str, Any]  # dotted keys: the YAML's `overrides` with this profile's values
    task_overrides: dict[str, dict[str, Any]]  # task -> dotted keys
    cli_overrides: list[str]  # `key=value` from the command line: win over the YAML's
    layout: results.TableLayout
    vocab: Optional[VocabDef]
    data_dir: Optional[str] = None
    work_dir: Optional[str] = None
    tracking_uri: Optional[str] = None
    accelerators: tuple[str, ...] = ()  # every run's trainer.accelerator (load_experiment records them)
    # one config of each kind of run it plans (load_experiment records them): what a local invocation holds
    # against this machine's CPUs, GPUs and RAM (bioablate_core.limits.check_machine) before its parent run
    machine_configs: tuple[DictConfig, ...] = ()
    # task -> the folds each of its (model, variant, seed) cells runs; a task without folds is absent
    folds_by_task: dict[str, list[int]] = field(default_factory=dict)

    # -- what it plans

    def init_stage(self, name: str) -> Optional[str]:
        """The stage of this experiment that stage `name` continues from, if any."""
        init = self.models[name].init
        return init if init in self.models and self.models[init].is_stage else None

    def depends_on(self, name: str) -> Optional[str]:
        """The planned model (pretraining stage or first-stage fine-tune) that planned model `name` starts
        from, if any."""
        finetuned = self.models[name].finetuned
        if finetuned is not None:
            return finetuned.source if self.models[finetuned.source].is_planned else None
        return self.init_stage(name)

    def stage_order(self) -> list[str]:
        """The pretraining stages and first-stage fine-tunes to run, each after the one it starts from.
        One that is not fine-tuned and that no other starts from is not planned."""
        order: list[str] = []

        def visit(name: str) -> None:
            if name in order:
                return
            if self.depends_on(name):
                visit(self.depends_on(name))
            order.append(name)

        for name, model in self.models.items():
            if model.is_planned and model.finetune:
                visit(name)
        return order

    def finetuned_models(self) -> list[str]:
        return [name for name, model in self.models.items() if model.finetune]

    def cells(self) -> list[PlannedCell]:
        """Every planned fine-tuning run, grouped by model."""
        out = []
        for model in self.finetuned_models():
            for task in self.tasks:
                for combo in itertools.product(*[list(axis.values.items()) for axis in self.axes]):
                    labels = {axis.name: label for axis, (label, _) in zip(self.axes, combo)}
                    overrides = tuple((k, v) for _, values in combo for k, v in values.items())
                    coords = {"task": task, "model": model, "metric": "", **labels}  # metric: per CellRun
                    for seed in self.seeds_by_task[task]:
                        for fold in self.folds_by_task.get(task, [None]):
                            out.append(PlannedCell(coords[self.layout.rows], coords[self.layout.columns], model,
                                                   task, seed, tuple(labels.items()), overrides, fold))
        return out

    # -- configs: schema <- profile <- overrides <- task_overrides <- model <- vary <- command line

    def _build(self, layers: list[tuple[str, dict[str, Any]]], flags: dict[str, Any]) -> DictConfig:
        """The config of `layers` and `flags` on the base, each built once: a plan resolves every cell again
        after each stage and at the table, and a seed's config was merged and range-checked each time (~7 ms,
        a tenth of a micro experiment's time). Served as a fresh copy (unpickled), as a merge makes one."""
        flags = {"data_dir": self.data_dir, "work_dir": self.work_dir, "tracking_uri": self.tracking_uri, **flags}
        key = repr((layers, flags, self.cli_overrides, self.profile))
        built = self.__dict__.setdefault("_built", {})
        if key not in built:
            built[key] = pickle.dumps(self._merged(layers, flags))
        return pickle.loads(built[key])

    def _merged(self, layers: list[tuple[str, dict[str, Any]]], flags: dict[str, Any]) -> DictConfig:
        named = [*[(source, dotted_layer(dotted)) for source, dotted in layers],
                 ("runner defaults", dotted_layer({"trainer.progress_bar": False})),
                 ("command-line overrides", parse_overrides(self.cli_overrides)),
                 ("command-line options", dotted_layer({k: v for k, v in flags.items() if v is not None}))]
        try:  # one merge (an experiment builds hundreds of configs); layer by layer only to name a bad one
            for _, layer in named:  # a list merged onto a mapping is a TypeError in OmegaConf
                check_shapes("", RunConfig, layer)
            cfg = self._base_copy()  # what OmegaConf.merge(base, ...) does, with a cheaper copy of the base
            cfg.merge_with(*[layer for _, layer in named])
            check_ranges("", RunConfig, cfg)
        except (OmegaConfBaseException, ConfigError, TypeError):
            cfg = self._base()
            for source, layer in named:
                cfg = merge_layer(cfg, layer, source)
        cfg.profile = self.profile
        return cfg

    def _base(self) -> DictConfig:
        """Schema defaults and the profile (cached: every config starts from it)."""
        if getattr(self, "_base_cfg", None) is None:
            cfg = defaults(RunConfig)
            self._base_cfg = with_profile(cfg, self.profile)
        return self._base_cfg

    def _base_copy(self) -> DictConfig:
        """A fresh copy of `_base()`: unpickled from bytes kept once, ~3x cheaper than the deep copy
        OmegaConf.merge makes (half the time of building a config)."""
        if getattr(self, "_base_bytes", None) is None:
            self._base_bytes = pickle.dumps(self._base())
        return pickle.loads(self._base_bytes)

    def shared_config(self) -> DictConfig:
        """What every run of this experiment shares: the YAML's `overrides` and the command line, on the
        profile (its MLflow experiment, trainer and model defaults), as a pretraining config."""
        return self._build([(f"{self.path}: overrides", self.overrides)], {"task": "pretrain"})

    def draws_figures(self) -> bool:
        """Whether its table and runs are drawn: the config's `figures` (the micro profile's is false), as the
        profile, the YAML's overrides and the command line leave it."""
        return bool(self.shared_config().figures)

    def stage_config(self, name: str, init: str = "scratch") -> DictConfig:
        """The `bioablate pretrain` config of stage `name`, continuing from `init` (a model directory or
        a named model). Continuing from `random-bert` is pretraining from scratch with its vocabulary."""
        model = self.models[name]
        pretrain = dict(model.pretrain or {})
        if init == RANDOM_BERT:
            init = "scratch"
            if pretrain.get("pretrain.vocab") == "init":
                source = next((m for m in self.models.values() if m.name_or_path == RANDOM_BERT), None)
                vocab = (source.overrides if source else {}).get("model.vocab")
                pretrain["pretrain.vocab"] = vocab or self.shared_config().model.vocab
        return self._build(
            [(f"{self.path}: overrides", self.overrides),
             (f"{model.source}: models.{name}.overrides", model.overrides),
             (f"{model.source}: models.{name}.pretrain", pretrain)],
            {"task": "pretrain", "experiment_name": PRETRAIN_EXPERIMENT, "pretrain.init": init})

    def first_stage_config(self, name: str, model_path: str) -> DictConfig:
        """The `bioablate finetune` config of two-stage model `name`'s first stage: its source model (at
        `model_path`) on the first task, with the experiment's overrides, the task's and the source model's
        (no `vary`: one first stage per model). It keeps its best weights (keep_model), which the second
        stage starts from."""
        first = self.models[name].finetuned
        source = self.models[first.source]
        return self._build(
            [(f"{self.path}: overrides", self.overrides),
             (f"{self.path}: task_overrides.{first.task}", self.task_overrides.get(first.task, {})),
             (f"{source.source}: models.{first.source}.overrides", source.overrides),
             ("model", {"model.name_or_path": model_path})],
            {"task": first.task, "seed": first.seed, "keep_model": True})

    def finetune_config(self, cell: PlannedCell, model_path: str) -> DictConfig:
        """The `bioablate finetune` config of `cell`, with the model at `model_path` (name or directory)."""
        model = self.models[cell.model]
        return self._build(
            [(f"{self.path}: overrides", self.overrides),
             (f"{self.path}: task_overrides.{cell.task}", self.task_overrides.get(cell.task, {})),
             (f"{model.source}: models.{cell.model}.overrides", model.overrides),
             ("model", {"model.name_or_path": model_path}),
             (f"{self.path}: vary", dict(cell.overrides))],
            {"task": cell.run_task, "seed": cell.seed})

    def invocation(self) -> str:
        """`<profile>-<hash of the command-line overrides>`: tells this experiment's invocations apart in the
        names of what is kept per invocation (SLURM job records, recorded plans)."""
        overrides = hashlib.sha256(" ".join(self.cli_overrides).encode()).hexdigest()[:8]
        return f"{self.profile}-{overrides}"

    def store(self) -> tuple[Path, str]:
        """(work directory, tracking URI) the runs go to."""
        probe = OmegaConf.create({"work_dir": self.work_dir, "tracking_uri": self.tracking_uri})
        work_dir = resolve_work_dir(probe)
        return work_dir, resolve_tracking_uri(probe, work_dir)


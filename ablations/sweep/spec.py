"""The sweep YAML (see `experiments/sweeps/` and docs/sweeps.md): its schema, `load_sweep`, and the samplers
and pruners it names.

A sweep YAML names a task, a base config (profile and `key=value` overrides), a search space over config
keys, a sampler, a pruner and the objective: a dev metric of the best dev epoch, averaged over seeds. It
is read through `bioablate_core.schema` like every other YAML of the toolkit; each mistake is one line naming the
file and the key, raised before any trial starts.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import optuna
from omegaconf import DictConfig, OmegaConf

from ablations.config import build_config
from bioablate_core import schema
from bioablate_core.counts import MAX_TRIALS, check_count
from bioablate_core.errors import ConfigError, UnknownNameError
from bioablate_core.packaged import resolve_config
from bioablate_core.registry import Registry

SPEC_ATTR = "bioablate.sweep"  # study user attr: `SweepSpec.to_attr()`, what `sweep best` reads back


# ---------------------------------------------------------------------------------------------------
# The schema: top level, then one dataclass per distribution type and per sampler / pruner


@dataclass
class ObjectiveSchema:
    metric: str = "score"  # a dev metric key: score (the task's primary metric), f1, precision, ...
    direction: str = "maximize"


@dataclass
class HeartbeatSchema:
    interval: int = 10  # seconds between a running trial's heartbeats
    grace_period: int = 60  # seconds without a heartbeat before a trial counts as dead
    max_retry: int = 3  # copies of a dead worker's trial that are run again


@dataclass
class SweepSchema:
    task: Optional[str] = None  # or --task
    study: Optional[str] = None  # default <file name>-<task>
    profile: str = "micro"
    overrides: List[str] = field(default_factory=list)
    experiment: str = "sweeps"
    n_trials: Optional[int] = None  # or --n-trials; grid: default the grid's size
    seeds: List[int] = field(default_factory=lambda: [42])
    objective: ObjectiveSchema = field(default_factory=ObjectiveSchema)
    sampler: Any = "tpe"  # a name, or {type: name, **options}
    pruner: Any = "none"
    space: Dict[str, Any] = field(default_factory=dict)  # config key -> distribution
    heartbeat: HeartbeatSchema = field(default_factory=HeartbeatSchema)


@dataclass
class CategoricalSchema:
    type: str = "categorical"
    choices: Optional[List[Any]] = None


@dataclass
class RangeSchema:
    """An int or float range (`type` says which; an int range's bounds and step are checked to be whole)."""
    type: str = "float"
    low: Optional[float] = None
    high: Optional[float] = None
    step: Optional[float] = None
    log: bool = False


DISTRIBUTIONS: Registry[type] = Registry("distribution type")
DISTRIBUTIONS.register("categorical", CategoricalSchema)
DISTRIBUTIONS.register("int", RangeSchema)
DISTRIBUTIONS.register("float", RangeSchema)


@dataclass(frozen=True)
class Method:
    """A sampler or pruner users name in the YAML: how to build it, and the options it takes (a schema
    whose fields are all optional: only the options the YAML writes are passed, Optuna's defaults
    stay Optuna's)."""

    build: Callable[..., Any]
    options: type


_PLAIN = {"int": int, "float": float, "bool": bool, "str": str}


def _plain_type(annotation: Any) -> type | None:
    """int / float / bool / str for an annotation that is one of them, or Optional of one (Optuna writes
    them as strings, e.g. "int | None"); None for anything else."""
    text = getattr(annotation, "__name__", None) or str(annotation)
    text = text.replace("Optional[", "").replace("typing.", "").rstrip("]")
    parts = [part.strip() for part in text.split("|") if part.strip() != "None"]
    return _PLAIN.get(parts[0]) if len(parts) == 1 else None


def options_schema(name: str, optuna_class: type, given: Sequence[str] = ()) -> type:
    """The options `optuna_class` takes, read from the installed Optuna's own signature (so the schema
    never drifts from the library): every keyword parameter but those bioablate passes itself (`given`),
    typed where Optuna annotates a plain type (int, float, bool, str, or Optional of one), else Any."""
    fields: list[tuple[str, Any, Any]] = [("type", str, field(default=name))]
    for param in inspect.signature(optuna_class).parameters.values():
        if param.name in given or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        plain = _plain_type(param.annotation)
        fields.append((param.name, Optional[plain] if plain else Any, field(default=None)))
    return dataclasses.make_dataclass(f"{optuna_class.__name__}Options", fields)


SAMPLERS: Registry[Method] = Registry("sampler")
SAMPLERS.register("grid", Method(lambda spec, **options: optuna.samplers.GridSampler(grid(spec), **options),
                                 options_schema("grid", optuna.samplers.GridSampler, given=["search_space"])))
SAMPLERS.register("tpe", Method(lambda spec, **options: optuna.samplers.TPESampler(**options),
                                options_schema("tpe", optuna.samplers.TPESampler)))
SAMPLERS.register("random", Method(lambda spec, **options: optuna.samplers.RandomSampler(**options),
                                   options_schema("random", optuna.samplers.RandomSampler)))
PRUNERS: Registry[Method] = Registry("pruner")
for _name, _pruner in (("median", optuna.pruners.MedianPruner), ("hyperband", optuna.pruners.HyperbandPruner),
                       ("none", optuna.pruners.NopPruner)):
    PRUNERS.register(_name, Method(_pruner, options_schema(_name, _pruner)))


# ---------------------------------------------------------------------------------------------------
# The validated sweep


@dataclass(frozen=True)
class Dimension:
    """One searched config key: categorical choices, or an int / float range (optionally log-scaled)."""

    key: str
    kind: str
    choices: tuple[Any, ...] = ()
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False

    def suggest(self, trial: optuna.Trial) -> Any:
        if self.kind == "categorical":
            return trial.suggest_categorical(self.key, list(self.choices))
        if self.kind == "int":
            return trial.suggest_int(self.key, int(self.low), int(self.high), step=int(self.step or 1),
                                     log=self.log)
        return trial.suggest_float(self.key, float(self.low), float(self.high), step=self.step, log=self.log)

    def grid_values(self, source: str) -> list[Any]:
        """Every value, for the grid sampler; a continuous range has none to enumerate."""
        if self.kind == "categorical":
            return list(self.choices)
        if self.step is None and self.kind == "float":
            raise ConfigError(f"{source}: space.{self.key}: the grid sampler needs categorical choices or a "
                              "range with a step; a continuous float range cannot be enumerated")
        step = self.step or 1
        count = int(math.floor((self.high - self.low) / step + 1e-9)) + 1
        values = [self.low + i * step for i in range(count)]
        return [int(v) for v in values] if self.kind == "int" else [round(v, 12) for v in values]

    def sample_values(self) -> list[Any]:
        """The values to check against the config schema (key, type, range) before any trial runs: every
        choice, or both ends of the range."""
        return list(self.choices) if self.kind == "categorical" else [self.low, self.high]


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep YAML, plus what the command line added (task, overrides, n_trials)."""

    path: Path
    task: str
    study: str
    profile: str
    overrides: tuple[str, ...]  # the YAML's, then the command line's
    cli_overrides: tuple[str, ...]  # the command line's alone: worker processes get them again
    experiment: str
    n_trials: int
    seeds: tuple[int, ...]
    metric: str
    direction: str
    sampler: Mapping[str, Any]  # {"type": name, **the options the YAML sets}
    pruner: Mapping[str, Any]
    space: tuple[Dimension, ...]
    heartbeat_interval: int
    grace_period: int
    max_retry: int

    def to_attr(self) -> dict[str, Any]:
        """What `sweep best` reads back from the study, wherever the YAML has gone since."""
        return {"task": self.task, "profile": self.profile, "overrides": list(self.overrides),
                "metric": self.metric, "direction": self.direction, "seeds": list(self.seeds)}


def _dimension(key: str, raw: Any, source: Path) -> Dimension:
    where = f"space.{key}"
    kinds = ", ".join(DISTRIBUTIONS.names())
    if not isinstance(raw, dict) or "type" not in raw:
        raise ConfigError(f"{source}: {where}: expected a mapping with a 'type' ({kinds})")
    kind = str(raw["type"])
    if kind not in DISTRIBUTIONS:
        raise ConfigError(f"{source}: {where}: unknown distribution type '{kind}'; known: {kinds} "
                          "(int and float take `log: true` for a log scale)")
    values = OmegaConf.to_container(schema.validate(f"{source}: {where}", raw, DISTRIBUTIONS.get(kind)))
    if kind == "categorical":
        choices = values["choices"]
        if not choices or any(isinstance(c, (list, dict)) for c in choices):
            raise ConfigError(f"{source}: {where}.choices: expected a non-empty list of plain values")
        return Dimension(key, kind, choices=tuple(choices))
    for name in ("low", "high"):
        if values[name] is None:
            raise ConfigError(f"{source}: missing required key '{where}.{name}'")
    low, high, step, log_scale = values["low"], values["high"], values["step"], values["log"]
    if kind == "int":
        for name in ("low", "high", "step"):
            if values[name] is not None and not float(values[name]).is_integer():
                raise ConfigError(f"{source}: {where}.{name}: an int range needs a whole number, got {values[name]}")
        low, high, step = int(low), int(high), None if step is None else int(step)
    if low > high:
        raise ConfigError(f"{source}: {where}: low ({low}) is greater than high ({high})")
    if log_scale and (low <= 0 or step not in (None, 1)):
        raise ConfigError(f"{source}: {where}: a log scale needs low > 0 and no step")
    if step is not None and step <= 0:
        raise ConfigError(f"{source}: {where}.step: must be positive")
    return Dimension(key, kind, low=low, high=high, step=step, log=log_scale)


def _method(raw: Any, kind: str, methods: Registry[Method], source: Path) -> dict[str, Any]:
    """{"type": name, **options}: the options the YAML writes, checked against the method's schema."""
    if isinstance(raw, str):
        raw = {"type": raw}
    if not isinstance(raw, dict) or "type" not in raw:
        raise ConfigError(f"{source}: '{kind}' must be a name or a mapping with a 'type'")
    name = str(raw["type"])
    if name not in methods:
        raise ConfigError(f"{source}: {UnknownNameError(kind, name, methods.names())}")
    values = OmegaConf.to_container(schema.validate(f"{source}: {kind} {name}", raw, methods.get(name).options))
    return {"type": name, **{key: values[key] for key in raw if key != "type"}}


def load_sweep(path: Path | str, task: str | None = None, overrides: Sequence[str] = (),
               n_trials: int | None = None, study: str | None = None, datasets: Sequence[str] = ()) -> SweepSpec:
    """Read and validate a sweep YAML; command-line values win over the file's. Every mistake is a
    one-line ConfigError naming the file and the key, raised before any trial starts. `path` may also be a
    packaged sweep's name (`micro`); `datasets` (`--datasets`): user dataset YAMLs, the `datasets` override
    every trial (and every worker process) gets."""
    if datasets:  # as a command-line override: workers and `sweep best`'s YAML get it with the others
        overrides = [*overrides, "datasets=" + json.dumps([str(d) for d in datasets])]
    source = resolve_config(path, "sweep")
    raw = OmegaConf.to_container(schema.load(source, SweepSchema), resolve=True)
    if not raw["space"]:
        raise ConfigError(f"{source}: missing required key 'space': it maps config keys to distributions, "
                          "e.g. finetune.lr: {type: categorical, choices: [1.0e-5, 3.0e-5]}")
    space = tuple(_dimension(str(key), value, source) for key, value in raw["space"].items())
    direction = raw["objective"]["direction"]
    if direction not in ("maximize", "minimize"):
        raise ConfigError(f"{source}: objective.direction: expected maximize or minimize, got '{direction}'")
    for key, value in raw["heartbeat"].items():
        if value < (0 if key == "max_retry" else 1):
            raise ConfigError(f"{source}: heartbeat.{key}: expected a positive whole number of "
                              f"{'retries' if key == 'max_retry' else 'seconds'}, got {value!r}")
    if not raw["seeds"]:
        raise ConfigError(f"{source}: 'seeds' must be a non-empty list of integers")
    task = task or raw["task"]
    if not task:
        raise ConfigError(f"{source}: missing required key 'task' (or pass --task)")
    spec = SweepSpec(
        path=source.resolve(), task=task, study=study or raw["study"] or f"{source.stem}-{task}",
        profile=raw["profile"], overrides=tuple([*raw["overrides"], *overrides]), cli_overrides=tuple(overrides),
        experiment=raw["experiment"], n_trials=0, seeds=tuple(raw["seeds"]), metric=raw["objective"]["metric"],
        direction=direction, sampler=_method(raw["sampler"], "sampler", SAMPLERS, source),
        pruner=_method(raw["pruner"], "pruner", PRUNERS, source), space=space,
        heartbeat_interval=raw["heartbeat"]["interval"], grace_period=raw["heartbeat"]["grace_period"],
        max_retry=raw["heartbeat"]["max_retry"])
    base_keys = {o.split("=", 1)[0] for o in spec.overrides}
    for dimension in space:
        if dimension.key in base_keys:
            raise ConfigError(f"{source}: space.{dimension.key} is also set in 'overrides'; keep it in one place")
    # Building configs at the ends of the space checks every searched key (and its range), override and
    # the DDP rule before anything runs.
    values = [d.sample_values() for d in space]
    for i in range(max((len(v) for v in values), default=1)):
        sample = [f"{d.key}={v[min(i, len(v) - 1)]}" for d, v in zip(space, values)]
        try:
            sample_cfg = build_config(spec.profile, [*spec.overrides, *sample], task=task)
        except ConfigError as error:
            raise ConfigError(f"{source}: {error}") from None
    check_single_process(sample_cfg, source)
    check_has_dev(sample_cfg, source)
    make_sampler(spec)  # sampler and pruner options Optuna rejects fail here, not in a worker
    make_pruner(spec)
    total = n_trials if n_trials is not None else raw["n_trials"]
    grid_size = math.prod(len(values) for values in grid(spec).values()) if spec.sampler["type"] == "grid" \
        else None
    if total is None:
        if grid_size is None:
            raise ConfigError(f"{source}: missing required key 'n_trials' (or pass --n-trials)")
        total = grid_size
    # the YAML's (the command line's --n-trials was checked where it was read, and is named there)
    total = check_count(total, f"{source}: n_trials" if n_trials is None else "--n-trials", most=MAX_TRIALS)
    if grid_size is not None and total > grid_size:
        raise ConfigError(f"{source}: n_trials is {total} but the grid has only {grid_size} points")
    return dataclasses.replace(spec, n_trials=total)


def check_has_dev(cfg: DictConfig, source: Path | str) -> None:
    """A sweep's objective is a dev metric: a dataset without a dev split (`dev: none`) has none."""
    from datamodules.custom import register_from_yaml
    from datamodules.registry import get_dataset

    for dataset_file in cfg.datasets:
        register_from_yaml(dataset_file)
    try:
        spec = get_dataset(cfg.task)
    except (ConfigError, UnknownNameError):  # an unknown task: said where its first run starts
        return
    if spec.no_dev:
        raise ConfigError(f"{source}: task {cfg.task} has no dev split (dev: none in {spec.source}), "
                          "and a sweep's objective is a dev metric; carve one instead, dev: {fraction: 0.1, seed: 13}")


def check_single_process(cfg: DictConfig, source: Path | str) -> None:
    """Trials are the unit of parallelism: one process, one device each. DDP inside a trial would need
    every rank to follow rank 0's Optuna trial (pruning decisions included); refusing it keeps a trial
    one process that a heartbeat can watch."""
    devices, strategy = cfg.trainer.devices, str(cfg.trainer.strategy)
    one_device = devices in (1, "1") or (OmegaConf.is_list(devices) and len(devices) == 1)
    if not one_device or cfg.trainer.num_nodes != 1 or strategy.startswith(("ddp", "fsdp", "deepspeed")):
        raise ConfigError(
            f"{source}: a sweep trial runs on one device in one process (got trainer.devices={devices}, "
            f"trainer.num_nodes={cfg.trainer.num_nodes}, trainer.strategy={strategy}); DDP inside a trial "
            "is not supported: run trials in parallel with --workers (see docs/sweeps.md)")


# ---------------------------------------------------------------------------------------------------
# Samplers and pruners


def grid(spec: SweepSpec) -> dict[str, list[Any]]:
    return {d.key: d.grid_values(str(spec.path)) for d in spec.space}


def make_sampler(spec: SweepSpec, seed_offset: int = 0) -> optuna.samplers.BaseSampler:
    """`seed_offset` (the worker index) keeps workers that share a study from drawing the same random
    sequence, which a random or TPE sampler would otherwise turn into duplicated trials."""
    options = {k: v for k, v in spec.sampler.items() if k != "type"}
    if options.get("seed") is not None:
        options["seed"] = int(options["seed"]) + seed_offset
    try:
        return SAMPLERS.get(spec.sampler["type"]).build(spec, **options)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{spec.path}: sampler: {error}") from None


def make_pruner(spec: SweepSpec) -> optuna.pruners.BasePruner:
    options = {k: v for k, v in spec.pruner.items() if k != "type"}
    try:
        return PRUNERS.get(spec.pruner["type"]).build(**options)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{spec.path}: pruner: {error}") from None

"""An experiment checked whole before anything runs: the size of its grid, its continual stages' order, and
every run's config built once (a bad key or value, an invalid variant, a model folder whose files disagree)."""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path
from typing import Callable, Optional

from omegaconf import DictConfig

from ablations.experiment.definition import Axis, Experiment, ModelDef
from bioablate_core.errors import BioablateError, ConfigError
from lightning_modules.models import RANDOM_BERT


def check_grid_size(path: Path, models: dict[str, ModelDef], tasks: list[str], axes: list[Axis],
                     seeds: dict[str, list[int]], max_runs: Optional[int],
                     folds: Optional[dict[str, list[int]]] = None) -> None:
    """Counted, not enumerated: a typo'd grid (300 values on an axis) is refused in milliseconds, before
    its runs' configs are built (~85 KB and ~8 ms each). A task with folds runs each seed once per fold."""
    finetuned = sum(m.finetune for m in models.values())
    combos = math.prod(len(a.values) for a in axes)
    count = finetuned * combos * sum(len(seeds[t]) * len((folds or {}).get(t, [None])) for t in tasks)
    if max_runs is not None and count > max_runs:
        sizes = " x ".join([f"{finetuned} models", *(f"{len(a.values)} {a.name}" for a in axes)])
        raise ConfigError(f"{path}: plans {count:,} fine-tuning runs ({sizes}, over {len(tasks)} tasks and their "
                          f"seeds), more than --max-runs {max_runs:,}; pass --max-runs {count} if that is meant")


def check_inits(models: dict[str, ModelDef], path: Path) -> None:
    from lightning_modules.models import resolve_model_dir

    for name, model in models.items():
        if model.init is None or model.init in models:
            continue
        try:
            resolve_model_dir(model.init)
        except ConfigError as e:
            raise ConfigError(f"{path}: models.{name}.init: '{model.init}' is neither a model of this experiment "
                              f"({', '.join(models)}) nor an existing one ({e})") from None
    for name, model in models.items():
        if model.init in models and models[model.init].finetuned is not None:
            raise ConfigError(f"{path}: models.{name}.init: '{model.init}' is a fine-tuned model; a pretraining "
                              "stage continues from a pretrained one")
        if model.finetuned is not None and model.finetuned.source not in models:
            raise ConfigError(f"{path}: models.{name}.finetuned.from: '{model.finetuned.source}' is not a model "
                              f"of this experiment ({', '.join(models)}); define it under `models` (finetune: "
                              "false if it needs no column of its own)")

    def start(name: str) -> Optional[str]:  # what model `name` starts from
        model = models[name]
        return model.finetuned.source if model.finetuned is not None else model.init

    for name in models:  # cycles
        seen, current = [name], start(name)
        while current in models:
            if current in seen:
                raise ConfigError(f"{path}: models: `init` / `finetuned.from` cycle {' -> '.join([*seen, current])}")
            seen.append(current)
            current = start(current)


def check_configs(experiment: Experiment) -> None:
    """Build every config once: a bad key or value, an invalid variant or a model folder whose files
    disagree fails here, naming the file. Records every run's accelerator (`Experiment.accelerators`) and
    the configs checked (`Experiment.machine_configs`).
    (The checks that import Lightning come after the configs they check were built: a typo is reported
    in a blink.)"""
    accelerators: set[str] = set()
    configs: list[DictConfig] = []

    def check(cfg: DictConfig, where: str, checks: Callable[[DictConfig], None]) -> None:
        """One run's config: `checks` on it, a failure one ConfigError naming `where`."""
        accelerators.add(str(cfg.trainer.accelerator))
        configs.append(cfg)
        try:
            checks(cfg)
        except BioablateError as e:
            raise ConfigError(f"{where}: {e}") from None

    for name in experiment.stage_order():
        model = experiment.models[name]
        if not model.is_stage:  # a first-stage fine-tune: below
            continue
        init = model.init
        if init in experiment.models:
            init = experiment.models[init].name_or_path or "scratch"
        check(experiment.stage_config(name, init or "scratch"), f"{model.source}: models.{name}", _check_stage)
    for name in experiment.stage_order():  # first-stage fine-tunes
        model = experiment.models[name]
        if model.finetuned is None:
            continue
        source = experiment.models[model.finetuned.source]
        check(experiment.first_stage_config(name, source.name_or_path or RANDOM_BERT),
              f"{model.source}: models.{name}.finetuned", partial(_check_finetune, task=model.finetuned.task))
    seen: set[str] = set()
    for cell in experiment.cells():
        # variants depend on the task and the finetune.* keys, not on the model's weights (repr: a value
        # may be a list, right or wrong, and the wrong ones must reach the config check below)
        key = repr((tuple(experiment.models[cell.model].overrides.items()), cell.task, cell.overrides))
        if key in seen:
            continue
        seen.add(key)
        model = experiment.models[cell.model]
        check(experiment.finetune_config(cell, model.name_or_path or RANDOM_BERT),
              f"{experiment.path}: {cell.model} on {cell.task} with "
              f"{', '.join(label for _, label in cell.variant) or 'no variant'}",
              partial(_check_cell, task=cell.task, model=model))
    experiment.accelerators = tuple(sorted(accelerators))
    experiment.machine_configs = tuple(configs)


def _check_stage(cfg: DictConfig) -> None:
    from ablations.run.pretrain_checks import check_config

    check_config(cfg)


def _check_finetune(cfg: DictConfig, task: str) -> None:
    """What every fine-tuning config is checked for: its values, and its choices for `task`."""
    from ablations.checks import check_run_config
    from datamodules.registry import get_dataset
    from lightning_modules.finetune_spec import FinetuneSpec

    check_run_config(cfg)
    FinetuneSpec.from_config(cfg.finetune, get_dataset(task))


def _check_cell(cfg: DictConfig, task: str, model: ModelDef) -> None:
    """A cell's config: a fine-tuning config, whose model, where it exists, takes its inputs."""
    from ablations.checks import check_max_length
    from lightning_modules.model_checks import check_model

    _check_finetune(cfg, task)
    if not model.is_planned:  # a planned model does not exist yet: checked when its run starts
        check_max_length(cfg)
    # a model folder here (a Hub model is checked when its run starts: loading an experiment must
    # not need the network, nor a random BERT's vocabulary the data directory)
    if model.name_or_path not in (None, RANDOM_BERT) and Path(model.name_or_path).expanduser().is_dir():
        check_model(cfg.model, None)

"""What a fine-tuning config computes, named without computing it: its dataset, its modelling choices and its
run's fingerprint (found in the tracking store for reuse, for a plan, for a table). Free of Lightning and
MLflow, so that planning an experiment and rendering its table import neither; ablations/run/finetune.py
runs what it names."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from ablations.config import fingerprint
from ablations.places import resolve_data_dir
from bioablate_core.errors import ConfigError
from datamodules.class_weights import check_class_weights
from datamodules.custom import register_from_yaml
from datamodules.registry import get_dataset
from datamodules.spec import DatasetSpec
from datamodules.task_encoder import scoring_group
from datamodules.task_kinds import kind_of, resolve_windows
from datamodules.task_types import TASK_TYPES
from lightning_modules.finetune_spec import FinetuneSpec
from lightning_modules.models import RANDOM_BERT, max_positions, model_fingerprint


@dataclass(frozen=True)
class FinetuneIdentity:
    spec: DatasetSpec
    data_dir: Path
    data_fingerprint: str
    fingerprint: str  # the run's: finds it in the tracking store (tag `fingerprint`)
    choices: FinetuneSpec  # the modelling choices, checked against the task, windows resolved


def identify(cfg: DictConfig, fingerprints: tuple[str, str] | None = None) -> FinetuneIdentity:
    """Name what a built (checked) fine-tuning config computes. `fingerprints`: (run, data) fingerprints the
    planner computed for this very config, so they are not computed again. The choices are checked against
    the task here, as they are built: the build checks their names, not how they combine with the task."""
    for dataset_file in cfg.datasets:
        register_from_yaml(dataset_file)
    spec = get_dataset(cfg.task)
    choices = FinetuneSpec.from_config(cfg.finetune, spec)
    check_class_weights(plain(cfg.finetune.class_weights), spec)
    if cfg.finetune.adversarial and cfg.finetune.static_shapes:
        raise ConfigError("finetune.static_shapes=true does not combine with finetune.adversarial=true: ALUM's "
                          "term would count the filler rows of a static-shape batch; drop one of the overrides")
    if cfg.finetune.adversarial and TASK_TYPES.of(spec.task_type).scored:
        raise ConfigError(f"finetune.adversarial=true does not apply to {spec.name}: ALUM compares predicted "
                          "distributions and a regression task has none; drop the override")
    if kind_of(spec).windows is not None:  # its window rules, at the length the run encodes at
        choices = replace(choices, encoding=resolve_windows(spec, choices.encoding, run_max_length(cfg, spec)))
    data_dir = resolve_data_dir(cfg.data_dir)
    missing = spec.missing_files(data_dir)
    if missing:
        raise spec.missing_error(data_dir, missing)
    if fingerprints is not None:
        return FinetuneIdentity(spec, data_dir, fingerprints[1], fingerprints[0], choices)
    data_fp = spec.fingerprint(data_dir)
    # A model directory or named model counts by its files' content, not by where it lies, so the same
    # pretrained model finds the same runs from any work directory; a random BERT has no files to hash
    # beyond its vocabulary, so its name stays in.
    by_content = () if cfg.model.name_or_path == RANDOM_BERT else ("model.name_or_path",)
    # a capped evaluation of a task scored by group keeps whole groups (finetune_data.subsample); runs
    # capped before that cut questions apart, so they are not this run
    group = scoring_group(spec) if cfg.finetune.max_eval_examples is not None else None
    whole_groups = f"|eval-groups={group}" if group else ""
    run_fp = fingerprint(cfg, data_fp + model_fingerprint(cfg.model, data_dir) + whole_groups, exclude=by_content)
    return FinetuneIdentity(spec, data_dir, data_fp, run_fp, choices)


def plain(value: Any) -> Any:
    """A config value as plain Python (a list or mapping out of OmegaConf's containers)."""
    return OmegaConf.to_container(value) if isinstance(value, (DictConfig, ListConfig)) else value


def run_max_length(cfg: DictConfig, spec: DatasetSpec, positions: int | None = None) -> int:
    """The input length a run encodes at: finetune.max_length (within the model's: check_max_length), else
    the dataset's, clamped to the model's `positions` (read from its config when not given)."""
    if cfg.finetune.max_length is not None:
        return cfg.finetune.max_length
    return min(spec.max_length, max_positions(cfg.model) if positions is None else positions)

"""The `models` section of an experiment YAML: each entry read into a `ModelDef` (an existing model, a
pretraining stage, or a model fine-tuned on a first task), a `use:` entry merged over its shared file
(experiments/models/<use>.yaml), and the models checked against each other before anything runs.

    models = read_models(written["models"], path, profile)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional

from omegaconf import OmegaConf

from ablations.experiment.checks import check_inits
from ablations.experiment.definition import FinetunedFrom, ModelDef
from ablations.experiment.values import UNSET, dotted, is_per_profile, per_profile
from bioablate_core.errors import BioablateError, ConfigError
from bioablate_core.packaged import packaged_dir
from bioablate_core.schema import load_yaml, validate


@dataclass
class ModelSchema:
    """One model of an experiment: an existing model, or a pretraining stage."""

    # Values may be per-profile ({micro: ..., default: ...}) except `use`.
    use: Optional[str] = None  # a shared definition: experiments/models/<use>.yaml (this file's keys win)
    name_or_path: Any = None  # an existing model: general-minilm | random-bert | an HF directory
    pretrain: Optional[Dict[str, Any]] = None  # a pretraining stage: pretrain.* keys (corpus, vocab, ...)
    init: Any = None  # stage only: continue from another model of this experiment (or a named model)
    # two-stage: {from: MODEL, task: TASK, seed: 1}: the best checkpoint of fine-tuning MODEL (of this
    # experiment) on TASK, a planned run of its own; per-profile values allowed inside
    finetuned: Optional[Dict[str, Any]] = None
    label: Any = None  # column header (default: the model's name)
    finetune: Any = True  # false: only pretrained, as the `init` of other stages (no table column)
    overrides: Dict[str, Any] = field(default_factory=dict)  # config keys for this model's runs (model.*, ...)
    description: str = ""


def read_models(written: Optional[dict[str, Any]], path: Path, profile: str) -> dict[str, ModelDef]:
    """The experiment's `models` section as written (`written`: without the schema's defaults), each
    entry for `profile`; every mistake, in one entry or between them, a ConfigError naming `path`."""
    if not written:
        raise ConfigError(f"{path}: models: name at least one model (name_or_path: ..., pretrain: {{...}} or "
                          "use: NAME for experiments/models/NAME.yaml)")
    models = {str(n): _model(str(n), entry or {}, path, profile) for n, entry in written.items()}
    check_inits(models, path)
    _check_first_tasks(models, path)
    if not any(m.finetune for m in models.values()):
        raise ConfigError(f"{path}: models: every model has finetune: false; nothing to fine-tune")
    return models


def _shared_model_file(name: str, experiment_path: Path) -> Path:
    for folder in (experiment_path.parent / "models", packaged_dir("model")):
        candidate = folder / f"{name}.yaml"
        if candidate.is_file():
            return candidate
    known = sorted({p.stem for folder in (experiment_path.parent / "models", packaged_dir("model"))
                    if folder.is_dir() for p in folder.glob("*.yaml")})
    raise ConfigError(f"{experiment_path}: models: unknown shared model '{name}' (no {name}.yaml in "
                      f"experiments/models/); known: {', '.join(known) or 'none'}")


def _model_def(name: str, entry: dict[str, Any], source: Path, path: Path, profile: str) -> ModelDef:
    where = f"{path}: models.{name}"
    entry = {k: (None if per_profile(v, profile) is UNSET else per_profile(v, profile))
             if k in ("name_or_path", "init", "label", "finetune") else v for k, v in entry.items()}
    if isinstance(entry.get("pretrain"), dict) and is_per_profile(entry["pretrain"]):
        entry["pretrain"] = None if per_profile(entry["pretrain"], profile) is UNSET else \
            per_profile(entry["pretrain"], profile)
    if sum(entry.get(key) is not None for key in ("name_or_path", "pretrain", "finetuned")) != 1:
        raise ConfigError(f"{where}: give exactly one of `name_or_path` (an existing model), `pretrain` "
                          "(a pretraining stage) or `finetuned` (a model of this experiment fine-tuned on a "
                          "first task: {from: MODEL, task: TASK})")
    if entry.get("init") is not None and entry.get("pretrain") is None:
        raise ConfigError(f"{where}: `init` continues a pretraining stage; it needs a `pretrain` section")
    pretrain = None
    if entry.get("pretrain") is not None:
        pretrain = {f"pretrain.{k}": v for k, v in dotted(entry["pretrain"], profile).items()}
        if "pretrain.init" in pretrain:
            raise ConfigError(f"{where}.pretrain: set `init` beside `pretrain`, not inside it")
    return ModelDef(name, entry.get("label") or name, entry.get("name_or_path"), pretrain, entry.get("init"),
                    entry.get("finetune") is not False, dotted(entry.get("overrides") or {}, profile), str(source),
                    _finetuned(entry.get("finetuned"), f"{where}.finetuned", profile))


def _finetuned(raw: Any, where: str, profile: str) -> Optional[FinetunedFrom]:
    """`finetuned: {from: MODEL, task: TASK, seed: N}` (the model and task are checked by `check_inits`
    and `_check_first_tasks`, once every model is read)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping {{from: MODEL, task: TASK}} (optional: seed)")
    values = {k: per_profile(v, profile) for k, v in raw.items()}
    unknown = sorted(set(values) - {"from", "task", "seed"})
    if unknown:
        raise ConfigError(f"{where}: unknown key '{unknown[0]}'; valid keys: from, task, seed")
    for key in ("from", "task"):
        if not isinstance(values.get(key), str) or not values[key]:
            raise ConfigError(f"{where}.{key}: missing; give the "
                              + ("model of this experiment to fine-tune first" if key == "from"
                                 else "dataset of the first stage (bioablate list tasks)"))
    seed = values.get("seed", 1)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"{where}.seed: expected a whole number (the first stage's seed), got {seed!r}")
    return FinetunedFrom(values["from"], values["task"], seed)


def _model(name: str, written: dict[str, Any], path: Path, profile: str) -> ModelDef:
    """A model entry as written; a `use:` entry is the shared file's keys, then the ones written here."""
    if not written.get("use"):
        return _model_def(name, written, path, path, profile)
    shared_path = _shared_model_file(written["use"], path)
    shared_raw = load_yaml(shared_path)
    validate(shared_path, shared_raw, ModelSchema)
    merged = OmegaConf.to_container(shared_raw, resolve=True)
    if merged.get("use"):
        raise ConfigError(f"{shared_path}: a shared model cannot `use` another one")
    for key, value in written.items():
        if key == "use":
            continue
        if key in ("pretrain", "overrides") and isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return _model_def(name, merged, shared_path, path, profile)


def _check_first_tasks(models: dict[str, ModelDef], path: Path) -> None:
    from datamodules.registry import get_dataset

    for name, model in models.items():
        if model.finetuned is not None:
            try:
                get_dataset(model.finetuned.task)
            except BioablateError as e:
                raise ConfigError(f"{path}: models.{name}.finetuned.task: {e}") from None

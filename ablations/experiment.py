"""Experiment specs: one YAML per paper table (experiments/*.yaml), what they plan, and what the tracking
store holds for them.

An experiment names the models it compares (existing ones, or pretraining stages, possibly continuing
from one another), the tasks, the fine-tuning variants to `vary`, the seeds and the table layout. It
expands into pretraining stages and fine-tuning runs (model x task x variant x seed), each identified by
the fingerprint `bioablate pretrain` / `bioablate finetune` would give it, so whatever is FINISHED in the
store is found again: by the runner (ablations/runner.py), which then skips it, and by `collect`, which
hands the renderer (ablations/table.py) one `results.CellRun` per planned run. The full annotated spec is
in docs/experiments.md.

    spec = load_experiment("experiments/table13_tagging.yaml", profile="micro")
    runs = collect(spec)                    # list[results.CellRun], nothing is run
"""

from __future__ import annotations

import difflib
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError

from ablations import results
from ablations.config import (EXPERIMENTS_DIR, PROFILES, RunConfig, _merge, load_yaml, parse_overrides,
                              profile_config, resolve_tracking_uri, resolve_work_dir)
from core.errors import BioablateError, ConfigError

KINDS = ("finetune", "vocab")
VOCAB_TABLES = ("terms", "lengths")  # Table 1 (term splits), Table 8 (input lengths)
DEFAULT_ONLY = "default"  # in a per-profile value: the value for profiles not listed
PRETRAIN_EXPERIMENT = "pretrain"  # MLflow experiment of pretraining runs (as `bioablate pretrain`)
PARENT_KIND = "experiment"  # `kind` tag of the parent run of a `bioablate run` invocation
AXES_BUILTIN = ("task", "model")
RANDOM_BERT = "random-bert"
BLURB_ROW = "BLURB score"  # the paper's numbers for the BLURB score row: table.paper["BLURB score"]


# ---------------------------------------------------------------------------------------------------
# The YAML schema (OmegaConf structured configs: unknown keys are errors)


@dataclass
class ModelSchema:
    """One model of an experiment: an existing model, or a pretraining stage."""

    # Values may be per-profile ({micro: ..., default: ...}) except `use`.
    use: Optional[str] = None  # a shared definition: experiments/models/<use>.yaml (this file's keys win)
    name_or_path: Any = None  # an existing model: general-minilm | random-bert | an HF directory
    pretrain: Optional[Dict[str, Any]] = None  # a pretraining stage: pretrain.* keys (corpus, vocab, ...)
    init: Any = None  # stage only: continue from another model of this experiment (or a named model)
    label: Any = None  # column header (default: the model's name)
    finetune: Any = True  # false: only pretrained, as the `init` of other stages (no table column)
    overrides: Dict[str, Any] = field(default_factory=dict)  # config keys for this model's runs (model.*, ...)
    description: str = ""


@dataclass
class AxisSchema:
    """A `vary` axis: `values` is a list (each value of `key`) or a mapping label -> value, where a value
    is a scalar for `key` or a mapping of config keys."""

    key: Optional[str] = None
    values: Any = MISSING


@dataclass
class TableSchema:
    title: str = ""
    rows: str = "task"  # task | model | a vary axis
    columns: str = "model"
    metric: str = "score"
    baseline: Optional[str] = None  # a column value: the others are tested against it
    row_order: List[str] = field(default_factory=list)
    column_order: List[str] = field(default_factory=list)
    labels: Dict[str, str] = field(default_factory=dict)  # column value -> header
    paper: Dict[str, Dict[str, float]] = field(default_factory=dict)  # paper[row][column], as printed
    blurb_row: bool = False
    caption: str = ""


@dataclass
class VocabSchema:
    """kind: vocab -- computed from the staged vocabularies (ablations/vocab_compare.py), no runs."""

    table: str = "terms"  # terms: Table 1 (how vocabularies split biomedical terms); lengths: Table 8
    vocabs: List[str] = field(default_factory=lambda: ["bert-base-uncased", "scibert-scivocab-uncased",
                                                       "pubmedbert-uncased"])
    general: str = "bert-base-uncased"  # lengths: the general-domain vocabulary
    domain: str = "pubmedbert-uncased"  # lengths: the in-domain vocabulary


@dataclass
class ExperimentSchema:
    name: str = MISSING
    description: str = ""
    kind: str = "finetune"  # finetune | vocab
    profile: str = "micro"  # default profile (`--profile` overrides)
    models: Dict[str, ModelSchema] = field(default_factory=dict)
    tasks: Any = "blurb"  # a list of dataset names, or `blurb` (all 13); may be per-profile
    vary: Dict[str, AxisSchema] = field(default_factory=dict)
    seeds: Any = 1  # count | list | per-profile {micro: 1, mini: 3, base: {default: 5, biosses: 10}}
    overrides: Dict[str, Any] = field(default_factory=dict)  # config keys for every run (stages too)
    task_overrides: Dict[str, Any] = field(default_factory=dict)  # task -> config keys for its runs
    table: TableSchema = field(default_factory=TableSchema)
    vocab: VocabSchema = field(default_factory=VocabSchema)


def _schema_at(parts: list[str]) -> type | None:
    """The schema class whose keys are valid at `parts` (a key path minus its last element)."""
    if not parts:
        return ExperimentSchema
    nested = {("table",): TableSchema, ("vocab",): VocabSchema}
    if tuple(parts) in nested:
        return nested[tuple(parts)]
    if len(parts) == 2 and parts[0] == "models":
        return ModelSchema
    if len(parts) == 2 and parts[0] == "vary":
        return AxisSchema
    return None


def _unknown_key(source: Path, full_key: str) -> ConfigError:
    import dataclasses

    parts = full_key.split(".")
    schema = _schema_at(parts[:-1])
    valid = [f.name for f in dataclasses.fields(schema)] if schema else []
    where = f"under '{'.'.join(parts[:-1])}'" if len(parts) > 1 else "at the top level"
    close = difflib.get_close_matches(parts[-1], valid, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return ConfigError(f"{source}: unknown key '{full_key}'{hint}; valid keys {where}: {', '.join(valid)}")


def _validated(source: Path, raw: DictConfig, schema: type) -> DictConfig:
    try:
        return OmegaConf.merge(OmegaConf.structured(schema), raw)
    except ConfigKeyError as e:
        raise _unknown_key(source, e.full_key) from None
    except ValidationError as e:
        raise ConfigError(f"{source}: bad value for '{e.full_key}': {e.msg.splitlines()[0]}") from None
    except OmegaConfBaseException as e:
        raise ConfigError(f"{source}: {str(e).splitlines()[0]}") from None


# ---------------------------------------------------------------------------------------------------
# Values that depend on the profile


def _is_per_profile(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and set(value) <= {*PROFILES, DEFAULT_ONLY}


_UNSET = object()


def per_profile(value: Any, profile: str) -> Any:
    """`{micro: 1, mini: 3, default: 5}` -> the value for `profile` (else `default`); any other value as
    is. A per-profile mapping that names neither gives `_UNSET`: the key is left as the profile has it."""
    if not _is_per_profile(value):
        return value
    if profile in value:
        return value[profile]
    return value.get(DEFAULT_ONLY, _UNSET)


def _dotted(mapping: dict[str, Any], profile: str, prefix: str = "") -> dict[str, Any]:
    """`{finetune: {lr: 1}, model.vocab: x, pretrain.max_steps: {micro: 10}}` -> dotted keys with the
    profile's values; keys whose per-profile value does not name this profile are left out."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and not _is_per_profile(value):
            out.update(_dotted(value, profile, name + "."))
            continue
        value = per_profile(value, profile)
        if value is not _UNSET:
            out[name] = value
    return out


def _layer(dotted: dict[str, Any]) -> DictConfig:
    cfg = OmegaConf.create({})
    for key, value in dotted.items():
        OmegaConf.update(cfg, key, value, force_add=True)
    return cfg


# ---------------------------------------------------------------------------------------------------
# The loaded experiment


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

    @property
    def is_stage(self) -> bool:
        return self.pretrain is not None


@dataclass(frozen=True)
class Axis:
    name: str
    values: dict[str, dict[str, Any]]  # label -> dotted config keys


@dataclass(frozen=True)
class Cell:
    """One planned fine-tuning run: a model on a task with a variant and a seed, at (row, column)."""

    row: str
    column: str
    model: str
    task: str
    seed: int
    variant: tuple[tuple[str, str], ...]  # (axis, label) for every vary axis
    overrides: tuple[tuple[str, Any], ...]  # the variant's dotted config keys

    @property
    def name(self) -> str:
        parts = [self.model, self.task, *[label for _, label in self.variant], f"s{self.seed}"]
        return "/".join(parts)


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

    # -- what it plans

    def init_stage(self, name: str) -> Optional[str]:
        """The stage of this experiment that stage `name` continues from, if any."""
        init = self.models[name].init
        return init if init in self.models and self.models[init].is_stage else None

    def stage_order(self) -> list[str]:
        """The pretraining stages to run, each after the stage it continues from. A stage that is not
        fine-tuned and that no other stage continues from is not planned."""
        order: list[str] = []

        def visit(name: str) -> None:
            if name in order:
                return
            if self.init_stage(name):
                visit(self.init_stage(name))
            order.append(name)

        for name, model in self.models.items():
            if model.is_stage and model.finetune:
                visit(name)
        return order

    def finetuned_models(self) -> list[str]:
        return [name for name, model in self.models.items() if model.finetune]

    def cells(self) -> list[Cell]:
        """Every planned fine-tuning run, grouped by model."""
        out = []
        for model in self.finetuned_models():
            for task in self.tasks:
                for combo in itertools.product(*[list(axis.values.items()) for axis in self.axes]):
                    labels = {axis.name: label for axis, (label, _) in zip(self.axes, combo)}
                    overrides = tuple((k, v) for _, values in combo for k, v in values.items())
                    coords = {"task": task, "model": model, **labels}
                    for seed in self.seeds_by_task[task]:
                        out.append(Cell(coords[self.layout.rows], coords[self.layout.columns], model, task,
                                        seed, tuple(labels.items()), overrides))
        return out

    # -- configs: schema <- profile <- overrides <- task_overrides <- model <- vary <- command line

    def _build(self, layers: list[tuple[str, dict[str, Any]]], flags: dict[str, Any]) -> DictConfig:
        flags = {"data_dir": self.data_dir, "work_dir": self.work_dir, "tracking_uri": self.tracking_uri, **flags}
        named = [*[(source, _layer(dotted)) for source, dotted in layers],
                 ("runner defaults", _layer({"trainer.progress_bar": False})),
                 ("command-line overrides", parse_overrides(self.cli_overrides)),
                 ("command-line options", _layer({k: v for k, v in flags.items() if v is not None}))]
        base = self._base()
        try:  # one merge (an experiment builds hundreds of configs); layer by layer only to name a bad one
            cfg = OmegaConf.merge(base, *[layer for _, layer in named])
        except OmegaConfBaseException:
            cfg = base
            for source, layer in named:
                cfg = _merge(cfg, layer, source)
        cfg.profile = self.profile
        return cfg

    def _base(self) -> DictConfig:
        """Schema defaults and the profile (cached: every config starts from it)."""
        if getattr(self, "_base_cfg", None) is None:
            cfg = OmegaConf.structured(RunConfig)
            self._base_cfg = _merge(cfg, profile_config(self.profile), f"profile '{self.profile}'")
        return self._base_cfg

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
                pretrain["pretrain.vocab"] = vocab or self._build([(f"{self.path}: overrides", self.overrides)],
                                                                  {"task": "pretrain"}).model.vocab
        return self._build(
            [(f"{self.path}: overrides", self.overrides),
             (f"{model.source}: models.{name}.overrides", model.overrides),
             (f"{model.source}: models.{name}.pretrain", pretrain)],
            {"task": "pretrain", "experiment_name": PRETRAIN_EXPERIMENT, "pretrain.init": init})

    def finetune_config(self, cell: Cell, model_path: str) -> DictConfig:
        """The `bioablate finetune` config of `cell`, with the model at `model_path` (name or directory)."""
        model = self.models[cell.model]
        return self._build(
            [(f"{self.path}: overrides", self.overrides),
             (f"{self.path}: task_overrides.{cell.task}", self.task_overrides.get(cell.task, {})),
             (f"{model.source}: models.{cell.model}.overrides", model.overrides),
             ("model", {"model.name_or_path": model_path}),
             (f"{self.path}: vary", dict(cell.overrides))],
            {"task": cell.task, "seed": cell.seed})

    def store(self) -> tuple[Path, str]:
        """(work directory, tracking URI) the runs go to."""
        probe = OmegaConf.create({"work_dir": self.work_dir, "tracking_uri": self.tracking_uri})
        work_dir = resolve_work_dir(probe)
        return work_dir, resolve_tracking_uri(probe, work_dir)


# ---------------------------------------------------------------------------------------------------
# Loading


def _shared_model_file(name: str, experiment_path: Path) -> Path:
    for folder in (experiment_path.parent / "models", EXPERIMENTS_DIR / "models"):
        candidate = folder / f"{name}.yaml"
        if candidate.is_file():
            return candidate
    known = sorted({p.stem for folder in (experiment_path.parent / "models", EXPERIMENTS_DIR / "models")
                    if folder.is_dir() for p in folder.glob("*.yaml")})
    raise ConfigError(f"{experiment_path}: models: unknown shared model '{name}' (no {name}.yaml in "
                      f"experiments/models/); known: {', '.join(known) or 'none'}")


def _model_def(name: str, entry: dict[str, Any], source: Path, path: Path, profile: str) -> ModelDef:
    where = f"{path}: models.{name}"
    entry = {k: (None if per_profile(v, profile) is _UNSET else per_profile(v, profile))
             if k in ("name_or_path", "init", "label", "finetune") else v for k, v in entry.items()}
    if isinstance(entry.get("pretrain"), dict) and _is_per_profile(entry["pretrain"]):
        entry["pretrain"] = None if per_profile(entry["pretrain"], profile) is _UNSET else \
            per_profile(entry["pretrain"], profile)
    if (entry.get("name_or_path") is None) == (entry.get("pretrain") is None):
        raise ConfigError(f"{where}: give exactly one of `name_or_path` (an existing model) or `pretrain` "
                          "(a pretraining stage)")
    if entry.get("init") is not None and entry.get("pretrain") is None:
        raise ConfigError(f"{where}: `init` continues a pretraining stage; it needs a `pretrain` section")
    pretrain = None
    if entry.get("pretrain") is not None:
        pretrain = {f"pretrain.{k}": v for k, v in _dotted(entry["pretrain"], profile).items()}
        if "pretrain.init" in pretrain:
            raise ConfigError(f"{where}.pretrain: set `init` beside `pretrain`, not inside it")
    return ModelDef(name, entry.get("label") or name, entry.get("name_or_path"), pretrain, entry.get("init"),
                    entry.get("finetune") is not False, _dotted(entry.get("overrides") or {}, profile), str(source))


def _model(name: str, written: dict[str, Any], path: Path, profile: str) -> ModelDef:
    """A model entry as written; a `use:` entry is the shared file's keys, then the ones written here."""
    if not written.get("use"):
        return _model_def(name, written, path, path, profile)
    shared_path = _shared_model_file(written["use"], path)
    shared_raw = load_yaml(shared_path)
    _validated(shared_path, shared_raw, ModelSchema)
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


def _axis(name: str, raw: dict[str, Any], path: Path, profile: str) -> Axis:
    where = f"{path}: vary.{name}"
    if name in AXES_BUILTIN:
        raise ConfigError(f"{where}: '{name}' is a built-in axis; name the vary axis differently")
    key, values = raw.get("key"), per_profile(raw.get("values"), profile)
    if isinstance(values, list):
        if key is None:
            raise ConfigError(f"{where}: a list of values needs `key` (the config key they set), or give "
                              "a mapping label -> {config key: value}")
        labelled = {str(v): v for v in values}
    elif isinstance(values, dict) and values:
        labelled = {str(label): value for label, value in values.items()}
    else:
        raise ConfigError(f"{where}.values: expected a non-empty list or a mapping label -> value")
    out: dict[str, dict[str, Any]] = {}
    for label, value in labelled.items():
        if isinstance(value, dict):
            dotted = _dotted(value, profile)
        elif key is None:
            raise ConfigError(f"{where}.values.{label}: a scalar value needs the axis `key`")
        else:
            dotted = {key: value}
        if key is not None and isinstance(value, dict):
            dotted = {(k if "." in k or k in RunConfig.__dataclass_fields__ else f"{key}.{k}"): v
                      for k, v in dotted.items()}
        bad = [k for k in dotted if k.startswith("pretrain.") or k in ("seed", "task")]
        if bad:
            raise ConfigError(f"{where}: '{bad[0]}' cannot vary per fine-tuning run; pretraining "
                              "settings belong to `models` (one model per setting), seeds to `seeds`")
        out[label] = dotted
    return Axis(name, out)


def _seeds(raw: Any, profile: str, tasks: list[str], path: Path) -> dict[str, list[int]]:
    value = per_profile(raw, profile)
    if value is _UNSET:
        raise ConfigError(f"{path}: seeds: no value for profile '{profile}' (add it, or a `default`)")

    def as_list(v: Any, where: str) -> list[int]:
        if isinstance(v, bool) or not (isinstance(v, int) or (isinstance(v, list) and v and
                                                             all(isinstance(s, int) for s in v))):
            raise ConfigError(f"{path}: {where}: expected a number of seeds or a list of seeds, got {v!r}")
        if isinstance(v, int):
            if v < 1:
                raise ConfigError(f"{path}: {where}: at least 1 seed")
            return list(range(1, v + 1))
        return list(v)

    if isinstance(value, dict):  # per task, with `default`
        unknown = [t for t in value if t != DEFAULT_ONLY and t not in tasks]
        if unknown:
            raise ConfigError(f"{path}: seeds: '{unknown[0]}' is not a task of this experiment "
                              f"({', '.join(tasks)})")
        if DEFAULT_ONLY not in value and set(value) != set(tasks):
            raise ConfigError(f"{path}: seeds: per-task counts need a `default` for the other tasks")
        return {t: as_list(value.get(t, value.get(DEFAULT_ONLY)), f"seeds.{t}") for t in tasks}
    seeds = as_list(value, "seeds")
    return {t: seeds for t in tasks}


def _tasks(raw: Any, path: Path) -> list[str]:
    from datamodules.registry import dataset_names, get_dataset

    if raw is _UNSET:
        raise ConfigError(f"{path}: tasks: no value for this profile (add it, or a `default`)")
    if raw == "blurb":
        return list(dataset_names())
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{path}: tasks: expected a list of dataset names or `blurb` (all 13)")
    for name in raw:
        try:
            get_dataset(str(name))
        except BioablateError as e:
            raise ConfigError(f"{path}: tasks: {e}") from None
    return [str(t) for t in raw]


def load_experiment(path: Path | str, profile: Optional[str] = None, overrides: list[str] | tuple = (),
                    data_dir: Optional[str] = None, work_dir: Optional[str] = None,
                    tracking_uri: Optional[str] = None) -> Experiment:
    """Read and validate an experiment YAML for `profile` (default: the YAML's). Every mistake is a
    one-line ConfigError naming the file and the key, raised before anything runs."""
    path = Path(path)
    raw = load_yaml(path)
    spec = OmegaConf.to_container(_validated(path, raw, ExperimentSchema), resolve=True)
    written = OmegaConf.to_container(raw, resolve=True)  # as written: without the schema's defaults
    profile = profile or spec["profile"]
    if profile not in PROFILES:
        raise ConfigError(f"{path}: unknown profile '{profile}'; known: {', '.join(PROFILES)}")
    if spec["kind"] not in KINDS:
        raise ConfigError(f"{path}: kind: unknown kind '{spec['kind']}'; known: {', '.join(KINDS)}")
    name, table = str(spec["name"]), spec["table"]
    tasks = _tasks(per_profile(spec["tasks"], profile), path)
    overrides_dotted = _dotted(spec["overrides"], profile)
    task_overrides = {}
    for task, layer in (spec["task_overrides"] or {}).items():
        if task not in tasks:
            raise ConfigError(f"{path}: task_overrides: '{task}' is not a task of this experiment "
                              f"({', '.join(tasks)})")
        if not isinstance(layer, dict):
            raise ConfigError(f"{path}: task_overrides.{task}: expected a mapping of config keys")
        task_overrides[str(task)] = _dotted(layer, profile)
    common = dict(name=name, description=spec["description"], kind=spec["kind"], path=path, profile=profile,
                  tasks=tasks, overrides=overrides_dotted, task_overrides=task_overrides,
                  cli_overrides=list(overrides), data_dir=data_dir,
                  work_dir=work_dir, tracking_uri=tracking_uri)

    if spec["kind"] == "vocab":
        for key in ("models", "vary", "seeds"):
            if key in written:
                raise ConfigError(f"{path}: '{key}' does not apply to kind: vocab (computed from the staged "
                                  "vocabularies, no runs)")
        v = spec["vocab"]
        if v["table"] not in VOCAB_TABLES:
            raise ConfigError(f"{path}: vocab.table: unknown '{v['table']}'; known: {', '.join(VOCAB_TABLES)}")
        layout = results.TableLayout(title=table["title"] or name, rows=table["rows"], columns=table["columns"],
                                     caption=table["caption"])
        return Experiment(**common, models={}, axes=[], seeds_by_task={t: [] for t in tasks}, layout=layout,
                          vocab=VocabDef(v["table"], tuple(v["vocabs"]), v["general"], v["domain"]))
    if "vocab" in written:
        raise ConfigError(f"{path}: 'vocab' applies to kind: vocab only")

    if not written.get("models"):
        raise ConfigError(f"{path}: models: name at least one model (name_or_path: ..., pretrain: {{...}} or "
                          "use: NAME for experiments/models/NAME.yaml)")
    models = {str(n): _model(str(n), entry or {}, path, profile) for n, entry in written["models"].items()}
    _check_inits(models, path)
    if not any(m.finetune for m in models.values()):
        raise ConfigError(f"{path}: models: every model has finetune: false; nothing to fine-tune")
    axes = [_axis(str(n), axis, path, profile) for n, axis in (written.get("vary") or {}).items()]
    seeds = _seeds(spec["seeds"], profile, tasks, path)
    layout = _layout(table, name, models, tasks, axes, path)
    experiment = Experiment(**common, models=models, axes=axes, seeds_by_task=seeds, layout=layout, vocab=None)
    _check_configs(experiment)
    return experiment


def _check_inits(models: dict[str, ModelDef], path: Path) -> None:
    from lightning_modules.models import resolve_model_dir

    for name, model in models.items():
        if model.init is None or model.init in models:
            continue
        try:
            resolve_model_dir(model.init)
        except ConfigError as e:
            raise ConfigError(f"{path}: models.{name}.init: '{model.init}' is neither a model of this experiment "
                              f"({', '.join(models)}) nor an existing one ({e})") from None
    for name in models:  # cycles
        seen, current = [name], models[name].init
        while current in models:
            if current in seen:
                raise ConfigError(f"{path}: models: `init` cycle {' -> '.join([*seen, current])}")
            seen.append(current)
            current = models[current].init


def _axis_values(axis: str, models: dict[str, ModelDef], tasks: list[str], axes: list[Axis]) -> list[str]:
    if axis == "task":
        return list(tasks)
    if axis == "model":
        return [n for n, m in models.items() if m.finetune]
    return list(next(a for a in axes if a.name == axis).values)


def _layout(table: dict[str, Any], name: str, models: dict[str, ModelDef], tasks: list[str], axes: list[Axis],
            path: Path) -> results.TableLayout:
    names = [*AXES_BUILTIN, *[a.name for a in axes]]
    row_axis, column_axis = table["rows"], table["columns"]
    for key in ("rows", "columns"):
        if table[key] not in names:
            raise ConfigError(f"{path}: table.{key}: unknown axis '{table[key]}'; axes: {', '.join(names)}")
    if row_axis == column_axis:
        raise ConfigError(f"{path}: table.rows and table.columns are both '{row_axis}'")
    for axis in names:
        if axis not in (row_axis, column_axis) and len(_axis_values(axis, models, tasks, axes)) > 1:
            raise ConfigError(f"{path}: axis '{axis}' has several values but is neither table.rows nor "
                              f"table.columns ({row_axis} x {column_axis})")
    rows = _axis_values(row_axis, models, tasks, axes)
    columns = _axis_values(column_axis, models, tasks, axes)
    if table["baseline"] is not None and table["baseline"] not in columns:
        raise ConfigError(f"{path}: table.baseline: '{table['baseline']}' is not a column ({', '.join(columns)})")
    for key, valid in (("row_order", rows), ("column_order", columns)):
        for value in table[key]:
            if value not in valid:
                raise ConfigError(f"{path}: table.{key}: '{value}' is not one of {', '.join(valid)}")
    paper_rows = [*rows, BLURB_ROW] if table["blurb_row"] else list(rows)
    if row_axis == "task":  # a task this profile does not plan (e.g. micro's subset) is left out
        from datamodules.registry import dataset_names

        table = {**table, "paper": {r: v for r, v in table["paper"].items()
                                    if r in paper_rows or r not in dataset_names()}}
    for row, by_column in table["paper"].items():
        if row not in paper_rows:
            raise ConfigError(f"{path}: table.paper: '{row}' is not a row ({', '.join(paper_rows)})")
        for column in by_column:
            if column not in columns:
                raise ConfigError(f"{path}: table.paper.{row}: '{column}' is not a column ({', '.join(columns)})")
    labels = dict(table["labels"])
    if column_axis == "model":
        labels = {**{n: m.label for n, m in models.items() if m.finetune and m.label != n}, **labels}
    for column in labels:
        if column not in columns:
            raise ConfigError(f"{path}: table.labels: '{column}' is not a column ({', '.join(columns)})")
    if table["blurb_row"] and row_axis != "task":
        raise ConfigError(f"{path}: table.blurb_row needs rows: task")
    return results.TableLayout(
        title=table["title"] or name, rows=row_axis, columns=column_axis, metric=table["metric"],
        baseline=table["baseline"], row_order=tuple(table["row_order"]) or tuple(rows),
        column_order=tuple(table["column_order"]) or tuple(columns), column_labels=labels,
        paper={str(r): {str(c): float(v) for c, v in cols.items()} for r, cols in table["paper"].items()},
        blurb_row=table["blurb_row"], caption=table["caption"])


def _check_configs(experiment: Experiment) -> None:
    """Build every config once: a bad key or an invalid variant fails here, naming the file."""
    from ablations.variants import check_variants
    from datamodules.registry import get_dataset

    from ablations.pretrain import _check as check_pretrain

    for name in experiment.stage_order():
        init = experiment.models[name].init
        if init in experiment.models:
            init = experiment.models[init].name_or_path or "scratch"
        cfg = experiment.stage_config(name, init or "scratch")
        try:
            check_pretrain(cfg)
        except BioablateError as e:
            raise ConfigError(f"{experiment.models[name].source}: models.{name}: {e}") from None
    seen: set[tuple] = set()
    for cell in experiment.cells():
        # variants depend on the task and the finetune.* keys, not on the model's weights
        key = (tuple(experiment.models[cell.model].overrides.items()), cell.task, cell.overrides)
        if key in seen:
            continue
        seen.add(key)
        cfg = experiment.finetune_config(cell, RANDOM_BERT)
        try:
            check_variants(cfg.finetune, get_dataset(cell.task))
        except BioablateError as e:
            raise ConfigError(f"{experiment.path}: {cell.model} on {cell.task} with "
                              f"{', '.join(label for _, label in cell.variant) or 'no variant'}: {e}") from None


def experiment_files() -> list[Path]:
    return sorted(EXPERIMENTS_DIR.glob("*.yaml"))


# ---------------------------------------------------------------------------------------------------
# What the tracking store holds for an experiment


def _one_line(text: str) -> str:
    return " ".join(str(text).split())[:300]


class Store:
    """The runs of a tracking store by (MLflow experiment, fingerprint), read in bulk: one query per
    MLflow experiment rather than one per planned run. The newest run of a fingerprint wins, as in
    `Tracker.find`."""

    def __init__(self, tracking_uri: str):
        from mlflow.tracking import MlflowClient

        self.tracking_uri = tracking_uri
        self.client = MlflowClient(tracking_uri)
        self._runs: dict[str, dict[str, Any]] = {}

    def runs(self, experiment_name: str) -> dict[str, Any]:
        if experiment_name not in self._runs:
            by_fp: dict[str, Any] = {}
            experiment = self.client.get_experiment_by_name(experiment_name)
            if experiment is not None:
                token = None
                while True:
                    page = self.client.search_runs([experiment.experiment_id], "tags.fingerprint != ''",
                                                   order_by=["attributes.start_time DESC"], max_results=1000,
                                                   page_token=token)
                    for run in page:
                        by_fp.setdefault(run.data.tags["fingerprint"], run)
                    token = page.token
                    if not token:
                        break
            self._runs[experiment_name] = by_fp
        return self._runs[experiment_name]

    def find(self, experiment_name: str, fingerprint: str) -> Any | None:
        return self.runs(experiment_name).get(fingerprint)

    def forget(self, experiment_name: str) -> None:
        """Read that experiment again on the next `find` (after runs were added)."""
        self._runs.pop(experiment_name, None)


def run_status(run: Any | None) -> tuple[str, Optional[str]]:
    """A stored run's results status and the reason it is not finished."""
    if run is None:
        return results.NOT_RUN, "never started: run the experiment"
    status = run.info.status
    if status == "FINISHED":
        return results.FINISHED, None
    if status == "FAILED":
        return results.FAILED, _one_line(run.data.tags.get("error", "failed (no error recorded)"))
    if status == "KILLED":
        return results.RUNNING, f"stopped ({run.data.tags.get('stopped', 'killed')}): rerun the experiment"
    return results.RUNNING, "started and not finished (still running, or killed: rerun the experiment)"


@dataclass
class StageState:
    """A pretraining stage as the store has it."""

    name: str
    status: str  # results.FINISHED / FAILED / RUNNING / NOT_RUN / BLOCKED
    reason: Optional[str] = None
    fingerprint: Optional[str] = None
    model_dir: Optional[Path] = None
    run_id: Optional[str] = None


def stage_init(experiment: Experiment, name: str, states: dict[str, StageState]) -> tuple[Optional[str], Optional[str]]:
    """(what stage `name` continues from: a directory, a named model or `scratch`; None with the reason
    when that is a stage of this experiment that has not finished)."""
    init = experiment.models[name].init
    if init is None:
        return "scratch", None
    if init not in experiment.models:
        return init, None
    if not experiment.models[init].is_stage:
        return experiment.models[init].name_or_path, None
    state = states.get(init)
    if state is None or state.status != results.FINISHED:
        return None, f"continues from pretraining stage '{init}', which {_unfinished(state)}"
    return str(state.model_dir), None


def _unfinished(state: Optional[StageState]) -> str:
    """How a stage that others wait for stands, for their BLOCKED reason (its own error is on its own row)."""
    if state is not None and state.status == results.FAILED:
        return "failed"
    if state is not None and state.status == results.BLOCKED:
        return "is blocked"
    return "has not finished"


def stage_state(experiment: Experiment, name: str, states: dict[str, StageState], store: Store) -> StageState:
    from ablations.pretrain import identify as identify_pretrain

    init, blocked = stage_init(experiment, name, states)
    if init is None:
        return StageState(name, results.BLOCKED, blocked)
    identity = identify_pretrain(experiment.stage_config(name, init))
    if identity is None:
        return StageState(name, results.NOT_RUN, f"pretraining stage '{name}' not run yet (its vocabulary is "
                                                 "trained by the run)")
    fingerprint, model_dir = identity
    run = store.find(PRETRAIN_EXPERIMENT, fingerprint)
    status, reason = run_status(run)
    run_id = run.info.run_id if run is not None else None
    if status == results.FINISHED and not (model_dir / "config.json").is_file():
        status, reason = results.NOT_RUN, f"model directory {model_dir} is missing: rerun the experiment"
    if status != results.FINISHED:
        reason = f"pretraining stage '{name}': {reason}"
    return StageState(name, status, reason, fingerprint, model_dir, run_id)


def stage_states(experiment: Experiment, store: Store) -> dict[str, StageState]:
    states: dict[str, StageState] = {}
    for name in experiment.stage_order():
        states[name] = stage_state(experiment, name, states, store)
    return states


def model_for(experiment: Experiment, model: str, states: dict[str, StageState]) -> tuple[Optional[str], Optional[str]]:
    """(the model a cell fine-tunes: a name or directory; None with the reason while its stage has not finished)."""
    definition = experiment.models[model]
    if not definition.is_stage:
        return definition.name_or_path, None
    state = states[model]
    if state.status != results.FINISHED:
        return None, f"needs pretraining stage '{model}', which {_unfinished(state)}"
    return str(state.model_dir), None


def cell_run(experiment: Experiment, cell: Cell, states: dict[str, StageState], store: Store) -> results.CellRun:
    """A planned cell as the store has it (nothing is run)."""
    from ablations.finetune import identify

    base = dict(row=cell.row, column=cell.column, task=cell.task, seed=cell.seed)
    model_path, blocked = model_for(experiment, cell.model, states)
    if model_path is None:
        return results.CellRun(**base, status=results.BLOCKED, reason=blocked)
    cfg = experiment.finetune_config(cell, model_path)
    fingerprint = identify(cfg)[3]
    run = store.find(cfg.experiment_name, fingerprint)
    status, reason = run_status(run)
    value = wall = None
    if run is not None:
        if status == results.FINISHED:
            metric = experiment.layout.metric
            value = run.data.metrics.get(f"test/{metric}")
            if value is None:
                status, reason = results.FAILED, f"finished run has no test/{metric} metric"
        if run.info.end_time and run.info.start_time:
            wall = (run.info.end_time - run.info.start_time) / 1000
    return results.CellRun(**base, status=status, value=value, reason=reason,
                           run_id=run.info.run_id if run is not None else None, fingerprint=fingerprint,
                           wall_time_s=wall)


def collect(experiment: Experiment, tracking_uri: Optional[str] = None) -> list[results.CellRun]:
    """One CellRun per planned fine-tuning run, found in the store by fingerprint (nothing is run):
    FINISHED with its test metric, FAILED with its error, RUNNING, NOT_RUN, or BLOCKED while its
    pretraining stage has not finished."""
    if experiment.kind != "finetune":
        raise ConfigError(f"{experiment.path}: kind {experiment.kind} has no runs to collect")
    store = Store(tracking_uri or experiment.store()[1])
    states = stage_states(experiment, store)
    return [cell_run(experiment, cell, states, store) for cell in experiment.cells()]


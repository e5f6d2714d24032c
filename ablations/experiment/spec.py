"""The experiment YAML (experiments/*.yaml, one per paper table; annotated in docs/experiments.md): its
schema, and `load_experiment`, which validates it through `bioablate_core.schema` and checks everything it names
(tasks, models, variants, the table layout, every run's config) before anything runs. The `models`
section is read in model_entries.py.

    experiment = load_experiment("experiments/table13_tagging.yaml", profile="micro")
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from omegaconf import MISSING, OmegaConf

from ablations import results
from ablations.config import NON_RESULT_KEYS, PROFILES, RunConfig
from ablations.experiment.checks import check_configs, check_grid_size
from ablations.experiment.definition import Axis, Experiment, VocabDef
from ablations.experiment.layout import AXES_BUILTIN, table_layout, table_text
from ablations.experiment.model_entries import ModelSchema, read_models
from ablations.experiment.values import DEFAULT_ONLY, UNSET, dotted, per_profile
from bioablate_core.counts import MAX_FOLDS, MAX_SEEDS, check_count
from bioablate_core.errors import BioablateError, ConfigError
from bioablate_core.names import unsafe_name
from bioablate_core.packaged import packaged_dir, resolve_config
from bioablate_core.schema import load_yaml, validate

KINDS = ("finetune", "vocab")
VOCAB_TABLES = ("terms", "lengths")  # Table 1 (term splits), Table 8 (input lengths)
MAX_RUNS = 5000  # fine-tuning runs an experiment may plan unless --max-runs says otherwise (README)
STORE_KEYS = ("tracking_uri", "work_dir")  # given on the command line: the runs and the table share one store


# ---------------------------------------------------------------------------------------------------
# The YAML schema (OmegaConf structured configs: unknown keys are errors)


@dataclass
class AxisSchema:
    """A `vary` axis: `values` is a list (each value of `key`) or a mapping label -> value, where a value
    is a scalar for `key` or a mapping of config keys."""

    key: Optional[str] = None
    values: Any = MISSING


@dataclass
class TableSchema:
    title: Any = ""  # text, or per profile ({micro: ..., default: ...})
    rows: str = "task"  # task | model | a vary axis
    columns: str = "model"
    metric: str = "score"
    # several test metrics as an axis (`rows: metric` or `columns: metric`): Bio-ELECTRA's per-class P/R/F1
    metrics: List[str] = field(default_factory=list)
    baseline: Optional[str] = None  # a column value: the others are tested against it
    row_order: List[str] = field(default_factory=list)
    column_order: List[str] = field(default_factory=list)
    labels: Dict[str, str] = field(default_factory=dict)  # column value -> header
    paper: Dict[str, Dict[str, float]] = field(default_factory=dict)  # paper[row][column], as printed
    paper_source: str = "Gu et al."  # who printed them, as the table's notes name it ("Lee et al., Table 5")
    blurb_row: bool = False
    # text under the title, or per profile ({mini: "...", default: "..."}): a profile the mapping does not
    # name gets none. Every table also gets a line written from its runs' resolved configs (model, epochs, ...).
    caption: Any = ""
    # how the table's significance marks are corrected for many comparisons (statsmodels.stats.multitest)
    correction: str = "holm"
    cost: bool = False  # each column's compute (FLOPs, device-hours, peak memory) beside its scores
    # the paper's standard deviations, as printed (paper_std[row][column]), where it gives them; elsewhere a gap
    # between two of its numbers of at most paper_noise points is read as a tie (ablations/tables/agreement.py)
    paper_std: Dict[str, Dict[str, float]] = field(default_factory=dict)
    paper_noise: float = 0.5
    differences: bool = False  # each cell's difference to the baseline with its interval, in the cells too


@dataclass
class VocabSchema:
    """kind: vocab -- computed from the staged vocabularies (ablations/tables/vocab_compare.py), no runs."""

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
    datasets: List[str] = field(default_factory=list)  # user dataset YAML files (relative to this file)
    tasks: Any = "blurb"  # a list of dataset names (BLURB's or `datasets`'), or `blurb` (all 13); may be per-profile
    vary: Dict[str, AxisSchema] = field(default_factory=dict)
    seeds: Any = 1  # count | list | per-profile {micro: 1, mini: 3, base: {default: 5, biosses: 10}}
    # tasks with cross-validation folds (biobert-gad, euadr): `all` of them, or the first N; may be
    # per-profile ({micro: 2, default: all}). Every fold is a run of its own; a cell averages its folds.
    folds: Any = "all"
    overrides: Dict[str, Any] = field(default_factory=dict)  # config keys for every run (stages too)
    task_overrides: Dict[str, Any] = field(default_factory=dict)  # task -> config keys for its runs
    table: TableSchema = field(default_factory=TableSchema)
    vocab: VocabSchema = field(default_factory=VocabSchema)


# ---------------------------------------------------------------------------------------------------
# Loading


def _axis(name: str, raw: dict[str, Any], path: Path, profile: str) -> Axis:
    where = f"{path}: vary.{name}"
    if name in AXES_BUILTIN:
        raise ConfigError(f"{where}: '{name}' is a built-in axis; name the vary axis differently")
    key, values = raw.get("key"), per_profile(raw.get("values"), profile)
    if isinstance(values, list) and values:  # an empty axis gives a table of no cells
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
            keys = dotted(value, profile)
        elif key is None:
            raise ConfigError(f"{where}.values.{label}: a scalar value needs the axis `key`")
        else:
            keys = {key: value}
        if key is not None and isinstance(value, dict):
            keys = {(k if "." in k or k in RunConfig.__dataclass_fields__ else f"{key}.{k}"): v
                    for k, v in keys.items()}
        bad = [k for k in keys if k.startswith("pretrain.") or k in ("seed", "task")]
        if bad:
            raise ConfigError(f"{where}: '{bad[0]}' cannot vary per fine-tuning run; pretraining "
                              "settings belong to `models` (one model per setting), seeds to `seeds`")
        inert = [k for k in keys if k in NON_RESULT_KEYS]
        if inert:  # every column would be the same runs
            raise ConfigError(f"{where}: '{inert[0]}' does not change a run's result, so its columns would be "
                              "the same runs; vary a key that does (bioablate list keys)")
        out[label] = keys
    return Axis(name, out)


def _seeds(raw: Any, profile: str, tasks: list[str], path: Path) -> dict[str, list[int]]:
    value = per_profile(raw, profile)
    if value is UNSET:
        raise ConfigError(f"{path}: seeds: no value for profile '{profile}' (add it, or a `default`)")

    def as_list(v: Any, where: str) -> list[int]:
        if isinstance(v, bool) or not (isinstance(v, int) or (isinstance(v, list) and v and
                                                             all(isinstance(s, int) for s in v))):
            raise ConfigError(f"{path}: {where}: expected a number of seeds or a list of seeds, got {v!r}")
        if isinstance(v, int):  # bounded before the list is built: `seeds: 1000000000` is a typo
            return list(range(1, check_count(v, f"{path}: {where}", most=MAX_SEEDS,
                                             fix="give the number of seeds per cell") + 1))
        check_count(len(v), f"{path}: {where}: the number of seeds", most=MAX_SEEDS)
        repeated = sorted({s for s in v if v.count(s) > 1})
        if repeated:  # the same run twice: one fingerprint, one run, counted as two seeds
            raise ConfigError(f"{path}: {where}: seed {repeated[0]} is listed twice")
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


def _folds(raw: Any, profile: str, tasks: list[str], path: Path, written: bool) -> dict[str, list[int]]:
    """Task -> the folds its cells run (the first N, or all), for the tasks that have folds."""
    from datamodules.registry import get_dataset

    value = per_profile(raw, profile)
    value = "all" if value is UNSET else value
    if value != "all" and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{path}: folds: expected `all` or a number of folds (at least 1), got {value!r}")
    if value != "all":
        check_count(value, f"{path}: folds", most=MAX_FOLDS, fix="or use `all`")
    counts = {t: get_dataset(t).fold_count for t in tasks if get_dataset(t).fold_count}
    if written and not counts:
        raise ConfigError(f"{path}: folds: no task of this experiment has folds ({', '.join(tasks)}); "
                          "remove the key")
    too_few = [f"{t} ({n})" for t, n in counts.items() if value != "all" and n < value]
    if too_few:
        raise ConfigError(f"{path}: folds: {value} folds, but {', '.join(too_few)} has fewer; "
                          "lower the number or use `all`")
    return {t: list(range(1, (n if value == "all" else value) + 1)) for t, n in counts.items()}


def _register_datasets(files: list[str], path: Path) -> list[str]:
    """Register the experiment's user datasets (paths relative to the experiment file); returns their
    absolute paths, which every run's `datasets` config key gets, so a run registers them itself."""
    from datamodules.custom import register_from_yaml

    absolute = []
    for i, file in enumerate(files):
        dataset_file = (path.parent / Path(file).expanduser()).resolve()
        try:
            register_from_yaml(dataset_file)
        except BioablateError as e:
            raise ConfigError(f"{path}: datasets[{i}]: {e}") from None
        absolute.append(str(dataset_file))
    return absolute


def _tasks(raw: Any, path: Path) -> list[str]:
    from datamodules.blurb import BLURB_DATASETS
    from datamodules.registry import get_dataset

    if raw is UNSET:
        raise ConfigError(f"{path}: tasks: no value for this profile (add it, or a `default`)")
    if raw == "blurb":  # not the user datasets registered beside them
        return [spec.name for spec in BLURB_DATASETS]
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{path}: tasks: expected a list of dataset names or `blurb` (all 13)")
    for name in raw:
        try:
            get_dataset(str(name))
        except BioablateError as e:
            raise ConfigError(f"{path}: tasks: {e}") from None
    repeated = [t for i, t in enumerate(map(str, raw)) if t in map(str, raw[:i])]
    if repeated:  # one cell's runs, counted twice: a narrower interval and twice the compute, for nothing
        raise ConfigError(f"{path}: tasks: '{repeated[0]}' is listed twice; list each task once")
    return [str(t) for t in raw]


def load_experiment(path: Path | str, profile: Optional[str] = None, overrides: list[str] | tuple = (),
                    data_dir: Optional[str] = None, work_dir: Optional[str] = None,
                    tracking_uri: Optional[str] = None, max_runs: Optional[int] = MAX_RUNS) -> Experiment:
    """Read and validate an experiment YAML for `profile` (default: the YAML's). Every mistake is a
    one-line ConfigError naming the file and the key, raised before anything runs. `path` may also be a
    packaged experiment's name (`quickstart`). A grid of more than `max_runs` fine-tuning runs is refused
    before any of them is planned (None: no limit)."""
    path = resolve_config(path, "experiment")
    raw = load_yaml(path)
    spec = OmegaConf.to_container(validate(path, raw, ExperimentSchema), resolve=True)
    written = OmegaConf.to_container(raw, resolve=True)  # as written: without the schema's defaults
    profile = profile or spec["profile"]
    if profile not in PROFILES:
        raise ConfigError(f"{path}: unknown profile '{profile}'; known: {', '.join(PROFILES)}")
    if spec["kind"] not in KINDS:
        raise ConfigError(f"{path}: kind: unknown kind '{spec['kind']}'; known: {', '.join(KINDS)}")
    if not written:
        raise ConfigError(f"{path}: the file is empty; an experiment names at least `name`, `models`, `tasks` "
                          "and `table` (see docs/experiments.md, or `bioablate list experiments` for examples)")
    if spec["name"] == MISSING:  # the schema's "???": OmegaConf keeps it as a string
        raise ConfigError(f"{path}: name: missing; give the experiment a name (its tables go to "
                          "<work-dir>/tables/<name>/)")
    name, table = str(spec["name"]), spec["table"]
    problem = unsafe_name(name, "my_experiment")
    if problem:
        raise ConfigError(f"{path}: name: {problem} (tables are written to <work-dir>/tables/<name>/)")
    dataset_files = _register_datasets(spec["datasets"], path)
    tasks = _tasks(per_profile(spec["tasks"], profile), path)
    overrides_dotted = dotted(spec["overrides"], profile)
    for key in STORE_KEYS:
        if key in overrides_dotted or any(key in (layer or {}) for layer in (spec["task_overrides"] or {}).values()):
            # runs would go to one store and the table be read from another
            raise ConfigError(f"{path}: overrides: '{key}' is where runs are kept, not part of the experiment; "
                              f"pass --{key.replace('_', '-')} on the command line")
    if dataset_files:
        overrides_dotted["datasets"] = [*overrides_dotted.get("datasets", []), *dataset_files]
    task_overrides = {}
    for task, layer in (spec["task_overrides"] or {}).items():
        if task not in tasks:
            raise ConfigError(f"{path}: task_overrides: '{task}' is not a task of this experiment "
                              f"({', '.join(tasks)})")
        if not isinstance(layer, dict):
            raise ConfigError(f"{path}: task_overrides.{task}: expected a mapping of config keys")
        task_overrides[str(task)] = dotted(layer, profile)
    common = dict(name=name, description=spec["description"], kind=spec["kind"], path=path, profile=profile,
                  tasks=tasks, overrides=overrides_dotted, task_overrides=task_overrides,
                  cli_overrides=list(overrides), data_dir=data_dir,
                  work_dir=work_dir, tracking_uri=tracking_uri)

    if spec["kind"] == "vocab":
        for key in ("models", "vary", "seeds", "folds"):
            if key in written:
                raise ConfigError(f"{path}: '{key}' does not apply to kind: vocab (computed from the staged "
                                  "vocabularies, no runs)")
        v = spec["vocab"]
        if v["table"] not in VOCAB_TABLES:
            raise ConfigError(f"{path}: vocab.table: unknown '{v['table']}'; known: {', '.join(VOCAB_TABLES)}")
        layout = results.TableLayout(title=table_text(table, "title", profile, path) or name, rows=table["rows"],
                                     columns=table["columns"], caption=table_text(table, "caption", profile, path))
        return Experiment(**common, models={}, axes=[], seeds_by_task={t: [] for t in tasks}, layout=layout,
                          vocab=VocabDef(v["table"], tuple(v["vocabs"]), v["general"], v["domain"]))
    if "vocab" in written:
        raise ConfigError(f"{path}: 'vocab' applies to kind: vocab only")

    models = read_models(written.get("models"), path, profile)
    axes = [_axis(str(n), axis, path, profile) for n, axis in (written.get("vary") or {}).items()]
    seeds = _seeds(spec["seeds"], profile, tasks, path)
    folds = _folds(spec["folds"], profile, tasks, path, "folds" in written)
    check_grid_size(path, models, tasks, axes, seeds, max_runs, folds)
    layout = table_layout(table, name, models, tasks, axes, path, profile)
    experiment = Experiment(**common, models=models, axes=axes, seeds_by_task=seeds, layout=layout, vocab=None,
                            folds_by_task=folds)
    check_configs(experiment)
    return experiment


def experiment_files() -> list[Path]:
    """The packaged experiment YAMLs (`bioablate list experiments`)."""
    return sorted(packaged_dir("experiment").glob("*.yaml"))


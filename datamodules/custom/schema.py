"""The keys of a user dataset YAML file (`UserDatasetFile`, checked by bioablate_core.schema) and what each task
type needs from it (`KINDS`, read from the task types' user forms, datamodules/task_types.py): the instance
fields, the default TSV columns, the metrics that fit.

`check` turns a validated file into a `Definition`, refusing every mistake that does not need the data
(a missing or unknown key, a label key not among `labels`, a metric that cannot score the task type) as
one ConfigError line naming the file and the key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional

from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf

from bioablate_core.errors import ConfigError, UnknownNameError
from bioablate_core.names import unsafe_name
from bioablate_core.registry import Registry
from bioablate_core.schema import bounded, load_yaml, validate
from datamodules.custom.layouts import FileLayout, split_names
from datamodules.custom.protocol import Protocol
from datamodules.custom.protocol import parse as parse_protocol
from datamodules.spec import MAX_SEQUENCE, MIN_SEQUENCE
from datamodules.task_types import TASK_TYPES, TaskType, UserForm

FORMATS = ("conll", "jsonl", "tsv", "squad", "bioasq-golden")
# Extractive QA files: whole-file formats of questions, contexts and answer spans (datamodules/custom/qa.py)
QA_FORMATS = ("squad", "bioasq-golden")
# `tagging:` of tagged files -> the tag prefixes besides O it allows (auto: any, the scheme is detected;
# datamodules/custom/tagged.py). bio, io as datamodules/tagging.py names them; iobes (BIOES) and bilou are
# the two spellings of its bioul, as corpora ship them.
TAGGINGS = {"auto": "BIESLU", "bio": "BI", "io": "I", "iobes": "BIES", "bilou": "BILU"}


@dataclass
class SplitFiles:
    """Each a file name, or (tsv) a mapping {path, header, columns} with the file's own layout (layouts.py)."""

    train: Any = None
    dev: Any = None  # none: dev is carved from train (`dev:`), or there is none (`dev: none`)
    test: Any = None


@dataclass
class UserDatasetFile:
    """The keys of a user dataset YAML file (README, "Your own dataset, no Python", shows each type)."""

    name: str = MISSING
    format: str = MISSING  # conll | jsonl | tsv | squad | bioasq-golden
    task_type: Optional[str] = None  # a name in KINDS; default: ner for conll, classification for tsv
    path: str = MISSING  # data folder, relative to the YAML file
    files: SplitFiles = field(default_factory=SplitFiles)
    # without files.dev: {fraction: 0.1, seed: 13} (the default: a seeded share of train), or `none` (no dev:
    # train finetune.epochs epochs and test the last); datamodules/custom/protocol.py
    dev: Any = None
    # cross-validation, in place of `files`: a list of {train: FILE, test: FILE}, or {k: 10, seed: 13, file: FILE}
    folds: Any = None
    # entity types or classes; ner: default [entity_type], else (ner, pico) the types of the training split
    labels: Optional[List[str]] = None
    multi_label: bool = False  # classification: each instance has a list of labels
    metric: Optional[str] = None  # default: the task type's first metric (see KINDS)
    negative_label: Optional[str] = None  # re: the no-relation class, left out of micro F1 (ChemProt, DDI)
    positive_label: Optional[str] = None  # re / classification: score the F1 of this class only (GAD)
    entity_type: Optional[str] = None  # ner/pico: the type of untyped tags (B, I)
    collapse_type: Optional[str] = None  # ner/pico: rename every entity type to this one, as BLURB does
    tagging: str = "auto"  # ner/pico: the tag scheme of the files, one of TAGGINGS (auto: detected)
    columns: Dict[str, int] = field(default_factory=dict)  # conll/tsv: field -> 0-based column (-1: last)
    header: bool = False  # tsv: the first line of each file is a header
    fields: Dict[str, str] = field(default_factory=dict)  # jsonl: field -> the key in each line
    entity_types: Optional[List[str]] = None  # re without offsets: [head, tail] types, as @TYPE$ in text
    label_separator: str = ","  # multi-label tsv: between the labels of one line
    max_length: int = bounded(512, ge=MIN_SEQUENCE, le=MAX_SEQUENCE)  # input tokens per instance
                                                                      # (finetune.max_length: null)


@dataclass(frozen=True)
class Kind:
    """A `task_type:` of the YAML file: one user form of a task type."""

    task_type: str  # DatasetSpec.task_type
    entry: TaskType
    form: UserForm

    @property
    def inputs(self) -> str:
        """The input form its records build (datamodules/custom/records.py)."""
        return self.form.inputs or self.entry.inputs


KINDS: Registry[Kind] = Registry("task_type")
for _task_type, _entry in TASK_TYPES.items():
    for _name, _form in _entry.forms.items():
        KINDS.register(_name, Kind(_task_type, _entry, _form))

# jsonl names its task_type; the QA formats hold extractive QA only
DEFAULT_KIND = {"conll": "ner", "tsv": "classification", "squad": "qa-extractive", "bioasq-golden": "qa-extractive"}
# a QA format's default metric: SQuAD's per question x context, BioASQ's per question over its snippets
QA_DEFAULT_METRIC = {"squad": "squad_v1", "bioasq-golden": "bioasq_factoid"}


@dataclass(frozen=True)
class Definition:
    """A checked user dataset file: everything the readers and the DatasetSpec need."""

    source: Path  # the YAML file
    name: str
    format: str
    kind_name: str
    kind: Kind
    root: Path
    files: dict[str, str]  # split -> file, relative to root (the splits the YAML names)
    protocol: Protocol  # dev carved or none, folds (datamodules/custom/protocol.py)
    labels: tuple[str, ...]  # () while `labels_from_train` has not been read (register_from_yaml reads it)
    labels_from_train: bool  # a tagged dataset without `labels`: its entity types are the training split's
    multi_label: bool
    metric: str
    metric_args: dict[str, Any]
    entity_type: Optional[str]
    collapse_type: Optional[str]
    tagging: str  # ner/pico: a name in TAGGINGS
    columns: dict[str, int]  # conll/tsv: field -> column
    header: bool
    fields: dict[str, str]  # jsonl: field -> key in the line
    entity_types: Optional[tuple[str, str]]
    label_separator: str
    max_length: int
    normalized: str  # the file's keys with defaults filled in, as sorted JSON: part of the fingerprint
    # tsv: the files given as {path, header, columns}, by name (the others are read with header, columns)
    layouts: dict[str, FileLayout] = field(default_factory=dict)

    def layout(self, name: str) -> FileLayout:
        """How file `name` is read: its own layout, else the dataset's header and columns."""
        return self.layouts.get(name) or FileLayout(self.header, self.columns)


def load_definition(path: Path) -> Definition:
    """Read and check a user dataset YAML file (one ConfigError line naming the file and the key)."""
    if not path.is_file():
        raise ConfigError(f"dataset file not found: {path}")
    raw = load_yaml(path)
    for key in ("labels", "negative_label", "positive_label", "entity_type", "collapse_type", "entity_types"):
        value = raw.get(key)
        if any(isinstance(v, bool) for v in (value if isinstance(value, ListConfig) else [value])):
            raise ConfigError(f"{path}: {key}: YAML reads yes/no/true/false/on/off as booleans, not as labels; "
                              "quote them, e.g. ['yes', 'no']")
    return check(path, validate(path, raw, UserDatasetFile))


def check(path: Path, cfg: DictConfig) -> Definition:
    """A validated UserDatasetFile -> Definition, or one ConfigError line naming `path` and the key."""
    def fail(message: str) -> ConfigError:
        return ConfigError(f"{path}: {message}")

    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise fail(f"missing key '{missing[0]}' (README, 'Your own dataset, no Python', shows every key)")
    problem = unsafe_name(str(cfg.name), "my_dataset")
    if problem:  # it names runs, tags and folders: `../../evil/x` or `my@fold3` (a fold's name) cannot
        raise fail(f"name: {problem}")
    if cfg.format not in FORMATS:
        raise fail(str(UnknownNameError("format", cfg.format, FORMATS)))
    kind_name = cfg.task_type or DEFAULT_KIND.get(cfg.format)
    if kind_name is None:
        raise fail(f"missing key 'task_type' (format {cfg.format} needs one of: {', '.join(KINDS.names())})")
    try:
        kind = KINDS.get(kind_name)
    except UnknownNameError as e:
        raise fail(str(e)) from None
    task = kind.entry
    if (cfg.format in QA_FORMATS) != task.spans:
        raise fail(f"task_type {_names(lambda t: t.spans)} is read from format {' or '.join(QA_FORMATS)}, and "
                   f"those formats hold only it; not format {cfg.format} with task_type {kind_name}")
    if cfg.format == "conll" and not task.tagged:
        raise fail(f"format conll holds tagged tokens (task_type {_names(lambda t: t.tagged, ' or ')}), not "
                   f"{kind_name}; use jsonl or tsv")
    if cfg.format == "tsv" and task.tagged:
        raise fail(f"task_type {kind_name} is read from format conll or jsonl, not tsv")
    if cfg.header and cfg.format != "tsv":
        raise fail(f"header applies to format tsv; a {cfg.format} file has none")
    if cfg.multi_label and not kind.form.multi_label:
        raise fail(f"multi_label applies to task_type {', '.join(KINDS.names(lambda k: k.form.multi_label))} only")
    if cfg.entity_types is not None and (not task.relation or len(cfg.entity_types) != 2):
        raise fail(f"entity_types: give [head type, tail type] for task_type {_names(lambda t: t.relation)} "
                   "without offsets (the text holds @HEAD$ and @TAIL$)")
    if cfg.tagging not in TAGGINGS:
        raise fail(str(UnknownNameError("tagging", cfg.tagging, TAGGINGS)))
    if cfg.tagging != "auto" and not task.tagged:
        raise fail(f"tagging applies to task_type {_names(lambda t: t.tagged, ' or ')}, not {kind_name}; remove it")

    labels = _labels(cfg, kind, kind_name, fail)
    columns, fields = _field_maps(cfg, kind, kind_name, fail)
    metric, metric_args = _metric(cfg, kind, kind_name, labels, fail)
    container = OmegaConf.to_container(cfg, resolve=True)
    # not part of the fingerprint: a declared scheme only refuses tags outside it; the tags it accepts
    # become the same spans as detected ones, so declaring it keeps finding the runs made without it
    container.pop("tagging")
    given = {split: entry for split, entry in container["files"].items() if entry is not None}
    folds_given = container.pop("folds")
    files, folds, own = split_names(given, folds_given, fail)
    layouts = {name: _layout(cfg, keys, columns, kind_name, name, fail) for name, keys in own.items()}
    protocol = parse_protocol(files, container.pop("dev"), folds, kind.entry.group_by, cfg.format, fail)
    # new keys only where given (or defaulted): a file with all three split files normalizes as it did
    # before `dev:` and `folds:` existed; a file given with its own layout, as written
    written = {split: entry if isinstance(entry, dict) else files[split] for split, entry in given.items()}
    normalized = {**container, "files": written, **protocol.normalized}
    if folds != folds_given:
        normalized["folds"] = folds_given
    return Definition(
        source=path, name=cfg.name, format=cfg.format, kind_name=kind_name, kind=kind,
        root=(path.parent / cfg.path).resolve(), files=files, protocol=protocol, labels=labels,
        labels_from_train=task.tagged and not labels, multi_label=cfg.multi_label, metric=metric,
        metric_args=metric_args, entity_type=cfg.entity_type,
        collapse_type=cfg.collapse_type, tagging=cfg.tagging, columns=columns, header=cfg.header, fields=fields,
        entity_types=tuple(cfg.entity_types) if cfg.entity_types is not None else None,
        label_separator=cfg.label_separator, max_length=cfg.max_length,
        normalized=json.dumps(normalized, sort_keys=True), layouts=layouts)


def with_labels(definition: Definition, labels: tuple[str, ...]) -> Definition:
    """`definition` with the labels read from its training split (metric arguments that list them too)."""
    args = dict(definition.metric_args)
    if "labels" in args:
        args["labels"] = labels
    return replace(definition, labels=labels, metric_args=args)


def _names(where, separator: str = ", ") -> str:
    """The `task_type:` names of the task types `where` selects, for messages."""
    return separator.join(KINDS.names(lambda kind: where(kind.entry)))


def _labels(cfg: DictConfig, kind: Kind, kind_name: str, fail) -> tuple[str, ...]:
    tagged = kind.entry.tagged
    if tagged:
        if cfg.collapse_type:
            return (cfg.collapse_type,)
        if cfg.labels is None:  # the entity type of untyped tags, else the types the training split uses
            return (cfg.entity_type,) if cfg.entity_type else ()
    if kind.entry.unlabeled:
        if cfg.labels:
            raise fail(f"labels: a {kind_name} dataset has {kind.entry.unlabeled}, not classes; remove the key")
        return ()
    if not cfg.labels:
        raise fail("missing key 'labels' (the entity types or classes the data uses)")
    if len(set(cfg.labels)) != len(cfg.labels):
        raise fail(f"labels: {list(cfg.labels)} names a label twice")
    if tagged and cfg.entity_type and cfg.entity_type not in cfg.labels:
        raise fail(f"entity_type '{cfg.entity_type}' is not in labels {list(cfg.labels)}")
    return tuple(str(label) for label in cfg.labels)


def _field_maps(cfg: DictConfig, kind: Kind, kind_name: str, fail) -> tuple[dict[str, int], dict[str, str]]:
    valid = kind.form.fields + kind.form.optional
    if cfg.format in QA_FORMATS:
        if cfg.columns or cfg.fields:
            raise fail(f"format {cfg.format} has its own keys; remove 'columns' and 'fields'")
        return {}, {}
    if cfg.format == "jsonl":
        if cfg.columns:
            raise fail("columns applies to formats conll and tsv; a jsonl file maps its keys with fields")
        for key in cfg.fields:
            if key not in valid:
                raise fail(f"unknown key 'fields.{key}'; valid keys under 'fields' for task_type {kind_name}: "
                           f"{', '.join(valid)}")
        return {}, {name: str(cfg.fields.get(name, name)) for name in valid}
    if cfg.fields:
        raise fail(f"fields applies to format jsonl; a {cfg.format} file maps its columns with columns")
    columns = dict(kind.form.columns)
    if cfg.format == "tsv":
        columns.pop("head", None)
        columns.pop("tail", None)
    columns = _columns(columns, cfg.columns, "columns", cfg.format, kind_name, fail)
    if kind.entry.relation and cfg.format == "tsv" and cfg.entity_types is None:
        raise fail("missing key 'entity_types': a tsv relation file has its entities replaced by @TYPE$ "
                   "placeholders; name them, e.g. entity_types: [GENE, DISEASE]")
    return columns, {}


def _columns(base: dict[str, int], given: Any, where: str, format: str, kind_name: str, fail) -> dict[str, int]:
    """`base` (field -> column) with the columns `given` under key `where`; an unknown field is an error."""
    columns = dict(base)
    for key, column in given.items():
        if key not in base and not (key == "id" and format == "tsv"):
            valid = [*base, "id"] if format == "tsv" else list(base)
            raise fail(f"unknown key '{where}.{key}'; valid keys under '{where}' for format {format}, "
                       f"task_type {kind_name}: {', '.join(dict.fromkeys(valid))}")
        if isinstance(column, bool) or not isinstance(column, int):
            raise fail(f"{where}.{key}: expected a 0-based column number (-1: the last), got {column!r}")
        columns[key] = int(column)
    return columns


def _layout(cfg: DictConfig, keys: dict[str, Any], columns: dict[str, int], kind_name: str, name: str,
            fail) -> FileLayout:
    """File `name`'s own header and columns (layouts.py), over the dataset's."""
    if cfg.format != "tsv" and keys:
        raise fail(f"files: {name}: a file's own header and columns apply to format tsv; give the file's "
                   "name alone")
    return FileLayout(keys.get("header", cfg.header),
                      _columns(columns, keys.get("columns", {}), f"{name}: columns", cfg.format, kind_name, fail))


def _metric(cfg: DictConfig, kind: Kind, kind_name: str, labels: tuple[str, ...], fail
            ) -> tuple[str, dict[str, Any]]:
    metrics = ("multilabel_micro_f1",) if cfg.multi_label else kind.entry.metrics
    for key in ("negative_label", "positive_label"):
        value = cfg[key]
        if value is not None and value not in labels:
            raise fail(f"{key} '{value}' is not in labels {list(labels)}")
    metric = cfg.metric
    if metric is None:
        if kind.entry.relation:  # BLURB scores relations without their no-relation class: which one is it?
            if cfg.negative_label is None and cfg.positive_label is None:
                raise fail("missing key 'negative_label' (the no-relation class, left out of micro F1, as "
                           "ChemProt's 'false') or 'positive_label' (score one class's F1, as GAD's '1')")
            metric = "relation_micro_f1" if cfg.negative_label is not None else "positive_class_f1"
        elif cfg.positive_label is not None:
            metric = "positive_class_f1"
        elif cfg.negative_label is not None:
            metric = "relation_micro_f1"
        elif cfg.format in QA_DEFAULT_METRIC:
            metric = QA_DEFAULT_METRIC[cfg.format]
        else:
            metric = metrics[0]
    if metric not in metrics:
        raise fail(f"metric '{metric}' cannot score task_type {kind_name}"
                   f"{' with multi_label' if cfg.multi_label else ''}; choose one of: {', '.join(metrics)}")
    args: dict[str, Any] = {}
    if metric == "relation_micro_f1":
        if cfg.negative_label is None:
            raise fail("missing key 'negative_label': metric relation_micro_f1 leaves that class out")
        args = {"negative": cfg.negative_label, "labels": labels}
    elif metric == "positive_class_f1":
        if cfg.positive_label is None:
            raise fail("missing key 'positive_label': metric positive_class_f1 scores that class")
        args = {"positive": cfg.positive_label}
    elif metric in ("pico_word_macro_f1", "multilabel_micro_f1"):
        args = {"labels": labels}
    return metric, args

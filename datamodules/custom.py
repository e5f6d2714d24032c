"""User datasets registered from YAML, no Python needed.

    # my-ner.yaml
    name: my-ner
    format: conll            # conll: token<TAB>tag lines, IOB2, blank line between sentences
    path: data/my-ner        # relative paths are resolved against this YAML file's folder
    files: {train: train.tsv, dev: dev.tsv, test: test.tsv}
    labels: [Disease]        # entity types (conll) or classes (tsv)
    collapse_type: null      # conll: rename every entity type to this one, as BLURB does
    max_length: 256          # optional (default 512)

    format: tsv              # tsv: text<TAB>label per line, single-label classification (accuracy)

Register with `bioablate finetune --task my-ner --datasets my-ner.yaml` (or the `datasets` config key).
The file is checked against `UserDatasetFile` (core.schema); a name that is already taken (a BLURB task,
or a dataset of another file) is refused. Registering the same file again replaces its earlier entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional

from omegaconf import MISSING, OmegaConf

from core.errors import ConfigError, DataFormatError, UnknownNameError
from core.registry import Registry
from core.schema import load
from datamodules.instances import Instance, TextInstance
from datamodules.readers.ner import read_conll_file
from datamodules.registry import register
from datamodules.spec import SPLITS, DatasetSpec, Splits
from datamodules.textfiles import open_text


@dataclass
class SplitFiles:
    train: str = MISSING
    dev: str = MISSING
    test: str = MISSING


@dataclass
class UserDatasetFile:
    """The keys of a user dataset YAML file (see the module docstring)."""

    name: str = MISSING
    format: str = MISSING
    path: str = MISSING
    files: SplitFiles = field(default_factory=SplitFiles)
    labels: List[str] = MISSING
    collapse_type: Optional[str] = None
    max_length: int = 512


@dataclass(frozen=True)
class UserFormat:
    """How one `format:` is read and scored."""

    task_type: str
    metric: str
    count_unit: str
    read_file: Callable[[Path, Optional[str]], list[Instance]]  # (file, collapse_type) -> instances
    labels_of: Callable[[Instance], set[str]]  # the labels one instance uses, checked against `labels`
    unknown_hint: str  # how to fix a label that is not among `labels`


def read_tsv_classification(path: Path) -> list[TextInstance]:
    instances = []
    with open_text(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 2 or not parts[0].strip():
                raise DataFormatError(path, number, f"expected 'text<TAB>label', got {len(parts)} column(s)")
            instances.append(TextInstance(f"{path.stem}-{number}", parts[0], (parts[1].strip(),)))
    return instances


FORMATS: Registry[UserFormat] = Registry("format")
FORMATS.register("conll", UserFormat(
    "ner", "entity_f1", "mentions", read_conll_file, lambda x: {span.label for span in x.spans},
    "; add them there or set collapse_type"))
FORMATS.register("tsv", UserFormat(
    "classification", "accuracy", "instances", lambda path, collapse: read_tsv_classification(path),
    lambda x: {x.labels[0]}, "; add them there"))

_SOURCES: dict[str, Path] = {}  # user dataset name -> the YAML file it was registered from


def register_from_yaml(path: str | Path) -> DatasetSpec:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"dataset file not found: {path}")
    cfg = load(path, UserDatasetFile)
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise ConfigError(f"{path}: missing key '{missing[0]}' (see datamodules/custom.py for an example)")
    try:
        fmt = FORMATS.get(cfg.format)
    except UnknownNameError as e:
        raise ConfigError(f"{path}: {e}") from None
    files = {split: cfg.files[split] for split in SPLITS}
    collapse = cfg.collapse_type
    labels = (collapse,) if collapse else tuple(cfg.labels)

    def reader(base: Path) -> Splits:
        splits = {split: fmt.read_file(base / files[split], collapse) for split in SPLITS}
        for split, instances in splits.items():
            extra = set().union(*(fmt.labels_of(x) for x in instances)) - set(labels)
            if extra:
                raise DataFormatError(base / files[split], None, f"label(s) {sorted(extra)} not in labels "
                                      f"{sorted(labels)} of {path}{fmt.unknown_hint}")
        return splits

    spec = DatasetSpec(
        name=cfg.name, task_type=fmt.task_type, reader=reader, files=tuple(files[s] for s in SPLITS),
        labels=labels, metric=fmt.metric, max_length=cfg.max_length, count_unit=fmt.count_unit,
        root=(path.parent / cfg.path).resolve(), notes=f"registered from {path}",
    )
    try:  # the registry refuses a name already taken, unless this same file registered it before
        register(spec, replace=_SOURCES.get(spec.name) == path.resolve())
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    _SOURCES[spec.name] = path.resolve()
    return spec

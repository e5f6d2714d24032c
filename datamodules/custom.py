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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from core.errors import ConfigError, DataFormatError
from datamodules.instances import TextInstance
from datamodules.readers.ner import read_conll_file
from datamodules.registry import SPLITS, DatasetSpec, Splits, register

FORMATS = {"conll": ("ner", "entity_f1"), "tsv": ("classification", "accuracy")}
KEYS = {"name", "format", "path", "files", "labels", "collapse_type", "max_length"}


def read_tsv_classification(path: Path) -> list[TextInstance]:
    instances = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 2 or not parts[0].strip():
                raise DataFormatError(path, number, f"expected 'text<TAB>label', got {len(parts)} column(s)")
            instances.append(TextInstance(f"{path.stem}-{number}", parts[0], (parts[1].strip(),)))
    return instances


def register_from_yaml(path: str | Path) -> DatasetSpec:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"dataset file not found: {path}")
    raw: dict[str, Any] = OmegaConf.to_container(OmegaConf.load(path), resolve=True)  # type: ignore[assignment]
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key '{unknown[0]}'; valid keys: {', '.join(sorted(KEYS))}")
    for key in ("name", "format", "path", "files", "labels"):
        if key not in raw:
            raise ConfigError(f"{path}: missing key '{key}' (see datamodules/custom.py for an example)")
    if raw["format"] not in FORMATS:
        raise ConfigError(f"{path}: unknown format '{raw['format']}'; known: {', '.join(FORMATS)}")
    files = raw["files"]
    if not isinstance(files, dict) or set(files) != set(SPLITS):
        raise ConfigError(f"{path}: 'files' must map exactly train, dev and test to file names")
    root = (path.parent / raw["path"]).resolve()
    task_type, metric = FORMATS[raw["format"]]
    collapse = raw.get("collapse_type")
    labels = (collapse,) if collapse else tuple(raw["labels"])

    def reader(base: Path) -> Splits:
        if raw["format"] == "conll":
            splits = {s: read_conll_file(base / files[s], collapse) for s in SPLITS}
            allowed = set(labels)
            for split, instances in splits.items():
                extra = {span.label for x in instances for span in x.spans} - allowed
                if extra:
                    raise DataFormatError(base / files[split], None,
                                          f"entity type(s) {sorted(extra)} not in labels {sorted(allowed)} "
                                          f"of {path}; add them there or set collapse_type")
            return splits
        splits = {s: read_tsv_classification(base / files[s]) for s in SPLITS}
        for split, instances in splits.items():
            extra = {x.labels[0] for x in instances} - set(labels)
            if extra:
                raise DataFormatError(base / files[split], None,
                                      f"label(s) {sorted(extra)} not in labels of {path}")
        return splits

    return register(DatasetSpec(
        name=raw["name"], task_type=task_type, reader=reader, files=tuple(files[s] for s in SPLITS),
        labels=labels, metric=metric, max_length=int(raw.get("max_length", 512)),
        count_unit="mentions" if task_type == "ner" else "instances", root=root,
        notes=f"registered from {path}",
    ))

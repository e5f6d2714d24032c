"""The dataset definition an exported model carries (`bioablate.json`, key `dataset`), so that a model
fine-tuned on a user dataset (a dataset YAML, datamodules/custom/) predicts with no `--datasets`: what
`bioablate predict` reads of a dataset (its name, task type, labels, metric and its arguments, multi-label,
max_length, what Table 3 counts), never its files or where they were. A BLURB dataset's export carries none:
the registry has it in every install.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from bioablate_core.errors import ConfigError
from bioablate_core.files import write_text_atomic
from datamodules.registry import DATASETS, get_dataset
from datamodules.spec import DatasetSpec
from datamodules.tagging import shown_name
from datamodules.task_types import TASK_TYPES

DATASET_KEY = "dataset"
SCHEME_KEY = "scheme"  # a tagging model's scheme as people name it (IOBES), beside the config value (bioul)


def dataset_metadata(spec: DatasetSpec, tagging: str) -> dict[str, Any]:
    """The keys `save_finetuned` adds to bioablate.json for a run on `spec` tagged in scheme `tagging` (the
    `finetune.tagging` value): the tagging scheme's shown name on a tagged task, and a user dataset's
    definition (module docstring)."""
    out: dict[str, Any] = {}
    if TASK_TYPES.of(spec.task_type).tagged and tagging:
        out[SCHEME_KEY] = shown_name(tagging)
    if spec.source:  # registered from a dataset YAML
        out[DATASET_KEY] = {"name": spec.name, "task_type": spec.task_type, "labels": list(spec.labels),
                            "metric": spec.metric, "metric_args": _plain(spec.metric_args),
                            "multi_label": spec.multi_label, "max_length": spec.max_length,
                            "count_unit": spec.count_unit}
    return out


def _plain(value: Any) -> Any:
    """Tuples as lists, recursively: what JSON writes and reads back."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _no_files(*_: Any) -> Any:
    raise ConfigError("an exported model's dataset holds no data: register its YAML (--datasets) to read it")


def model_dataset(meta: dict[str, Any], where: str) -> DatasetSpec:
    """The dataset a model folder's bioablate.json (`meta`) was fine-tuned on: the definition it carries,
    else the registry's entry of its task (a BLURB dataset, or a user dataset registered with --datasets);
    `where` names the folder in the error."""
    block = meta.get(DATASET_KEY)
    if isinstance(block, dict):
        args = {k: tuple(v) if isinstance(v, list) else v for k, v in (block.get("metric_args") or {}).items()}
        return DatasetSpec(name=block["name"], task_type=block["task_type"], reader=_no_files, files=(),
                           labels=tuple(block["labels"]), metric=block["metric"], metric_args=args,
                           max_length=int(block["max_length"]), multi_label=bool(block.get("multi_label")),
                           count_unit=block.get("count_unit", "instances"),
                           notes="the definition carried by an exported model")
    task = meta["task"]
    if task not in DATASETS and task.split("@", 1)[0] not in DATASETS:
        raise ConfigError(f"--model {where}: it was fine-tuned on '{task}', a dataset this install does not "
                          f"know, and its {DATASET_KEY} definition is not in its bioablate.json (exported before "
                          f"models carried it); pass --datasets YAML, the dataset file it was trained on")
    return get_dataset(task)


def register_datasets(files: Sequence[str | Path]) -> list[DatasetSpec]:
    """Register user dataset YAMLs (`--datasets`), as `finetune` does; returns their datasets."""
    from datamodules.custom import register_from_yaml

    return [register_from_yaml(Path(file).expanduser()) for file in files]


def carry_definition(model_dir: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """An exported folder whose bioablate.json lacks its user dataset's definition (a model stored before
    models carried it) gets it from the registry, where --datasets registered it; returns the meta."""
    if DATASET_KEY in meta or meta["task"] not in DATASETS:
        return meta
    spec = get_dataset(meta["task"])
    if not spec.source:
        return meta
    meta = {**meta, **dataset_metadata(spec, meta.get("tagging", ""))}
    write_text_atomic(model_dir / "bioablate.json", json.dumps(meta, indent=1) + "\n")
    return meta

"""User datasets registered from YAML, no Python needed: every BLURB task type, in CoNLL, JSONL or TSV.

    # my-re.yaml
    name: my-re
    format: jsonl              # conll | jsonl | tsv | squad | bioasq-golden (the last two: qa-extractive)
    task_type: re              # ner | pico | re | similarity | classification | pair-classification | qa | qa-extractive
    path: data/my-re           # relative paths are resolved against this YAML file's folder
    files: {train: train.jsonl, dev: dev.jsonl, test: test.jsonl}
    labels: [CPR:3, CPR:4, false]
    negative_label: "false"    # re: the class micro F1 leaves out
    fields: {text: sentence}   # jsonl: field -> the key the lines use
    max_length: 256            # optional (default 512)

The keys are `schema.UserDatasetFile`; the fields of each task type, the CoNLL rules and the TSV columns
are in `records.py` and `tagged.py`; README, "Your own dataset, no Python", shows one file per type.

Register with `bioablate finetune --task my-re --datasets my-re.yaml`, the `datasets` config key, or an
experiment's `datasets:` list. A name that is already taken (a BLURB task, or a dataset of another file)
is refused; registering the same file again replaces its earlier entry. The dataset's fingerprint covers
the YAML's content (with defaults filled in), so changing e.g. `labels` or `max_length` makes new runs.
"""

from __future__ import annotations

from pathlib import Path

from core.errors import ConfigError
from datamodules.custom.qa import read_qa_file
from datamodules.custom.records import read_records
from datamodules.custom.schema import QA_FORMATS, Definition, load_definition
from datamodules.custom.tagged import read_conll
from datamodules.instances import Instance
from datamodules.registry import register
from datamodules.spec import SPLITS, DatasetSpec, Splits

# The code that decides a user dataset's instances, part of its fingerprint (the reader below is only
# the entry point).
PACKAGE_FILES = tuple(sorted(Path(__file__).resolve().parent.glob("*.py")))

_SOURCES: dict[str, Path] = {}  # user dataset name -> the YAML file it was registered from


def read_file(definition: Definition, path: Path, split: str = "test") -> list[Instance]:
    if definition.format in QA_FORMATS:
        return read_qa_file(definition, path, split)
    if definition.format == "conll":
        return read_conll(definition, path)
    return read_records(definition, path)


def register_from_yaml(path: str | Path) -> DatasetSpec:
    definition = load_definition(Path(path))

    def reader(base: Path) -> Splits:
        return {split: read_file(definition, base / definition.files[split], split) for split in SPLITS}

    spec = DatasetSpec(
        name=definition.name, task_type=definition.kind.task_type, reader=reader,
        files=tuple(definition.files[s] for s in SPLITS), labels=definition.labels, metric=definition.metric,
        metric_args=definition.metric_args, multi_label=definition.multi_label,
        max_length=definition.max_length, count_unit=definition.kind.count_unit, root=definition.root,
        notes=f"registered from {definition.source}", package_files=PACKAGE_FILES,
        definition=definition.normalized,
    )
    source = Path(path).resolve()
    try:  # the registry refuses a name already taken, unless this same file registered it before
        register(spec, replace=_SOURCES.get(spec.name) == source)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    _SOURCES[spec.name] = source
    return spec

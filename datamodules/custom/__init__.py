"""User datasets registered from YAML, no Python needed: every BLURB task type, in CoNLL, JSONL or TSV.

    # my-re.yaml
    name: my-re
    format: jsonl              # conll | jsonl | tsv | squad | bioasq-golden (the last two: qa-extractive)
    task_type: re              # ner | pico | re | similarity | classification | pair-classification | qa |
                               # qa-extractive
    path: data/my-re           # relative paths are resolved against this YAML file's folder
    files: {train: train.jsonl, dev: dev.jsonl, test: test.jsonl}
    labels: [CPR:3, CPR:4, false]
    negative_label: "false"    # re: the class micro F1 leaves out
    fields: {text: sentence}   # jsonl: field -> the key the lines use
    max_length: 256            # optional (default 512)

The keys are `schema.UserDatasetFile`; the fields of each task type, the CoNLL rules and the TSV columns
are in `records.py` and `tagged.py`; README, "Your own dataset, no Python", shows one file per type.

Without a dev file, dev is carved from train (`protocol.py`); `dev: none` has no dev at all, and a run
trains `finetune.epochs` epochs and tests the last epoch's weights (tag `epoch_selection`):

    files: {train: train.tsv, test: test.tsv}
    dev: {fraction: 0.1, seed: 13}    # the default, said once when registered; or: dev: none

Cross-validation folds, in place of `files` (an experiment runs every fold; its table shows the mean ±
std over folds and seeds; `--task my-re@fold3` is one fold), each fold's dev carved from its train or none:

    folds:                            # train/test pairs ...
      - {train: 1/train.tsv, test: 1/test.tsv}
      - {train: 2/train.tsv, test: 2/test.tsv}
    folds: {k: 10, seed: 13, file: all.tsv}    # ... or k seeded, stratified folds over one file

A TSV file may give its own layout where the dataset's files differ (layouts.py): under `files:` or in a
`folds:` pair, a mapping in place of the name. BioBERT's relation folds ship that way:

    files:
      train: train.tsv                                              # no header: sentence, label
      test: {path: test.tsv, header: true, columns: {text: 1, label: 2}}   # index, sentence, label

No line is dropped in silence: a header row (`header: true`) is said once and never read as an example, a
first line that looks like an example under `header: true` is refused, and one whose label is unknown under
`header: false` says to set `header: true` if it is a header (records.py).

A tagged dataset (ner, pico) may leave out `labels` (and `entity_type`): its entity types are read from
the training files, sorted, said once ("my-ner: labels read from train.txt: Chemical, Disease") and
logged on each run (tags `labels`, `labels_from`); a type only dev or test use is then an error.

Register with `bioablate finetune --task my-re --datasets my-re.yaml`, the `datasets` config key, or an
experiment's `datasets:` list. A name that is already taken (a BLURB task, or a dataset of another file)
is refused; registering the same file again replaces its earlier entry. The dataset's fingerprint covers
the YAML's content (with defaults filled in), so changing e.g. `labels` or `max_length` makes new runs.
"""

from __future__ import annotations

import logging
from pathlib import Path

from bioablate_core.errors import ConfigError
from datamodules.custom.protocol import POOL
from datamodules.custom.qa import read_qa_file
from datamodules.custom.records import read_records
from datamodules.custom.schema import QA_FORMATS, Definition, load_definition, with_labels
from datamodules.custom.tagged import entity_types, read_conll
from datamodules.fold_lists import ListedFolds
from datamodules.instances import Instance
from datamodules.protocols import KFolds
from datamodules.registry import register
from datamodules.spec import SPLITS, DatasetSpec, Splits

# Bumped whenever the instances this package reads from a user's files change (any of its modules: the
# reader below is only the entry point): it enters the datasets' fingerprints in place of the code's
# bytes (DatasetSpec.fingerprint).
READER_VERSION = 1

log = logging.getLogger("bioablate")

_SOURCES: dict[str, Path] = {}  # user dataset name -> the YAML file it was registered from
_SAID: set[tuple[Path, str]] = set()  # (YAML file, note) already shown: each note once per process
# (YAML definition, files and their sizes and times) -> the entity types read from the training files
_TYPES: dict[tuple, tuple[str, ...]] = {}


def read_file(definition: Definition, base: Path, name: str, split: str = "test") -> list[Instance]:
    """The instances of file `name` (as the YAML names it) under `base`, read as the `split` it is."""
    path = base / name
    if definition.format in QA_FORMATS:
        return read_qa_file(definition, path, split)
    if definition.format == "conll":
        return read_conll(definition, path)
    return read_records(definition, path, definition.layout(name))


class _Reader:
    """The DatasetSpec reader of the definition's files: reader(base) -> splits, or reader(base, k) for
    listed folds; dev is [] where it is carved (datamodules/protocols.apply_protocol) or there is none.
    A module-level class, not a closure: DDP's spawn start method pickles the spec."""

    def __init__(self, definition: Definition):
        self.definition = definition

    def __call__(self, base: Path, fold: int | None = None) -> Splits:
        definition, folds = self.definition, self.definition.protocol.folds
        if isinstance(folds, ListedFolds):
            train, test = folds.files(fold)
            return {"train": read_file(definition, base, train, "train"), "dev": [],
                    "test": read_file(definition, base, test, "test")}
        if isinstance(folds, KFolds):
            return {POOL: read_file(definition, base, definition.protocol.files[0], "test")}
        return {split: read_file(definition, base, definition.files[split], split) if split in definition.files
                else [] for split in SPLITS}


def _say(definition: Definition, note: str) -> None:
    if (definition.source, note) not in _SAID:
        _SAID.add((definition.source, note))
        log.info("%s: %s", definition.name, note)


def _train_types(definition: Definition) -> tuple[Definition, str]:
    """The definition with the entity types of its training files as labels, and where they were read."""
    files = definition.protocol.train_files
    key_files = []
    for name in files:
        path = definition.root / name
        if not path.is_file():
            key = "folds" if definition.protocol.folds is not None else "files.train"
            raise ConfigError(f"{definition.source}: {key}: {path} is not a file; without 'labels' the entity "
                              "types are read from the training split")
        stat = path.stat()
        key_files.append((str(path), stat.st_size, stat.st_mtime_ns))
    key = (definition.normalized, tuple(key_files))
    if key not in _TYPES:
        found: set[str] = set()
        for name in files:
            found.update(entity_types(read_file(definition, definition.root, name, "train")))
        _TYPES[key] = tuple(sorted(found))
    where = files[0] if len(files) == 1 else f"{files[0]} and {len(files) - 1} more training files"
    if not _TYPES[key]:
        raise ConfigError(f"{definition.source}: labels: none given, and {where} has no entity tags to read them "
                          "from; list the entity types under 'labels'")
    return with_labels(definition, _TYPES[key]), where


def register_from_yaml(path: str | Path) -> DatasetSpec:
    definition = load_definition(Path(path))
    labels_from = ""
    if definition.labels_from_train:
        definition, labels_from = _train_types(definition)
        _say(definition, f"labels read from {labels_from}: {', '.join(definition.labels)}")
    protocol = definition.protocol
    if protocol.dev_defaulted:
        _say(definition, f"no dev file: dev is a seeded {protocol.carve_dev.fraction:.0%} of train (dev: "
                         f"{{fraction: {protocol.carve_dev.fraction}, seed: {protocol.carve_dev.seed}}}); "
                         "dev: none trains finetune.epochs epochs and tests the last")
    spec = DatasetSpec(
        name=definition.name, task_type=definition.kind.task_type, reader=_Reader(definition),
        files=protocol.files, labels=definition.labels, metric=definition.metric,
        metric_args=definition.metric_args, multi_label=definition.multi_label,
        max_length=definition.max_length, count_unit=definition.kind.form.count_unit, root=definition.root,
        notes=f"registered from {definition.source}" + (f"; labels read from {labels_from}" if labels_from else ""),
        definition=definition.normalized, carve_dev=protocol.carve_dev,
        folds=protocol.folds, no_dev=protocol.no_dev, labels_from=labels_from, source=str(definition.source),
    )
    source = Path(path).resolve()
    try:  # the registry refuses a name already taken, unless this same file registered it before
        register(spec, replace=_SOURCES.get(spec.name) == source)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    _SOURCES[spec.name] = source
    return spec

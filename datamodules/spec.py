"""What a dataset is: `DatasetSpec` (where its files are, how to read, encode and score them) and the
types readers return. Readers, `blurb.py` and the registry all import from here, so none of them needs
another (the registry imports `blurb.py`, which imports the readers, which import only this module).
"""

from __future__ import annotations

import gc
import json
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator, Sequence

from bioablate_core.errors import ConfigError, MissingDataError
from bioablate_core.fingerprints import files_under, hash_files
from bioablate_core.identity import field_marks, marked
from datamodules import protocols
from datamodules.fold_lists import FILE_FOLDS, ListedFolds
from datamodules.instances import Instance
from datamodules.protocols import DEFAULT_FOLD, CarvedDev, Folds, apply_protocol, fold_name

SPLITS = ("train", "dev", "test")

# The fewest input positions a run trains on: [CLS] a [SEP] b [SEP] needs a few (a dataset's max_length,
# finetune.max_length, pretrain.seq_len, the model's position embeddings).
MIN_SEQUENCE = 8
# The most: the longest context of the BERT family's long-input models. A typo above it (max_length: 1e30,
# --seq-len 100000) would allocate an attention matrix of hundreds of GB before failing.
MAX_SEQUENCE = 8192

# A split is a list, or for a large file a read-only Sequence that reads its instances when indexed
# (datamodules/custom/tagged.py's ConllSentences): whoever needs a list makes one of what it uses.
Splits = dict[str, Sequence[Instance]]
Reader = Callable[[Path], Splits]  # a `FILE_FOLDS` dataset's reader also takes the fold: reader(path, k)


# What of a dataset identifies the runs on it (bioablate_core.identity): `shape`, the fields that change what a run
# trains on or how it is scored (hashed as `_shape_key`, in this order); `content`, what the fingerprint
# hashes otherwise (files, reader version, definition, protocol); `none`, descriptions and where to look.
identifies = field_marks(("shape", "content", "none"))


@identifies(shape="task_type labels metric metric_args max_length multi_label",
            content="name reader files package_files definition carve_dev folds fold_index no_dev",
            none="count_unit paper_counts notes root inner_files licenses labels_from source")
@dataclass(frozen=True)
class DatasetSpec:
    """One dataset. `files` are relative to `root` (the data directory for staged datasets)."""

    name: str
    task_type: str  # a name in datamodules.task_types.TASK_TYPES (or a task kind named directly)
    reader: Reader
    files: tuple[str, ...]
    labels: tuple[str, ...]  # span types (ner/pico), classes (re/qa/classification); () for regression
    metric: str  # a name in datamodules.metrics.METRICS
    max_length: int
    count_unit: str = "instances"  # what Table 3 counts: mentions, pairs, questions, ...
    paper_counts: dict[str, int] = field(default_factory=dict)
    metric_args: dict = field(default_factory=dict)  # e.g. {"negative": "false"} for RE micro F1
    multi_label: bool = False
    notes: str = ""  # how our data differs from the paper's, shown by `bioablate data stats`
    root: Path | None = None  # None: resolved against the data directory
    # files inside the `files` folders that the reader opens: checked before reading (the folders'
    # whole content is what the fingerprint hashes)
    inner_files: tuple[str, ...] = ()
    package_files: tuple[Path, ...] = ()  # files shipped with bioablate that shape the data (frozen splits)
    definition: str = ""  # a user dataset's YAML, normalized: its labels, format, max_length... shape the run
    # The data's licences, as the Hugging Face Hub names them where it has a name (`cc-by-4.0`), else a
    # short name of the terms; () where none is stated. A fine-tuned model's card takes its licence from
    # here (ablations/run/cards.py): weights trained on the data carry the data's terms.
    licenses: tuple[str, ...] = ()
    # Evaluation protocol (datamodules/protocols.py); all None for a dataset whose files hold its splits,
    # which then reads and fingerprints exactly as before these fields existed.
    carve_dev: CarvedDev | None = None  # dev carved from train (datasets with train + test only)
    folds: Folds | ListedFolds | None = None  # cross-validation folds (fold_lists.py too); `fold(k)` selects one
    fold_index: int | None = None  # set by `fold(k)`: the fold (1-based) this spec reads
    # No dev split at all (a user dataset's `dev: none`): a run trains finetune.epochs epochs without dev
    # evaluation and tests the last epoch's weights; dev is [] when read.
    no_dev: bool = False
    # A user tagged dataset without `labels:`: the files its entity types were read from ("" otherwise)
    labels_from: str = ""
    source: str = ""  # a user dataset: the YAML file it was registered from

    def __post_init__(self):
        if isinstance(self.folds, FILE_FOLDS) and self.fold_index is None and self.files != self.folds.all_files():
            raise ValueError(f"dataset {self.name}: files must list every fold's files (folds.all_files())")
        if self.no_dev and self.carve_dev is not None:
            raise ValueError(f"dataset {self.name}: no_dev and carve_dev exclude each other")

    @property
    def fold_count(self) -> int:
        """How many folds the dataset has; 0 when it has none."""
        return 0 if self.folds is None else self.folds.count

    def fold(self, k: int) -> DatasetSpec:
        """Fold `k` (1 .. fold_count) as a dataset of its own, named `fold_name(name, k)`
        (`biobert-gad@fold3`), with only that fold's files and its own fingerprint."""
        if self.folds is None or self.fold_index is not None:
            what = "has no folds" if self.folds is None else f"is already fold {self.fold_index}"
            raise ConfigError(f"dataset {self.name} {what}; cannot select fold {k}")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= self.folds.count:
            raise ConfigError(f"dataset {self.name} has folds 1..{self.folds.count}, not {k!r}")
        files = self.folds.files(k) if isinstance(self.folds, FILE_FOLDS) else self.files
        return replace(self, name=fold_name(self.name, k), files=files, fold_index=k)

    def each_fold(self) -> list[DatasetSpec]:
        """Every fold's spec, in order (what a cross-validation study runs); [] without folds."""
        return [self.fold(k) for k in range(1, self.fold_count + 1)]

    def base_dir(self, data_dir: Path | None) -> Path:
        return self.root if self.root is not None else Path(data_dir)

    def missing_files(self, data_dir: Path | None) -> list[str]:
        """The `files` and `inner_files` not there, or not a file where one is expected (an entry with
        a suffix, `train.tsv`), each as the user should read it."""
        base = self.base_dir(data_dir)
        out = []
        for f in (*self.files, *self.inner_files):
            path = base / f
            if not path.exists():
                out.append(f)
            elif Path(f).suffix and not path.is_file():
                what = "a folder" if path.is_dir() else "a device, pipe or socket"  # /dev/zero would read for ever
                out.append(f"{f} ({what}, expected a regular file)")
        return out

    def missing_error(self, data_dir: Path | None, missing: list[str]) -> MissingDataError:
        """The error for `missing` files (`missing_files`): a user dataset's names its YAML file."""
        hint = f"check 'path', 'files' and 'folds' in {self.source}" if self.source else None
        return MissingDataError(self.base_dir(data_dir), {self.name: missing}, hint)

    def read(self, data_dir: Path | None) -> Splits:
        """Read all splits; raises MissingDataError naming the missing files first.

        The last datasets read (up to 16: all of BLURB fits, about 230 MB) are kept in memory, keyed by
        their content fingerprint: an experiment fine-tunes many runs on many datasets in one process, and
        parsing each again (ChemProt: ~2 s) added up. Instances are frozen, and each call gets its own
        lists (a split read on demand, which is read-only, is shared). A dataset with folds but none
        selected reads fold `DEFAULT_FOLD` (1), so that tools that know nothing of folds (`bioablate data
        stats`, a single run) see BioBERT's fold 1."""
        if self.folds is not None and self.fold_index is None:
            return self.fold(DEFAULT_FOLD).read(data_dir)
        missing = self.missing_files(data_dir)
        if missing:
            raise self.missing_error(data_dir, missing)
        key = (self.name, self.fingerprint(data_dir))
        splits = _READ_CACHE.pop(key, None)
        if splits is None:
            with _collector_paused():
                splits = self._read_files(self.base_dir(data_dir))
        _READ_CACHE[key] = splits  # most recent last
        while len(_READ_CACHE) > _READ_CACHE_SIZE:
            del _READ_CACHE[next(iter(_READ_CACHE))]
        return {split: list(instances) if isinstance(instances, list) else instances
                for split, instances in splits.items()}

    def fingerprint(self, data_dir: Path | None) -> str:
        """Content hash of everything that decides the instances and how they are scored: the data files,
        files shipped with bioablate for them (frozen splits), the version of the code that reads them
        (`code_version`), the protocol, the fields that shape a run (`_shape_key`: labels, metric,
        max_length...) and, for a user dataset, its YAML definition.

        Code enters by its declared version, not by its bytes, so that tidying a reader (a comment, a
        shared loop) does not recompute every stored run on its datasets, while a reader whose output
        changes bumps its `READER_VERSION` and so does. tests/datamodules/test_dataset_contents.py pins
        every built-in dataset's instances on the staged data: a changed output without a bump fails
        there."""
        base = self.base_dir(data_dir)
        sources = list(self.package_files)
        for rel in self.files:
            path = base / rel
            sources += files_under(path) if path.is_dir() else [path]
        protocol = self._protocol_key()
        return hash_files(sources, seed=(self.name + self.definition + protocol + "|code="
                                         + self.code_version() + "|shape=" + self._shape_key()).encode())

    def _shape_key(self) -> str:
        """The spec's fields that change what a run trains on or how it is scored (a built-in dataset's
        max_length edited in blurb.py must not find the runs made at the old length)."""
        return json.dumps([getattr(self, name) for name in marked(DatasetSpec, "shape")], sort_keys=True,
                          default=repr)

    def code_version(self) -> str:
        """The versions of the code that shapes the instances: the reader's module (`READER_VERSION`,
        which covers everything the reader calls) and, with a protocol, `protocols.PROTOCOL_VERSION`."""
        module = sys.modules[self.reader.__module__]
        version = getattr(module, "READER_VERSION", None)
        if version is None:  # a programming error, caught by any test that fingerprints the dataset
            raise TypeError(f"dataset {self.name}: the reader's module {module.__name__} declares no "
                            "READER_VERSION (an int, bumped whenever its instances change)")
        code = f"{module.__name__}:{version}"
        return code + (f"|protocols:{protocols.PROTOCOL_VERSION}" if self._protocol_key() else "")

    def _protocol_key(self) -> str:
        """The protocol as text for the fingerprint; "" without one, so older fingerprints stay."""
        if self.carve_dev is None and self.folds is None and self.fold_index is None and not self.no_dev:
            return ""
        return (f"|carve_dev={self.carve_dev!r}|folds={self.folds!r}|fold={self.fold_index}"
                + ("|no_dev" if self.no_dev else ""))

    def _read_files(self, base: Path) -> Splits:
        if isinstance(self.folds, FILE_FOLDS):
            splits = self.reader(base, self.fold_index)
        else:
            splits = self.reader(base)
        if self.folds is None and self.carve_dev is None:
            return splits
        return apply_protocol(splits, self.folds, self.fold_index, self.carve_dev)


QUOTE_LIMIT = 200  # the most characters of a file's content an error line quotes


def shown(value: object, limit: int = QUOTE_LIMIT) -> str:
    """`value` as an error line quotes it (its repr), cut to `limit` characters with an ellipsis and its
    full length: a one-line file of 200 MB must not become an error line of 200 MB."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}… ({len(value):,} characters)"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


_READ_CACHE: dict[tuple[str, str], Splits] = {}  # (name, fingerprint) -> splits, least recent first
_READ_CACHE_SIZE = 16


@contextmanager
def _collector_paused() -> Iterator[None]:
    """CPython's cyclic garbage collector off while a reader runs: a parse makes hundreds of thousands of
    objects (ChemProt's instances, spans, tuples) and no garbage cycles, and each full collection it set off
    walked the whole heap again (torch, Lightning, MLflow): a third of ChemProt's and JNLPBA's parse time in
    a process that has imported them (docs/performance.md). Memory is still freed by reference counting."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()

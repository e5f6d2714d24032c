"""The fine-tuning LightningDataModule: registry entry -> reader -> instances -> encoder -> batches.

Three things make it fast without changing what is learned:

- **Tokenization cache.** Each split is encoded once and stored column-wise (`EncodedSplit`: one flat
  tensor per per-position feature plus offsets) under `<cache_dir>/<fingerprint>/`. The fingerprint
  covers everything that changes the encoded tensors (`split_fingerprint`), so a changed tokenizer,
  max_length, tagging scheme, input transform, encoder code or subsample is a new entry, never a stale hit.
- **Length-bucketed batches** (`BucketBatchSampler`, datamodules/batch_samplers.py): training examples
  are sorted by length within large random chunks, cut into batches, and the batches shuffled, so a batch
  pads to a length close to each of its examples'. Evaluation batches are sorted by length; predictions
  are keyed by example index, so their order does not matter. Under DDP the samplers give each rank a
  disjoint share; the Trainer must run with `use_distributed_sampler=False`.
- **Vectorised dynamic padding**: a batch is gathered from the flat columns with a few tensor ops.
- **Static shapes** (`finetune.static_shapes`, off by default): batches padded to a width in multiples of
  `SHAPE_STEP` tokens and training batches to the full batch size, with filler rows (`Shapes`), so a
  compiled or captured step sees a handful of shapes (one per width bucket) instead of one per batch.
  A filler row repeats the batch's first example with its labels at IGNORE_INDEX (`real` = False), so it
  adds nothing to any loss (lightning_modules/heads.py); padding positions are masked as ever.

It also owns scoring, because it holds the instances: the LightningModule hands it raw predictions keyed
by example index, and it returns the metrics of the split and the instance-level predictions.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pytorch_lightning as pl
import torch
from tokenizers import Tokenizer
from torch.utils.data import DataLoader, Sampler
from transformers import PreTrainedTokenizerBase

from bioablate_core.console import one_line
from bioablate_core.errors import BioablateError
from bioablate_core.fingerprints import digest, hash_files
from bioablate_core.manifests import damage, manifest_of
from datamodules.batch_samplers import BucketBatchSampler, SortedBatchSampler
from datamodules.encoders import IGNORE_INDEX, EncodingSpec, Features, TaskEncoder
from datamodules.instances import Instance
from datamodules.spec import SPLITS, DatasetSpec
from datamodules.task_kinds import make_encoder

log = logging.getLogger("bioablate")

CACHE_FORMAT = 1  # bump when EncodedSplit's stored layout changes


def subsample(instances: Sequence[Instance], limit: int | None, group_by: str | None = None) -> list[Instance]:
    """A fixed subset of `limit` instances, in corpus order, as a list. The shuffle seed is constant on
    purpose: every seed and every variant of an ablation must see the same examples. A split read on
    demand (`take`: datamodules/custom/tagged.py) reads only the instances drawn.

    `group_by`: an instance attribute whose equal values the metric scores together (a ranking's question,
    a BioASQ question's snippets: `TaskEncoder.group_by`); then whole groups are kept: the groups in a
    fixed random order, taken while the subset stays within `limit` (the first group even when it alone
    is larger), so that no question is scored on part of its candidates or snippets."""
    if limit is None or limit >= len(instances):
        return instances if isinstance(instances, list) else list(instances)
    if group_by is None:
        keep = sorted(random.Random(0).sample(range(len(instances)), limit))
        return _take(instances, keep)
    groups: dict[Any, list[int]] = {}
    for position, instance in enumerate(instances):
        groups.setdefault(getattr(instance, group_by), []).append(position)
    order = list(groups.values())
    random.Random(0).shuffle(order)
    chosen: list[int] = []
    for members in order:
        if chosen and len(chosen) + len(members) > limit:
            break
        chosen += members
    return _take(instances, sorted(chosen))


def _take(instances: Sequence[Instance], positions: list[int]) -> list[Instance]:
    take = getattr(instances, "take", None)
    return take(positions) if take is not None else [instances[i] for i in positions]


SHAPE_STEP = 32  # static shapes: batch widths are multiples of this (or the maximum length)

# Per-position features, padded to the batch's longest example with these values; everything else is one
# value (or one fixed-size vector) per example. Keys starting with "_" are bookkeeping, never batched.
POSITION_PAD = {"input_ids": None, "attention_mask": 0, "token_type_ids": 0, "tag_mask": 0,
                "head_mask": 0, "tail_mask": 0}


# ------------------------------------------------------------------------------------- encoded splits

@dataclass(frozen=True)
class Shapes:
    """Static batch shapes: widths rounded up to a multiple of SHAPE_STEP (at most `max_length`, which
    every example fits), and, with `rows`, batches filled to that many rows with filler rows."""

    max_length: int
    rows: int | None = None

    def width(self, longest: int) -> int:
        return min(-(-longest // SHAPE_STEP) * SHAPE_STEP, max(longest, self.max_length))

    def widths(self) -> list[int]:
        """Every width a batch can have."""
        return sorted({self.width(n) for n in range(1, self.max_length + 1)})

    def fill(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """`batch` with `real` (True for its examples) and, up to `rows`, filler rows: copies of its first
        example whose labels are IGNORE_INDEX (per position or per example) and whose `real` is False."""
        size = len(batch["index"])
        missing = 0 if self.rows is None else self.rows - size
        real = torch.arange(size + max(missing, 0)) < size
        if missing <= 0:
            return {**batch, "real": real}
        out = {key: torch.cat([value, value[:1].expand(missing, *value.shape[1:])]) for key, value in batch.items()}
        labels = out["labels"]
        if not labels.is_floating_point():  # class ids, tags, span ends: ignored by the cross-entropy
            out["labels"] = torch.where(real.view(-1, *[1] * (labels.dim() - 1)), labels, IGNORE_INDEX)
        out["index"] = torch.where(real, out["index"], -1)
        out["real"] = real
        return out


class EncodedSplit:
    """A split's features stored column-wise.

    - per-position columns (input_ids, masks, token labels): one flat int32 tensor, shared `offsets`;
    - bookkeeping columns ("_unit_words"): one flat tensor and offsets each (their own lengths);
    - per-example columns (class ids, regression targets, multi-label vectors, marker positions): one
      tensor with a row per example.
    """

    def __init__(self, columns: dict[str, torch.Tensor], position_keys: Sequence[str]):
        self.columns = columns
        self.position_keys = tuple(position_keys)
        self.offsets = columns["offsets"]
        self.lengths = self.offsets[1:] - self.offsets[:-1]

    def token_share(self, token_id: int) -> float:
        """The share of the split's input positions holding `token_id` (special tokens counted too)."""
        ids = self.columns["input_ids"]
        return float((ids == token_id).sum()) / max(1, ids.numel())

    @classmethod
    def from_features(cls, features: Sequence[Features], position_labels: bool) -> "EncodedSplit":
        if not features:
            raise ValueError("cannot store an empty split")
        position_keys = [k for k in features[0] if k in POSITION_PAD or (position_labels and k == "labels")]
        lengths = torch.tensor([len(f["input_ids"]) for f in features], dtype=torch.long)
        columns = {"offsets": torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])}
        for key in features[0]:
            values = [f[key] for f in features]
            if key in position_keys:
                columns[key] = torch.tensor([v for row in values for v in row], dtype=torch.int32)
            elif key.startswith("_"):
                sizes = torch.tensor([len(v) for v in values], dtype=torch.long)
                columns[key] = torch.tensor([v for row in values for v in row], dtype=torch.int32)
                columns[key + ".offsets"] = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)])
            else:  # one int, float or fixed-size float vector per example
                columns[key] = torch.tensor(values)
        return cls(columns, position_keys)

    def __len__(self) -> int:
        return len(self.lengths)

    def batch(self, indices: Sequence[int], pad_token_id: int, shapes: Shapes | None = None) -> dict[str, torch.Tensor]:
        """The examples `indices`, padded to the longest of them (dynamic padding), or with `shapes` to
        its width bucket and rows (static shapes)."""
        index = torch.as_tensor(indices, dtype=torch.long)
        lengths = self.lengths[index]
        width = int(lengths.max())
        if shapes is not None:
            return shapes.fill(self._gather(index, lengths, shapes.width(width), pad_token_id))
        return self._gather(index, lengths, width, pad_token_id)

    def _gather(self, index: torch.Tensor, lengths: torch.Tensor, width: int,
                pad_token_id: int) -> dict[str, torch.Tensor]:
        positions = torch.arange(width)
        valid = positions[None, :] < lengths[:, None]
        # gather every row's tokens from the flat columns at once; padding positions read any valid
        # element and are overwritten
        flat_index = (self.offsets[index][:, None] + positions[None, :]).clamp_(max=len(self.columns["input_ids"]) - 1)
        out: dict[str, torch.Tensor] = {}
        for key in self.position_keys:
            pad = pad_token_id if key == "input_ids" else (IGNORE_INDEX if key == "labels" else POSITION_PAD[key])
            out[key] = torch.where(valid, self.columns[key][flat_index].long(), pad)
        for key, column in self.columns.items():
            if key in out or key == "offsets" or key.startswith("_"):
                continue
            out[key] = column[index]
        out["index"] = index
        return out

    def example(self, i: int) -> Features:
        """The bookkeeping of example `i` as plain Python (what `TaskEncoder.decode` reads)."""
        out: Features = {"index": i}
        for key, column in self.columns.items():
            if key.startswith("_") and not key.endswith(".offsets"):
                offsets = self.columns[key + ".offsets"]
                out[key] = column[int(offsets[i]):int(offsets[i + 1])].tolist()
        return out

    def save(self, directory: Path, meta: dict[str, Any]) -> None:
        """Atomically: written to a unique temporary folder beside `directory`, then renamed into place
        (if another process got there first, its identical copy is kept)."""
        directory.parent.mkdir(parents=True, exist_ok=True)
        tmp = directory.with_name(f".{directory.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        tmp.mkdir()
        try:
            torch.save(self.columns, tmp / "columns.pt")
            (tmp / "meta.json").write_text(json.dumps({**meta, "position_keys": list(self.position_keys),
                                                       "examples": len(self),
                                                       "files": manifest_of(tmp, ["columns.pt"])}, indent=1))
            os.rename(tmp, directory)
        except OSError:
            if not (directory / "meta.json").is_file():
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    @classmethod
    def load(cls, directory: Path) -> "EncodedSplit | None":
        """The cached split, or None. A damaged entry (its file truncated or rewritten since it was saved,
        against the manifest in meta.json, or unreadable) is removed, so that it is encoded and saved anew."""
        if not directory.is_dir():
            return None
        try:
            meta = json.loads((directory / "meta.json").read_text())
        except (OSError, ValueError):
            meta = None
        problem = "meta.json is unreadable" if meta is None else damage(directory, meta.get("files", {}))
        if problem is None:
            try:
                return cls(torch.load(directory / "columns.pt", weights_only=True), meta["position_keys"])
            except (OSError, ValueError, RuntimeError, KeyError) as error:
                problem = f"columns.pt is unreadable ({one_line(error)})"
        log.warning("the tokenization cache %s is damaged (%s): encoding again", directory, problem)
        shutil.rmtree(directory, ignore_errors=True)
        return None


ENCODER_CODE = [Path(__file__).with_name(name) for name in
                ("encoders.py", "tagging.py", "relation_inputs.py", "instances.py", "finetune_data.py",
                 "qa_spans.py", "task_encoder.py")]


def tokenizer_fingerprint(tokenizer: PreTrainedTokenizerBase) -> str:
    """Hash of what decides token ids: the fast tokenizer's full definition (vocabulary, added tokens,
    normalizer incl. lowercasing, pre-tokenizer, post-processor), minus its transient truncation and
    padding settings, plus the class."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        # serialized by the Rust side (its JSON is canonical: fixed key and vocabulary order), with truncation
        # and padding cleared. A tokenizer that has not encoded yet has neither: its own JSON is that (~4 ms for
        # a 30k vocabulary); one that has is copied first and cleared (~40 ms: parsing the JSON back). Parsing
        # and re-dumping the JSON in Python took ~1 s per run.
        if backend.truncation is not None or backend.padding is not None:
            backend = Tokenizer.from_str(backend.to_str())
            backend.no_truncation()
            backend.no_padding()
        definition = {"backend": hashlib.sha256(backend.to_str().encode()).hexdigest()}
    else:  # a slow tokenizer: vocabulary, added tokens and casing
        definition = {"vocab": sorted(tokenizer.get_vocab().items()),
                      "lowercase": getattr(tokenizer, "do_lower_case", None)}
    definition["added"] = sorted(tokenizer.get_added_vocab().items())
    definition["class"] = type(tokenizer).__name__
    return digest(definition)


def split_fingerprint(data_fingerprint: str, split: str, limit: int | None, tokenizer_fp: str,
                      encoder: TaskEncoder, encoding: dict[str, Any], group_by: str | None = None) -> str:
    """Everything that changes a split's encoded tensors: the dataset content and reader, the split and
    its subsample (`group_by`: of whole groups), the tokenizer, max_length and the encoding choices, and
    the encoding code."""
    subset = {"limit": limit} if group_by is None else {"limit": limit, "group_by": group_by}
    return digest({
        "format": CACHE_FORMAT, "data": data_fingerprint, "split": split, **subset,
        "tokenizer": tokenizer_fp, "max_length": encoder.max_length, "encoder": type(encoder).__name__,
        "encoding": encoding, "code": hash_files(ENCODER_CODE),
    })


# ----------------------------------------------------------------------------------------- datamodule

@dataclass(frozen=True)
class FinetuneDataOptions:
    """How a fine-tuning dataset is encoded and batched (the `finetune.*` settings it depends on).
    `max_train_examples` / `max_eval_examples`: a fixed subsample of each split (None: all; evaluation
    splits of a task scored by group keep whole groups: `subsample`);
    `encoding`: the encoding choices (`bioablate list variants`);
    `bucketing`: length-bucketed training batches; `seed`: the training batch order;
    `static_shapes`: widths in multiples of SHAPE_STEP and full training batches (`Shapes`)."""

    max_length: int
    batch_size: int
    eval_batch_size: int
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    num_workers: int = 0
    encoding: EncodingSpec = EncodingSpec()
    bucketing: bool = True
    seed: int = 0
    static_shapes: bool = False


class FinetuneDataModule(pl.LightningDataModule):
    def __init__(self, spec: DatasetSpec, data_dir: Path | None, tokenizer: PreTrainedTokenizerBase,
                 options: FinetuneDataOptions, *, cache_dir: Path | None = None,
                 data_fingerprint: str | None = None):
        """`cache_dir`: where encoded splits are cached (None: no cache); `data_fingerprint`: the
        dataset's `spec.fingerprint(data_dir)` if the caller has it already."""
        super().__init__()
        self.spec, self.data_dir, self.tokenizer, self.options = spec, data_dir, tokenizer, options
        self.limits = {"train": options.max_train_examples, "dev": options.max_eval_examples,
                       "test": options.max_eval_examples}
        self.encoding = options.encoding.cache_key()  # part of the tokenization cache's key
        self.encoder: TaskEncoder = make_encoder(spec, tokenizer, options.max_length, options.encoding)
        self.cache_dir, self.data_fingerprint = cache_dir, data_fingerprint
        self.instances: dict[str, list[Instance]] = {}
        self.features: dict[str, EncodedSplit] = {}
        self.from_cache: dict[str, bool] = {}  # split -> read from the tokenization cache (not encoded)
        self.encode_calls = 0  # how many splits this datamodule tokenized itself

    def setup(self, stage: str | None = None) -> None:
        if self.instances:
            return
        splits = self.spec.read(self.data_dir)
        tokenizer_fp = tokenizer_fingerprint(self.tokenizer) if self.cache_dir is not None else ""
        for split in SPLITS:
            if split == "dev" and self.spec.no_dev:  # trained for a fixed number of epochs: nothing to evaluate
                self.instances[split] = []
                continue
            if not splits.get(split):
                raise BioablateError(f"dataset '{self.spec.name}' has no {split} split in "
                                     f"{self.spec.base_dir(self.data_dir)}; see docs/data.md")
            # evaluation keeps whole the groups its metric scores together (training needs no such care)
            group_by = self.encoder.group_by if split != "train" and self.limits[split] is not None else None
            self.instances[split] = subsample(splits[split], self.limits[split], group_by)
            entry = None
            if self.cache_dir is not None:
                if self.data_fingerprint is None:
                    self.data_fingerprint = self.spec.fingerprint(self.data_dir)
                key = split_fingerprint(self.data_fingerprint, split, self.limits[split], tokenizer_fp,
                                        self.encoder, self.encoding, group_by)
                entry = Path(self.cache_dir) / key
            if entry is not None and entry.is_dir():
                cached = EncodedSplit.load(entry)
                if cached is not None and self.encoder.encoded_instances(cached) == len(self.instances[split]):
                    self.features[split], self.from_cache[split] = cached, True
                    continue
                shutil.rmtree(entry, ignore_errors=True)  # unreadable (e.g. a disk filled up): redo it
            self.features[split] = EncodedSplit.from_features(self.encoder.encode(self.instances[split]),
                                                              self.encoder.position_labels)
            self.encode_calls += 1
            self.from_cache[split] = False
            if entry is not None:
                self.features[split].save(entry, {"task": self.spec.name, "split": split,
                                                  "limit": self.limits[split], **self.encoding,
                                                  "max_length": self.encoder.max_length})
                log.debug("cached %s/%s encoding in %s", self.spec.name, split, entry)

    def _rank(self) -> tuple[int, int]:
        trainer = self.trainer
        return (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)

    def shapes(self, split: str) -> Shapes | None:
        """The static shapes of `split`'s batches (None: dynamic padding). Evaluation batches are not
        filled with rows: they have one short batch at most, and their predictions are keyed by example."""
        if not self.options.static_shapes:
            return None
        return Shapes(self.encoder.max_length, self.options.batch_size if split == "train" else None)

    def _loader(self, split: str, sampler: Sampler) -> DataLoader:
        # batch_size=None: the sampler yields whole lists of indices and the dataset pads each list in
        # one go, so there is no per-example collate step
        return DataLoader(_Batches(self.features[split], self.tokenizer.pad_token_id, self.shapes(split)),
                          sampler=sampler, batch_size=None, collate_fn=_identity,
                          num_workers=self.options.num_workers, persistent_workers=self.options.num_workers > 0)

    def train_sampler(self) -> BucketBatchSampler:
        rank, world = self._rank()
        return BucketBatchSampler(self.features["train"].lengths, self.options.batch_size, self.options.seed,
                                  bucketing=self.options.bucketing, rank=rank, world_size=world,
                                  steps_done=self._steps_done)

    def _steps_done(self) -> int | None:
        return self.trainer.global_step if self.trainer is not None else None

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", self.train_sampler())

    def _eval_loader(self, split: str) -> DataLoader:
        rank, world = self._rank()
        return self._loader(split, SortedBatchSampler(self.features[split].lengths, self.options.eval_batch_size,
                                                      rank, world))

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader("dev")

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader("test")

    def score(self, split: str, raw: dict[int, Any]) -> tuple[dict[str, float], list[Any]]:
        """Raw predictions by example index -> (metrics, instance-level predictions in split order)."""
        features = self.features[split]
        if len(raw) != len(features) or set(raw) != set(range(len(features))):
            raise RuntimeError(f"{split}: got predictions for {len(raw)} of {len(features)} examples")
        predictions = self.encoder.decode_split(self.instances[split],
                                                [features.example(i) for i in range(len(features))],
                                                [raw[i] for i in range(len(features))])
        return self.encoder.score(self.instances[split], predictions), predictions


def _identity(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return batch


class _Batches(torch.utils.data.Dataset):
    """Indexing with a list of example indices returns the padded batch."""

    def __init__(self, split: EncodedSplit, pad_token_id: int, shapes: Shapes | None = None):
        self.split, self.pad_token_id, self.shapes = split, pad_token_id, shapes

    def __getitem__(self, indices: Sequence[int]) -> dict[str, torch.Tensor]:
        return self.split.batch(indices, self.pad_token_id, self.shapes)

    def __len__(self) -> int:
        return len(self.split)

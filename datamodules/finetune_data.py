"""The fine-tuning LightningDataModule: registry entry -> reader -> instances -> encoder -> batches.

It also owns scoring, because it holds the instances: the LightningModule hands it raw predictions keyed
by example index, and it returns the metrics of the split and the instance-level predictions.
"""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path
from typing import Any, Sequence

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader
from transformers import PreTrainedTokenizerBase

from datamodules.encoders import IGNORE_INDEX, Features, TaskEncoder, make_encoder
from datamodules.errors import BioablateError
from datamodules.instances import Instance
from datamodules.registry import SPLITS, DatasetSpec


def subsample(instances: list[Instance], limit: int | None) -> list[Instance]:
    """A fixed subset of `limit` instances, in corpus order. The shuffle seed is constant on purpose:
    every seed and every variant of an ablation must see the same examples."""
    if limit is None or limit >= len(instances):
        return instances
    keep = sorted(random.Random(0).sample(range(len(instances)), limit))
    return [instances[i] for i in keep]


# Per-position features, padded to the batch's longest example with these values; everything else is one
# value (or one fixed-size vector) per example. Keys starting with "_" are bookkeeping, never batched.
POSITION_PAD = {"input_ids": None, "attention_mask": 0, "token_type_ids": 0, "tag_mask": 0,
                "head_mask": 0, "tail_mask": 0}


def collate(features: Sequence[Features], pad_token_id: int, token_labels: bool) -> dict[str, torch.Tensor]:
    """Pad to the longest example of the batch (dynamic padding). `token_labels`: one label per position
    (tagging), padded with IGNORE_INDEX; otherwise one label per example."""
    width = max(len(f["input_ids"]) for f in features)
    pads = {**POSITION_PAD, "input_ids": pad_token_id, **({"labels": IGNORE_INDEX} if token_labels else {})}
    batch = {}
    for key in features[0]:
        if key.startswith("_"):
            continue
        if key in pads:
            batch[key] = torch.tensor([f[key] + [pads[key]] * (width - len(f[key])) for f in features])
        else:
            batch[key] = torch.tensor([f[key] for f in features])
    return batch


class FinetuneDataModule(pl.LightningDataModule):
    def __init__(self, spec: DatasetSpec, data_dir: Path | None, tokenizer: PreTrainedTokenizerBase,
                 max_length: int, batch_size: int, eval_batch_size: int,
                 max_train_examples: int | None = None, max_eval_examples: int | None = None,
                 num_workers: int = 0, tagging: str = "bio", subtoken_labels: str = "first",
                 re_input: str = "dummify"):
        super().__init__()
        self.spec, self.data_dir, self.tokenizer = spec, data_dir, tokenizer
        self.batch_size, self.eval_batch_size, self.num_workers = batch_size, eval_batch_size, num_workers
        self.limits = {"train": max_train_examples, "dev": max_eval_examples, "test": max_eval_examples}
        self.encoder: TaskEncoder = make_encoder(spec, tokenizer, max_length, tagging, subtoken_labels, re_input)
        self.instances: dict[str, list[Instance]] = {}
        self.features: dict[str, list[Features]] = {}

    def setup(self, stage: str | None = None) -> None:
        if self.instances:
            return
        splits = self.spec.read(self.data_dir)
        for split in SPLITS:
            if not splits.get(split):
                raise BioablateError(f"dataset '{self.spec.name}' has no {split} split in "
                                     f"{self.spec.base_dir(self.data_dir)}; see docs/data.md")
            self.instances[split] = subsample(splits[split], self.limits[split])
            features = self.encoder.encode(self.instances[split])
            for index, feature in enumerate(features):
                feature["index"] = index
            self.features[split] = features

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        return DataLoader(self.features[split], batch_size=self.batch_size if shuffle else self.eval_batch_size,
                          shuffle=shuffle, num_workers=self.num_workers,
                          collate_fn=partial(collate, pad_token_id=self.tokenizer.pad_token_id,
                                             token_labels=self.encoder.head == "token"))

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("dev", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)

    def score(self, split: str, raw: dict[int, Any]) -> tuple[dict[str, float], list[Any]]:
        """Raw predictions by example index -> (metrics, instance-level predictions in split order)."""
        features = self.features[split]
        if len(raw) != len(features):
            raise RuntimeError(f"{split}: got predictions for {len(raw)} of {len(features)} examples")
        predictions = [self.encoder.decode(f, raw[f["index"]]) for f in features]
        return self.encoder.score(self.instances[split], predictions), predictions

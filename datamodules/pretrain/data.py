"""Batches for pretraining: one dataset item is one whole micro-batch, masked on the fly.

Item `i` of the dataset for Lightning epoch `e` is the micro-batch this process trains at micro-step
``e * micro_steps_per_epoch + i``. Its samples come from the `BatchPlan` (global micro-batch
``micro_step * world_size + rank``) and its masks from a generator seeded with (seed, that global
micro-batch): fresh masks every time a sequence comes round again, identical masks in a resumed run.
The masking rate follows the schedule on the optimizer-step progress.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from datamodules.pretrain.masking import mask_batch, masking_rate
from datamodules.pretrain.shards import BatchPlan, Shards


class MicroBatches(Dataset):
    def __init__(self, shards: Shards, plan: BatchPlan, first_micro_step: int, last_micro_step: int, *,
                 rank: int, world_size: int, accumulate: int, max_steps: int, seed: int, masking: str,
                 rate: float, schedule: str, mask_id: int, replace_low: int, special_ids: list[int]):
        self.shards, self.plan = shards, plan
        self.first, self.last = first_micro_step, last_micro_step
        self.rank, self.world_size, self.accumulate, self.max_steps = rank, world_size, accumulate, max_steps
        self.seed, self.masking, self.rate, self.schedule = seed, masking, rate, schedule
        self.mask_id, self.replace_low = mask_id, replace_low
        self.special = torch.zeros(shards.meta["vocab_size"], dtype=torch.bool)
        self.special[special_ids] = True

    def __len__(self) -> int:
        return self.last - self.first

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        micro_step = self.first + i
        global_micro = micro_step * self.world_size + self.rank
        rows = np.sort(self.plan.indices(global_micro))
        ids = torch.from_numpy(np.asarray(self.shards.input_ids[rows], dtype=np.int64))
        word_start = torch.from_numpy(np.asarray(self.shards.word_start[rows])).bool()
        lengths = torch.from_numpy(np.asarray(self.shards.lengths[rows], dtype=np.int64))
        attention = torch.arange(ids.shape[1])[None, :] < lengths[:, None]
        special = self.special[ids] | ~attention
        rate = masking_rate((micro_step // self.accumulate) / self.max_steps, self.schedule, self.rate)
        generator = torch.Generator().manual_seed(int(self.seed) * 1_000_003 + global_micro)
        inputs, labels = mask_batch(ids, word_start, special, rate, self.masking, self.mask_id,
                                    self.replace_low, len(self.special), generator)
        return {"input_ids": inputs, "labels": labels, "attention_mask": attention.long(),
                "token_type_ids": torch.from_numpy(np.asarray(self.shards.token_type_ids[rows], dtype=np.int64)),
                "pair_labels": torch.from_numpy(np.asarray(self.shards.pair_labels[rows], dtype=np.int64)),
                "mask_rate": torch.tensor(rate)}

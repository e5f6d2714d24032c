"""Batches for pretraining: one dataset item is one whole micro-batch, masked on the fly.

`MicroBatches` yields the micro-batches this process trains at micro-steps ``first .. last - 1``. Micro-step
`m` reads global micro-batch ``m * world_size + rank`` of the `BatchPlan`, and its masks come from a
generator seeded with (seed, that global micro-batch): fresh masks every time a sequence comes round
again, identical masks in a resumed run. The masking rate follows the schedule on the optimizer-step
progress. Each batch carries its global micro-batch number (``micro_batch``, a plain int), which seeds
everything random in the training step (dropout, ELECTRA's sampling): a batch's result depends only on
(seed, micro-batch), never on how many batches this process has seen.

It is an IterableDataset *without* a length on purpose: Lightning counts batches of a sized loader and,
resuming a run mid-epoch, would end the resumed epoch early (and step the optimizer on a partial
accumulation). Without a length, an epoch simply ends when the micro-steps run out. With several
DataLoader workers, worker `w` takes every `num_workers`-th micro-step; the loader returns the workers'
batches round-robin, i.e. in micro-step order.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from datamodules.pretrain.masking import mask_batch, masking_rate
from datamodules.pretrain.shards import BatchPlan, Shards


def batch_seed(seed: int, micro_batch: int, stream: int) -> int:
    """A seed for one random stream (0: masks, 1: the training step) of one global micro-batch;
    different streams of the same micro-batch get unrelated seeds."""
    return int(np.random.SeedSequence([int(seed), int(micro_batch), stream]).generate_state(1)[0])


class MicroBatches(IterableDataset):
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

    def __iter__(self):
        worker = get_worker_info()
        offset, stride = (0, 1) if worker is None else (worker.id, worker.num_workers)
        for micro_step in range(self.first + offset, self.last, stride):
            yield self.batch(micro_step)

    def batch(self, micro_step: int) -> dict:
        global_micro = micro_step * self.world_size + self.rank
        rows = np.sort(self.plan.indices(global_micro))
        ids = torch.from_numpy(np.asarray(self.shards.input_ids[rows], dtype=np.int64))
        word_start = torch.from_numpy(np.asarray(self.shards.word_start[rows])).bool()
        lengths = torch.from_numpy(np.asarray(self.shards.lengths[rows], dtype=np.int64))
        attention = torch.arange(ids.shape[1])[None, :] < lengths[:, None]
        special = self.special[ids] | ~attention
        rate = masking_rate((micro_step // self.accumulate) / self.max_steps, self.schedule, self.rate)
        generator = torch.Generator().manual_seed(batch_seed(self.seed, global_micro, 0))
        inputs, labels = mask_batch(ids, word_start, special, rate, self.masking, self.mask_id,
                                    self.replace_low, len(self.special), generator)
        return {"input_ids": inputs, "labels": labels, "attention_mask": attention.long(),
                "token_type_ids": torch.from_numpy(np.asarray(self.shards.token_type_ids[rows], dtype=np.int64)),
                "pair_labels": torch.from_numpy(np.asarray(self.shards.pair_labels[rows], dtype=np.int64)),
                "mask_rate": torch.tensor(rate), "micro_batch": global_micro}

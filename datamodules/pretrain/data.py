"""Batches for pretraining: one dataset item is one whole micro-batch, masked on the fly.

Micro-step `m` reads global micro-batch ``m * world_size + rank`` of the `BatchPlan`, and everything random
about it (masks, then dropout in the step) is seeded by (seed, that micro-batch), so a resumed run sees
what an uninterrupted one would. A batch carries its predicted positions as indices (`mlm_positions`).

An IterableDataset without a length on purpose: Lightning would end a resumed epoch early on a sized
loader, stepping on a partial accumulation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from bioablate_core.seeding import batch_seed
from datamodules.pretrain.masking import MaskingSpec, MaskTokens, mask_batch, prediction_slots
from datamodules.pretrain.shards import BatchPlan, Shards


@dataclass(frozen=True)
class BatchingSpec:
    """How a run cuts its shards into steps: `batch_size` sequences per micro-batch and process, `accumulate`
    per optimizer step, `max_steps`, a checkpoint (an epoch) every `checkpoint_every`, and the `seed`."""

    batch_size: int
    accumulate: int
    max_steps: int
    checkpoint_every: int
    seed: int

    @classmethod
    def from_config(cls, pretrain: Any, seed: int) -> "BatchingSpec":
        """From the `pretrain` section of a run config and the run's seed."""
        return cls(pretrain.batch_size, pretrain.accumulate, pretrain.max_steps, pretrain.checkpoint_every, seed)

    def plan(self, shards: Shards, world_size: int) -> BatchPlan:
        """Which sequences each global micro-batch of the whole run (every process) holds."""
        return BatchPlan(shards.stage_sizes, self.batch_size, self.max_steps * self.accumulate * world_size,
                         self.seed)

    def epoch(self, global_step: int) -> range:
        """The micro-steps from optimizer step `global_step` to the next checkpoint, or the end."""
        micro_per_epoch = self.checkpoint_every * self.accumulate
        first = global_step * self.accumulate
        return range(first, min((first // micro_per_epoch + 1) * micro_per_epoch, self.max_steps * self.accumulate))

    def progress(self, micro_step: int) -> float:
        """Training progress at a micro-step (0 at the first optimizer step): what the mask schedule reads."""
        return (micro_step // self.accumulate) / self.max_steps


class MicroBatches(IterableDataset):
    def __init__(self, shards: Shards, micro_steps: range, *, rank: int, world_size: int, batching: BatchingSpec,
                 masking: MaskingSpec, tokens: MaskTokens):
        self.shards, self.plan = shards, batching.plan(shards, world_size)
        self.micro_steps, self.rank, self.world_size = micro_steps, rank, world_size
        self.batching, self.masking, self.tokens = batching, masking, tokens
        self.special = torch.zeros(shards.meta["vocab_size"], dtype=torch.bool)
        self.special[list(tokens.special_ids)] = True

    def __iter__(self):
        worker = get_worker_info()
        offset, stride = (0, 1) if worker is None else (worker.id, worker.num_workers)
        for micro_step in self.micro_steps[offset::stride]:
            yield self.batch(micro_step)

    def batch(self, micro_step: int) -> dict:
        global_micro = micro_step * self.world_size + self.rank
        rows = np.sort(self.plan.indices(global_micro))
        ids = torch.from_numpy(np.asarray(self.shards.input_ids[rows], dtype=np.int64))
        word_start = torch.from_numpy(np.asarray(self.shards.word_start[rows])).bool()
        lengths = torch.from_numpy(np.asarray(self.shards.lengths[rows], dtype=np.int64))
        attention = torch.arange(ids.shape[1])[None, :] < lengths[:, None]
        special = self.special[ids] | ~attention
        rate = self.masking.rate_at(self.batching.progress(micro_step))
        generator = torch.Generator().manual_seed(batch_seed(self.batching.seed, global_micro, 0))
        inputs, labels = mask_batch(ids, word_start, special, rate, self.masking.mode, self.tokens.mask_id,
                                    self.tokens.replace_low, len(self.special), generator,
                                    self.masking.max_predictions)
        positions, slot_labels = prediction_slots(labels, self.masking.max_predictions)
        batch = {"input_ids": inputs, "labels": labels, "attention_mask": attention.long(),
                "mlm_positions": positions, "mlm_labels": slot_labels,
                "token_type_ids": torch.from_numpy(np.asarray(self.shards.token_type_ids[rows], dtype=np.int64)),
                "pair_labels": torch.from_numpy(np.asarray(self.shards.pair_labels[rows], dtype=np.int64)),
                # host numbers, never read back from the device: the masking rate and the real tokens
                "mask_rate": rate, "tokens": int(lengths.sum()), "micro_batch": global_micro}
        if self.shards.segments is not None:
            batch.update(packed_positions(torch.from_numpy(np.asarray(self.shards.segments[rows], dtype=np.int64))))
        return batch


def packed_positions(segments: torch.Tensor) -> dict[str, torch.Tensor]:
    """A packed batch's `document_ids` (its `segments`) and `position_ids`, restarting at every sequence."""
    index = torch.arange(segments.shape[1]).expand_as(segments)
    starts = torch.ones_like(segments, dtype=torch.bool)
    starts[:, 1:] = segments[:, 1:] != segments[:, :-1]
    first = torch.where(starts, index, 0).cummax(dim=1).values  # where each token's sequence starts
    return {"document_ids": segments, "position_ids": index - first}

"""The batch samplers of fine-tuning (datamodules/finetune_data.py): which examples form each batch, in
which order, on which rank.

- **Length-bucketed training batches** (`BucketBatchSampler`): training examples are sorted by length
  within large random chunks, cut into batches, and the batches shuffled, so a batch pads to a length
  close to each of its examples'; seeded by (seed, epoch).
- **Evaluation batches** (`SortedBatchSampler`) are sorted by length; predictions are keyed by example
  index, so their order does not matter.

Under DDP each rank gets a disjoint share (training: the same number of batches per rank, so no rank
waits for gradients that never come; evaluation: every example exactly once, nothing padded or repeated
into the metrics). The Trainer must run with `use_distributed_sampler=False`.
"""

from __future__ import annotations

from typing import Callable, Iterator

import torch
from torch.utils.data import Sampler


def _check_rank(rank: int, world_size: int) -> None:
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} outside world size {world_size}")


class BucketBatchSampler(Sampler[list[int]]):
    """Training batches, seeded by (seed, epoch) so every epoch is reproducible and a resumed run sees
    the batches an uninterrupted one would.

    With `bucketing`: shuffle all examples, sort by length within chunks of `chunk_batches` batches, cut
    each chunk into batches, shuffle the batches. Without: shuffle and cut. The batch list is then dealt
    round-robin to the `world_size` ranks, padded with repeats of its first batches to a multiple of the
    world size so every rank takes the same number of optimizer steps.

    The epoch: with `steps_done` (the trainer's optimizer steps so far; one step per batch), the epoch an
    iteration starts is `steps_done() // len(self)` when its first batch is drawn, which a resumed run
    gets right (a run resumed from the first epoch's checkpoint drew its second epoch in the first
    epoch's order: Lightning made that iterator before restoring the checkpoint, and `set_epoch(1)`
    came after it). Without it (no trainer), the epoch given to `set_epoch` (Lightning calls it on a
    DataLoader's `sampler` at each epoch start)."""

    def __init__(self, lengths: torch.Tensor, batch_size: int, seed: int, bucketing: bool = True,
                 chunk_batches: int = 64, rank: int = 0, world_size: int = 1,
                 steps_done: Callable[[], int | None] | None = None):
        _check_rank(rank, world_size)
        self.lengths, self.batch_size, self.seed = lengths, batch_size, seed
        self.bucketing, self.chunk_batches = bucketing, chunk_batches
        self.rank, self.world_size, self.epoch = rank, world_size, 0
        self.steps_done = steps_done

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def global_batches(self) -> list[list[int]]:
        """Every rank's batches of this epoch, before dealing them out."""
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        order = torch.randperm(len(self.lengths), generator=generator)
        if self.bucketing:
            chunk = self.batch_size * self.chunk_batches
            pieces = []
            for start in range(0, len(order), chunk):
                part = order[start:start + chunk]
                # stable sort of a random order: equal lengths stay randomly ordered
                pieces.append(part[torch.argsort(self.lengths[part], stable=True)])
            order = torch.cat(pieces)
        batches = list(torch.split(order, self.batch_size))
        if self.bucketing:  # otherwise already in random order; keep the last (short) batch last
            batches = [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
        return [b.tolist() for b in batches]

    def __iter__(self) -> Iterator[list[int]]:
        # A generator: the epoch is read when the first batch is drawn, not when the DataLoader makes
        # its iterator (Lightning makes the first one before it restores a checkpoint's step count).
        steps = self.steps_done() if self.steps_done is not None else None
        if steps is not None:
            self.epoch = steps // len(self)
        batches = self.global_batches()
        extra = (-len(batches)) % self.world_size
        batches += batches[:extra]
        yield from batches[self.rank::self.world_size]

    def __len__(self) -> int:
        total = -(-len(self.lengths) // self.batch_size)
        return -(-total // self.world_size)


class SortedBatchSampler(Sampler[list[int]]):
    """Evaluation batches: this rank's share of the examples (every `world_size`-th one in length order,
    so each rank gets a similar mix), sorted by length, cut into batches. No example repeats across
    ranks."""

    def __init__(self, lengths: torch.Tensor, batch_size: int, rank: int = 0, world_size: int = 1):
        _check_rank(rank, world_size)
        order = torch.argsort(lengths, stable=True)[rank::world_size]
        self.batches = [b.tolist() for b in torch.split(order, batch_size)]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)

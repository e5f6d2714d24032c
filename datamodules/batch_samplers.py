"""The batch samplers of fine-tuning: which examples form each batch, in which order, on which rank.

Training batches are length-bucketed and seeded by (seed, epoch); evaluation batches are sorted by length.
Under DDP each rank gets a disjoint share: the same number of training batches per rank, so none waits
for gradients that never come, and every evaluation example exactly once. The Trainer must run with
`use_distributed_sampler=False`.
"""

from __future__ import annotations

from typing import Callable, Iterator

import torch
from torch.utils.data import Sampler


def _check_rank(rank: int, world_size: int) -> None:
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} outside world size {world_size}")


class BucketBatchSampler(Sampler[list[int]]):
    """Training batches, seeded by (seed, epoch), so a resumed run sees the batches an uninterrupted one would.

    With `bucketing`, examples are sorted by length within chunks of `chunk_batches` batches and the batches
    shuffled. Batches are dealt round-robin to the `world_size` ranks, padded with repeats to a multiple.
    The epoch is `steps_done() // len(self)` when the first batch is drawn, since Lightning makes the first
    iterator before it restores a checkpoint; without `steps_done`, the one given to `set_epoch`."""

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
        # a generator: the epoch is read when the first batch is drawn, after a checkpoint is restored
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
    """Evaluation batches: every `world_size`-th example in length order, cut into batches; none repeats."""

    def __init__(self, lengths: torch.Tensor, batch_size: int, rank: int = 0, world_size: int = 1):
        _check_rank(rank, world_size)
        order = torch.argsort(lengths, stable=True)[rank::world_size]
        self.batches = [b.tolist() for b in torch.split(order, batch_size)]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)

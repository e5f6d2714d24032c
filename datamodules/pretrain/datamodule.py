"""The pretraining LightningDataModule: tokenized shards -> the micro-batches of the next checkpoint interval.

A Lightning epoch is the next `checkpoint_every` optimizer steps from the current one, so a checkpoint
falls on every epoch end and a resumed run starts its first epoch at the restored optimizer step (the
Trainer must reload the train loader every epoch: `reload_dataloaders_every_n_epochs=1`).
"""

from __future__ import annotations

import pytorch_lightning as pl
from torch.utils.data import DataLoader

from datamodules.pretrain.data import MicroBatches
from datamodules.pretrain.shards import BatchPlan, Shards
from datamodules.pretrain.vocab import SPECIAL_TOKENS


class PretrainData(pl.LightningDataModule):
    def __init__(self, shards: Shards, vocab: list[str], *, batch_size: int, accumulate: int, max_steps: int,
                 checkpoint_every: int, seed: int, masking: str, mask_rate: float, mask_schedule: str,
                 num_workers: int = 0):
        super().__init__()
        self.shards, self.vocab = shards, vocab
        self.batch_size, self.accumulate, self.max_steps = batch_size, accumulate, max_steps
        self.checkpoint_every, self.seed = checkpoint_every, seed
        self.masking, self.mask_rate, self.mask_schedule = masking, mask_rate, mask_schedule
        self.num_workers = num_workers

    def train_dataloader(self) -> DataLoader:
        trainer = self.trainer
        world = trainer.world_size
        micro_per_epoch = self.checkpoint_every * self.accumulate
        total_micro = self.max_steps * self.accumulate
        # keyed by the restored optimizer step, not Lightning's epoch counter (a resumed fit loop counts
        # the interrupted epoch its own way); an epoch ends at the next checkpoint boundary
        first = trainer.global_step * self.accumulate
        last = min((first // micro_per_epoch + 1) * micro_per_epoch, total_micro)
        plan = BatchPlan(self.shards.stage_sizes, self.batch_size, total_micro * world, self.seed)
        index = {t: i for i, t in enumerate(self.vocab)}
        special_ids = [index[t] for t in SPECIAL_TOKENS]
        dataset = MicroBatches(
            self.shards, plan, first, last, rank=trainer.global_rank,
            world_size=world, accumulate=self.accumulate, max_steps=self.max_steps, seed=self.seed,
            masking=self.masking, rate=self.mask_rate, schedule=self.mask_schedule, mask_id=index["[MASK]"],
            replace_low=max(special_ids) + 1, special_ids=special_ids)
        return DataLoader(dataset, batch_size=None, shuffle=False, num_workers=self.num_workers)

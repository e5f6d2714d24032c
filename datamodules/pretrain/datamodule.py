"""The pretraining LightningDataModule: tokenized shards -> the micro-batches of the next checkpoint interval.

A Lightning epoch is the next `checkpoint_every` optimizer steps from the current one, so a checkpoint
falls on every epoch end and a resumed run starts its first epoch at the restored optimizer step (the
Trainer must reload the train loader every epoch: `reload_dataloaders_every_n_epochs=1`).
"""

from __future__ import annotations

import pytorch_lightning as pl
from torch.utils.data import DataLoader

from datamodules.pretrain.data import BatchingSpec, MicroBatches
from datamodules.pretrain.masking import MaskingSpec, MaskTokens
from datamodules.pretrain.shards import Shards


class PretrainData(pl.LightningDataModule):
    def __init__(self, shards: Shards, vocab: list[str], *, batching: BatchingSpec, masking: MaskingSpec,
                 num_workers: int = 0):
        super().__init__()
        self.shards, self.tokens = shards, MaskTokens.from_vocab(vocab)
        self.batching, self.masking, self.num_workers = batching, masking, num_workers

    def train_dataloader(self) -> DataLoader:
        trainer = self.trainer
        # keyed by the restored optimizer step: a resumed fit loop counts epochs its own way
        dataset = MicroBatches(self.shards, self.batching.epoch(trainer.global_step), rank=trainer.global_rank,
                               world_size=trainer.world_size, batching=self.batching, masking=self.masking,
                               tokens=self.tokens)
        # masking runs in the loader's workers; pinned memory makes the copy to the GPU asynchronous
        return DataLoader(dataset, batch_size=None, shuffle=False, num_workers=self.num_workers,
                          pin_memory=trainer.strategy.root_device.type == "cuda")

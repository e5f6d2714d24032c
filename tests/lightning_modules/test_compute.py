"""What a run cost (lightning_modules/compute.py): the counter's FLOPs are the benchmarks' per-token count
times the tokens of every batch (a third of it for evaluation), for every transformer encoder in the module
(ELECTRA's two), and its device time and peak memory are recorded."""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from transformers import BertConfig, BertForMaskedLM, BertModel

from lightning_modules.compute import ComputeCounter, encoder_sizes, transformer_train_flops_per_token

CONFIG = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)


class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.encoder = BertModel(CONFIG)

    def training_step(self, batch, _):
        return self.encoder(input_ids=batch["input_ids"]).last_hidden_state.mean()

    def validation_step(self, batch, _):
        self.encoder(input_ids=batch["input_ids"])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def batches(lengths):
    from torch.utils.data import DataLoader

    return DataLoader([{"input_ids": torch.randint(0, 50, (4, n))} for n in lengths], batch_size=None)


def test_flops_are_the_per_token_count_times_each_batch_s_tokens():
    counter = ComputeCounter()
    trainer = pl.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         callbacks=[counter])
    train, dev = batches([8, 12, 8]), batches([10])
    trainer.fit(Tiny(), train_dataloaders=train, val_dataloaders=dev)
    per = lambda n: transformer_train_flops_per_token(16, 2, 32, n)  # noqa: E731
    expected = 4 * (8 * per(8) + 12 * per(12) + 8 * per(8)) + 4 * 10 * per(10) / 3
    metrics = counter.metrics()
    assert metrics["system/compute/flops"] == expected
    assert metrics["system/compute/train_tokens"] == 4 * 28 and metrics["system/compute/eval_tokens"] == 40
    assert metrics["system/compute/device_seconds"] > 0 and metrics["system/compute/peak_memory_bytes"] > 2 ** 20


def test_every_base_encoder_counts_once_not_its_wrappers():
    wrapped = torch.nn.ModuleDict({"generator": BertForMaskedLM(CONFIG), "discriminator": BertModel(CONFIG)})
    assert encoder_sizes(wrapped) == [(16, 2, 32), (16, 2, 32)]

"""The fine-tuning LightningModule: encoder + task head, trained end to end (paper Sec. 2.4-2.5).

One batch, start to finish:
    batch (input_ids, attention_mask, token_type_ids, labels, index)   <- datamodules/finetune_data.py
    -> encoder(...).last_hidden_state                                  [B, T, H]
    -> head(hidden, batch)                                             logits
    -> head.loss(logits, batch)                                        training
    -> head.predict(logits, batch) -> encoder.collect(...)            evaluation: raw predictions per
       example, keyed by index; at epoch end the datamodule decodes and scores them.

Dev is scored every epoch (`dev/<metric>`, `dev/score` = the primary metric); the best dev epoch is what
ModelCheckpoint keeps and what the test set is scored with.
"""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
import torch
import torch.distributed as dist
from torch import nn

from lightning_modules.optim import adamw_with_linear_warmup


class FineTuneModule(pl.LightningModule):
    def __init__(self, encoder: nn.Module, head: nn.Module, lr: float, weight_decay: float,
                 warmup_ratio: float):
        super().__init__()
        self.encoder, self.head = encoder, head
        self.lr, self.weight_decay, self.warmup_ratio = lr, weight_decay, warmup_ratio
        self._raw: dict[int, Any] = {}  # example index -> raw prediction, for the split being evaluated
        self.dev_history: list[dict[str, float]] = []  # metrics of every dev evaluation, in order
        self.test_metrics: dict[str, float] = {}
        self.test_predictions: list[Any] = []

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        hidden = self.encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                              token_type_ids=batch["token_type_ids"]).last_hidden_state
        return self.head(hidden, batch)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.head.loss(self(batch), batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch["index"]))
        return loss

    # ---- evaluation: collect raw predictions by example index, score once per epoch ----

    def _collect(self, batch: dict[str, torch.Tensor]) -> None:
        predictions = self.head.predict(self(batch), batch).cpu()
        batch_cpu = {k: v.cpu() for k, v in batch.items()}
        raw = self.trainer.datamodule.encoder.collect(batch_cpu, predictions)
        self._raw.update(zip(batch_cpu["index"].tolist(), raw))

    def _score(self, split: str) -> tuple[dict[str, float], list[Any]]:
        raw = self._raw
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            # Each rank saw a shard (the sampler may repeat examples to even them out; keying by index
            # removes the repeats). Every rank gets the full set and computes the same metrics.
            shards: list[dict[int, Any]] = [{} for _ in range(dist.get_world_size())]
            dist.all_gather_object(shards, raw)
            raw = {k: v for shard in shards for k, v in shard.items()}
        self._raw = {}
        return self.trainer.datamodule.score(split, raw)

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._collect(batch)

    def on_validation_epoch_end(self) -> None:
        metrics, _ = self._score("dev")
        self.dev_history.append(metrics)
        self.log_dict({f"dev/{k}": float(v) for k, v in metrics.items() if k != "score"})
        self.log("dev/score", float(metrics["score"]), prog_bar=True)

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._collect(batch)

    def on_test_epoch_end(self) -> None:
        self.test_metrics, self.test_predictions = self._score("test")
        self.log_dict({f"test/{k}": float(v) for k, v in self.test_metrics.items()})

    # dev_history decides which epoch was best: it must survive a resume from a checkpoint.
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["dev_history"] = self.dev_history

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.dev_history = checkpoint.get("dev_history", [])

    def configure_optimizers(self):
        return adamw_with_linear_warmup(self, self.lr, self.weight_decay, self.warmup_ratio,
                                        total_steps=int(self.trainer.estimated_stepping_batches))

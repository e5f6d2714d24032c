"""The fine-tuning LightningModule: encoder + task head, trained end to end (paper Sec. 2.4-2.5).

One batch, start to finish:
    batch (input_ids, attention_mask, token_type_ids, labels, index)   <- datamodules/finetune_data.py
    -> encoder(...).last_hidden_state                                  [B, T, H]
    -> head(hidden, batch)                                             logits
    -> head.loss(logits, batch)                                        training
       (+ alpha x ALUM's adversarial term with `finetune.adversarial`: lightning_modules/algorithms/alum.py)
    -> head.predict(logits, batch) -> encoder.gather(...)             evaluation: tensors kept per batch
       (no per-example Python in the loop); at epoch end they are concatenated, gathered from every DDP
       rank, unpacked by example index, and the datamodule decodes and scores them.

The test set is scored at the best dev epoch, or without a dev split at the last. A resumed run ends with
the weights and scores of an uninterrupted one: batches depend only on (seed, epoch), and dropout and ALUM's
noise draw from a stream seeded by (seed, optimizer step), never the global random state.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
import torch.distributed as dist
from torch import nn

from bioablate_core.seeding import batch_seed
from datamodules.metrics import curve_keys, summary_keys
from lightning_modules.algorithms.alum import Alum
from lightning_modules.optim import adamw_with_linear_warmup

# encoders whose transformers implementation takes a prepared [B, 1, q, k] mask as it is
PREPARED_MASK_TYPES = frozenset({"bert", "albert", "electra", "roberta", "xlm-roberta"})


def attention_mask_for(encoder: nn.Module, attention_mask: torch.Tensor) -> torch.Tensor:
    """The [B, 1, 1, T] boolean mask transformers' SDPA path builds, built here so transformers does not
    call `mask.all()`, which makes the host wait for the device at every step. The attention is the same."""
    if getattr(getattr(encoder, "config", None), "model_type", None) not in PREPARED_MASK_TYPES:
        return attention_mask
    return attention_mask.bool()[:, None, None, :]


class FineTuneModule(pl.LightningModule):
    def __init__(self, encoder: nn.Module, head: nn.Module, lr: float, weight_decay: float,
                 warmup_ratio: float, alum: Alum | None = None, seed: int = 0, read_every: int = 1):
        super().__init__()
        self.encoder, self.head = encoder, head
        self.lr, self.weight_decay, self.warmup_ratio = lr, weight_decay, warmup_ratio
        self.alum, self.seed = alum, seed
        # evaluation outputs of the split being evaluated: (example indices, gathered values, counts)
        self._outputs: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        self.dev_history: list[dict[str, float]] = []  # metrics of every dev evaluation, in order
        self.test_metrics: dict[str, float] = {}
        self.test_predictions: list[Any] = []
        # this epoch's (loss sum, steps), checkpointed so a run resumed mid-epoch gets the whole epoch's mean
        self._loss_sum: torch.Tensor | float = 0.0
        self._loss_steps = 0
        # (step, epoch, {name: loss}) of each step since the last read: losses stay on the device until then
        self.read_every = read_every
        self._unread: list[tuple[int, int, dict[str, torch.Tensor]]] = []
        self._batch_loss = self.batch_loss  # compiled by compile_step

    def logits(self, batch: dict[str, torch.Tensor], inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        """Head logits; from `inputs_embeds` (word embeddings, e.g. perturbed ones) instead of the ids."""
        inputs = {"input_ids": batch["input_ids"]} if inputs_embeds is None else {"inputs_embeds": inputs_embeds}
        hidden = self.encoder(**inputs, attention_mask=attention_mask_for(self.encoder, batch["attention_mask"]),
                              token_type_ids=batch["token_type_ids"]).last_hidden_state
        return self.head(hidden, batch)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.logits(batch)

    def batch_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The training loss of `batch` (encoder, head, loss): what `compile_step` compiles."""
        return self.head.loss(self(batch), batch)

    def compile_step(self, buckets: int, cache_dir: Path | None = None, backend: str = "inductor") -> None:
        """Compile `batch_loss` and its backward whole (`fullgraph=True`), one graph per width bucket;
        `buckets` raises the compiler's graph limit to fit them. `backend` is torch.compile's."""
        if cache_dir is not None:
            os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache_dir))
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, buckets)
        self._batch_loss = torch.compile(self.batch_loss, fullgraph=True, dynamic=False, backend=backend)

    def on_train_batch_start(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        # not batch_idx: Lightning restarts or continues it depending on where it resumes
        torch.manual_seed(batch_seed(self.seed, self.global_step, 1))

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        if self.alum is None:
            loss = self._batch_loss(batch)
            logged = {"train/loss": loss.detach()}
        else:
            # ALUM perturbs the word embeddings; position and segment embeddings are added inside
            embeds = self.encoder.get_input_embeddings()(batch["input_ids"])
            logits = self.logits(batch, embeds)
            loss = self.head.loss(logits, batch)
            adversarial = self.alum(lambda e: self.head.adversarial_view(self.logits(batch, e), batch), embeds,
                                    self.head.adversarial_view(logits, batch))
            logged = {"train/task_loss": loss.detach(), "train/adversarial_loss": adversarial.detach()}
            loss = loss + adversarial
            logged["train/loss"] = loss.detach()
        if self._trainer is not None:  # (a step taken outside a Trainer logs nothing)
            self._unread.append((self.global_step, self.current_epoch, logged))
        self._loss_sum = self._loss_sum + loss.detach()
        self._loss_steps += 1
        return loss

    def on_train_batch_end(self, outputs: Any, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        last = self.trainer.is_last_batch
        if last or len(self._unread) >= self.read_every:
            shown = self._read_losses()
            if shown is not None:  # a number, not `self.log`, which is read back at every bar refresh
                self.trainer.progress_bar_metrics["train/loss"] = shown
        # without dev evaluation, the epoch's mean loss at its last step: at the epoch's end, last.ckpt comes first
        if self.trainer.limit_val_batches == 0 and last and self._loss_steps:
            self.log("train/loss_epoch", float(self._loss_sum) / self._loss_steps)
            self._loss_sum, self._loss_steps = 0.0, 0

    def _read_losses(self) -> float | None:
        """Log the unread steps' losses, copied at once, each at its step; returns the last, or None."""
        if not self._unread:
            return None
        names = list(self._unread[0][2])
        values = torch.stack([torch.stack([logged[n] for n in names]) for _, _, logged in self._unread]).tolist()
        for (step, epoch, _), row in zip(self._unread, values):
            for logger in self.loggers:
                logger.log_metrics({**dict(zip(names, row)), "epoch": epoch}, step=step)
        self._unread = []
        return values[-1][names.index("train/loss")]

    # ---- evaluation: keep tensors per batch, decode and score once per epoch ----

    def _collect(self, batch: dict[str, torch.Tensor]) -> None:
        predictions = self.head.predict(self(batch), batch)
        values, counts = self.trainer.datamodule.encoder.gather(batch, predictions)
        self._outputs.append((batch["index"], values, counts))

    def _score(self, split: str) -> tuple[dict[str, float], list[Any]]:
        encoder = self.trainer.datamodule.encoder
        if self._outputs:
            index, values, counts = (torch.cat(parts).cpu() for parts in zip(*self._outputs))
        else:  # a rank with nothing to evaluate still takes part in the gather below
            index = counts = torch.zeros(0, dtype=torch.long)
            values = torch.zeros(0)
        self._outputs = []
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            # each rank evaluated a disjoint share; every rank gets the full set and computes the same metrics
            shards: list[Any] = [None] * dist.get_world_size()
            dist.all_gather_object(shards, (index, values, counts))
            shards = [s for s in shards if len(s[0])]
            index = torch.cat([s[0] for s in shards])
            values = torch.cat([s[1] for s in shards])
            counts = torch.cat([s[2] for s in shards])
        raw = dict(zip(index.tolist(), encoder.unpack(values, counts)))
        return self.trainer.datamodule.score(split, raw)

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._collect(batch)

    def on_validation_epoch_end(self) -> None:
        metrics, _ = self._score("dev")
        self.dev_history.append(metrics)
        # every key for callbacks (a sweep's objective may be any of them); the charts get the curves
        charted = set(curve_keys(metrics))
        for key, value in metrics.items():
            self.log(f"dev/{key}", float(value), prog_bar=key == "score", logger=key in charted)
        if self._loss_steps:  # the epoch's mean training loss, at the step of its dev scores
            self.log("train/loss_epoch", float(self._loss_sum) / self._loss_steps)
        self._loss_sum, self._loss_steps = 0.0, 0

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        self._collect(batch)

    def on_test_epoch_end(self) -> None:
        self.test_metrics, self.test_predictions = self._score("test")
        self.log_dict({f"test/{k}": float(self.test_metrics[k]) for k in summary_keys(self.test_metrics)})

    # dev_history decides the best epoch, so it survives a resume
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self._read_losses()  # a checkpoint mid-epoch (on a signal): the steps before it keep their points
        checkpoint["dev_history"] = self.dev_history
        checkpoint["epoch_loss"] = (float(self._loss_sum), self._loss_steps)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.dev_history = checkpoint.get("dev_history", [])
        self._loss_sum, self._loss_steps = checkpoint.get("epoch_loss", (0.0, 0))

    def configure_optimizers(self):
        return adamw_with_linear_warmup(self, self.lr, self.weight_decay, self.warmup_ratio,
                                        total_steps=int(self.trainer.estimated_stepping_batches))

"""The LightningModule that pretrains the models of pretrain_models.py.

BERT/ALBERT: encoder -> MLM head on the masked positions only (the vocabulary projection is the largest
matmul in a small model) -> cross-entropy, + pair loss (NSP/SOP), + ALUM's adversarial term. ELECTRA:
generator MLM -> sampled replacements -> discriminator; loss = MLM + `discriminator_weight` x RTD.

The step never waits for the device: masked positions come as indices, and the losses are copied back
without blocking `log_every` optimizer steps at a time. With a fixed `pretrain.max_predictions` every
tensor has one shape, so `compile_losses` makes forward, loss and backward one graph.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import nn
from transformers import AlbertForPreTraining, BertForMaskedLM, BertForPreTraining, PreTrainedModel

from bioablate_core.errors import ConfigError
from bioablate_core.seeding import batch_seed
from lightning_modules.algorithms.alum import Alum
from lightning_modules.choice_names import OPTIMIZERS
from lightning_modules.master_weights import optimized_parameters, with_master_weights
from lightning_modules.optim import adamw_with_linear_warmup, clip_gradients, lamb_with_linear_warmup
from lightning_modules.packed_attention import encoder_inputs
from lightning_modules.pretrain_models import Electra, ObjectiveSpec

# `pretrain.optimizer` -> factory(model, lr, weight_decay, warmup_ratio, total_steps) returning what
# `configure_optimizers` returns
OPTIMIZERS.register("adamw", adamw_with_linear_warmup)
OPTIMIZERS.register("lamb", lamb_with_linear_warmup)


class Parts:
    """Uniform access to an HF MLM pretraining model: encoder, word embeddings, MLM head, pair head."""

    def __init__(self, model: PreTrainedModel):
        if isinstance(model, (BertForMaskedLM, BertForPreTraining)):
            self.encoder = model.bert
            self.mlm_head = model.cls.predictions if isinstance(model, BertForPreTraining) else model.cls
            self.pair_head = model.cls.seq_relationship if isinstance(model, BertForPreTraining) else None
        elif isinstance(model, AlbertForPreTraining):
            self.encoder, self.mlm_head, self.pair_head = model.albert, model.predictions, model.sop_classifier
        else:
            raise TypeError(f"unsupported pretraining model {type(model).__name__}")
        self.embeddings = self.encoder.get_input_embeddings()


# ------------------------------------------------------------------------------------------- module

# tensors only: a Python number in a compiled function's inputs is specialised on, one graph per value
STEP_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "mlm_positions", "mlm_labels", "pair_labels")


def gather_positions(hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """[B, L, H] states at [B, P] positions -> [B * P, H], row by row (the order boolean indexing gives)."""
    index = positions.unsqueeze(-1).expand(-1, -1, hidden.shape[-1])
    return torch.gather(hidden, 1, index).flatten(0, 1)


def sample_tokens(logits: torch.Tensor) -> torch.Tensor:
    """One token per row of [N, V] logits, drawn from their softmax by inverse transform (a cumsum and a
    binary search): `torch.multinomial`'s draw, without its cost on a CPU. Zero-probability tokens never come."""
    cdf = F.softmax(logits.float(), dim=-1).cumsum(dim=-1)
    # scaled by the last sum, not 1: float32 sums of 30k terms fall short of 1 by ~1e-6
    point = torch.rand(cdf.shape[0], 1, device=cdf.device, dtype=cdf.dtype) * cdf[:, -1:]
    return torch.searchsorted(cdf, point, right=True).clamp_(max=cdf.shape[-1] - 1).squeeze(-1)


@dataclass
class _Copy:
    """Losses on their way to the host: `values` is complete once `arrived` (a CUDA event, or None) has."""
    values: torch.Tensor | None
    arrived: "torch.cuda.Event | None"
    unread: int  # the first this many values: the history's
    names: list[tuple[int, str]]  # then (index in `steps`, loss name) of each further value
    steps: list[tuple[int, dict[str, torch.Tensor], dict[str, float]]]

    def read(self) -> list[float]:
        if self.arrived is not None:
            self.arrived.synchronize()  # recorded a log interval ago: long done
        return self.values.tolist() if self.values is not None else []


def masked_mean(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The mean of `values` where `weights` is 1 (float weights of the same shape), on the device."""
    return (values * weights).sum() / weights.sum()


class PretrainModule(pl.LightningModule):
    # a Lightning "epoch" here is pretrain.checkpoint_every steps, not a pass over the corpus: errors name steps
    counts_epochs = False

    def __init__(self, model: nn.Module, *, objective: ObjectiveSpec, lr: float, weight_decay: float,
                 warmup_ratio: float, total_steps: int, optimizer: str = "adamw",
                 alum: Alum | None = None, seed: int = 0, log_every: int = 1, master_weights: bool = False):
        super().__init__()
        self.optimizer_factory = OPTIMIZERS.get(optimizer)
        if master_weights:  # bf16 parameters (trainer.precision=bf16-true), fp32 masters in the optimizer
            self.optimizer_factory = with_master_weights(self.optimizer_factory)
        self.model = model
        self.electra = isinstance(model, Electra)
        if self.electra and alum is not None:
            raise ConfigError("pretrain.adversarial (ALUM) is implemented for the MLM objectives bert and "
                              "albert, not electra")
        self.parts = None if self.electra else Parts(model)
        self.pair_loss = objective.pairs != "none" and self.parts is not None and self.parts.pair_head is not None
        self.lr, self.weight_decay, self.warmup_ratio = lr, weight_decay, warmup_ratio
        self.total_steps, self.alum, self.seed = total_steps, alum, seed
        self.discriminator_weight = objective.discriminator_weight
        # forward + loss from the step's input tensors (STEP_INPUTS); `compile_losses` replaces it
        self.step_losses: Callable[[dict], dict[str, torch.Tensor]] = self.losses
        # the objective's loss per micro-batch, read back `log_every` optimizer steps at a time
        self.history: list[float] = []
        self.log_every = log_every
        self._unread: list[torch.Tensor] = []  # the history not yet read back
        self._steps: list[tuple[int, dict[str, torch.Tensor], dict[str, float]]] = []  # logged points not yet read
        self._copies: list[_Copy] = []  # read back, not yet arrived on the host
        self._last: dict[str, torch.Tensor] = {}
        self._tick: float | None = None
        self._tokens_per_s: float | None = None
        self._stepped = 0
        self._graphed = False  # the losses run as a captured CUDA graph, whose outputs the next replay overwrites

    def encoders(self) -> list[nn.Module]:
        """The transformer stacks: the MLM model's encoder, or ELECTRA's two."""
        if self.electra:
            return [self.model.generator.electra, self.model.discriminator.electra]
        return [self.parts.encoder]

    def compile_losses(self, mode: str | None = None, backend: str = "inductor") -> None:
        """torch.compile forward + loss (and, through AOTAutograd, the backward) as one graph; ALUM's inner
        autograd.grad may split it. `mode` and `backend` are torch.compile's (tests count graphs with
        "aot_eager"). Parameter names, checkpoints and exports stay the eager model's."""
        self.step_losses = torch.compile(self.losses, fullgraph=self.alum is None, mode=mode, backend=backend)
        self._graphed = mode == "reduce-overhead"

    @property
    def read_every(self) -> int:
        """Micro-batches between the loss guard's reads, so the host waits for the device at log points only."""
        return self.log_every * (self.trainer.accumulate_grad_batches if self._trainer is not None else 1)

    @property
    def history_name(self) -> str:
        return "loss" if self.electra else "mlm_loss"

    def on_train_start(self) -> None:  # a resumed fit may start inside an epoch: its first step has a rate too
        self._tick = time.perf_counter()
        self._stepped = self.trainer.global_step

    def on_train_epoch_start(self) -> None:
        self._tick = time.perf_counter()

    def on_train_batch_start(self, batch: dict, batch_idx: int) -> None:
        # seeded by (seed, global micro-batch), not batch_idx, so a resumed run draws what an uninterrupted one does
        torch.manual_seed(batch_seed(self.seed, batch["micro_batch"], 1))

    # ---- BERT / ALBERT: masked language model (+ NSP/SOP, + ALUM)

    def mlm_logits(self, inputs_embeds: torch.Tensor, batch: dict):
        out = self.parts.encoder(inputs_embeds=inputs_embeds, **encoder_inputs(batch))
        return self.parts.mlm_head(gather_positions(out.last_hidden_state, batch["mlm_positions"])), out

    def mlm_losses(self, batch: dict) -> dict[str, torch.Tensor]:
        labels = batch["mlm_labels"].flatten()
        embeds = self.parts.embeddings(batch["input_ids"])
        logits, out = self.mlm_logits(embeds, batch)
        mlm_loss = F.cross_entropy(logits.float(), labels, ignore_index=-100)  # the padding slots: -100
        losses = {"loss": mlm_loss, "mlm_loss": mlm_loss}
        if self.pair_loss:
            losses["pair_loss"] = F.cross_entropy(self.parts.pair_head(out.pooler_output).float(),
                                                  batch["pair_labels"])
            losses["loss"] = losses["loss"] + losses["pair_loss"]
        if self.alum is not None:
            losses["adversarial_loss"] = self.alum(lambda e: self.mlm_logits(e, batch)[0], embeds, logits,
                                                   weights=(labels != -100).float())
            losses["loss"] = losses["loss"] + losses["adversarial_loss"]
        return losses

    # ---- ELECTRA: generator MLM -> sampled replacements -> replaced-token detection

    def electra_losses(self, batch: dict) -> dict[str, torch.Tensor]:
        generator, discriminator = self.model.generator, self.model.discriminator
        inputs = encoder_inputs(batch)
        positions, labels = batch["mlm_positions"], batch["mlm_labels"]
        hidden = generator.electra(input_ids=batch["input_ids"], **inputs).last_hidden_state
        gen_logits = generator.generator_lm_head(generator.generator_predictions(gather_positions(hidden, positions)))
        gen_loss = F.cross_entropy(gen_logits.float(), labels.flatten(), ignore_index=-100)

        with torch.no_grad():  # sampled from the stream seeded in on_train_batch_start
            sampled = sample_tokens(gen_logits).view_as(positions)
            valid = labels != -100
            # a padding slot (position 0, never predicted) adds nothing, so a sum scatters the slots to [B, L]
            at = torch.zeros_like(batch["input_ids"]).scatter_add(1, positions, valid.long())
            original = torch.where(at > 0,
                                   torch.zeros_like(at).scatter_add(1, positions, torch.where(valid, labels, 0)),
                                   batch["input_ids"])
            drawn = torch.zeros_like(at).scatter_add(1, positions, torch.where(valid, sampled, 0))
            corrupted = torch.where(at > 0, drawn, original)
        replaced = (corrupted != original).float()  # a correct sample counts as original, as in ELECTRA

        rtd_logits = discriminator(input_ids=corrupted, **inputs).logits.float()
        real = batch["attention_mask"].float()
        rtd_loss = masked_mean(F.binary_cross_entropy_with_logits(rtd_logits, replaced, reduction="none"), real)
        with torch.no_grad():
            rtd_accuracy = masked_mean(((rtd_logits > 0).float() == replaced).float(), real)
        return {"loss": gen_loss + self.discriminator_weight * rtd_loss, "gen_loss": gen_loss,
                "rtd_loss": rtd_loss, "rtd_accuracy": rtd_accuracy, "replaced_rate": masked_mean(replaced, real)}

    def losses(self, batch: dict) -> dict[str, torch.Tensor]:
        """The objective's losses of one micro-batch (the STEP_INPUTS tensors of `batch`)."""
        return self.electra_losses(batch) if self.electra else self.mlm_losses(batch)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        if self._graphed:
            torch.compiler.cudagraph_mark_step_begin()
        losses = self.step_losses({key: batch[key] for key in STEP_INPUTS})
        # kept until read back: a captured graph's outputs are copied before its next replay
        self._last = {name: value.detach().clone() if self._graphed else value.detach()
                      for name, value in losses.items()}
        self._unread.append(self._last[self.history_name])
        return losses["loss"]

    def on_train_batch_end(self, outputs, batch: dict, batch_idx: int) -> None:
        now = time.perf_counter()
        if self._tick is not None:
            self._tokens_per_s = batch["tokens"] * self.trainer.world_size / max(now - self._tick, 1e-9)
        self._tick = now
        if self.trainer.global_step == self._stepped:  # accumulating: the step's point is its last micro-batch's
            return
        self._stepped = self.trainer.global_step
        host = {"train/mask_rate": batch["mask_rate"]}
        if self._tokens_per_s is not None:
            host["train/tokens_per_s"] = self._tokens_per_s
        self._steps.append((self.trainer.global_step - 1, self._last, host))
        if len(self._steps) >= self.log_every:
            self._show(self.read_back(wait=False))

    def on_train_epoch_end(self) -> None:  # before the checkpoint of the epoch's end is written
        self._show(self.read_back())

    def on_train_end(self) -> None:
        self._show(self.read_back())

    def _show(self, point: dict[str, float]) -> None:
        """The progress figures as numbers: a logged tensor would be read back at every refresh of the bar."""
        if point and self._trainer is not None:
            self.trainer.progress_bar_metrics.update(point)
            self.trainer.callback_metrics.update(point)

    def read_back(self, wait: bool = True) -> dict[str, float]:
        """Start one non-blocking copy of the losses since the last read back, then log every copy that has
        arrived: with `wait` all of them, else all but the one just started. Returns the last logged point."""
        self._start_copy()
        ready, self._copies = (self._copies, []) if wait else (self._copies[:-1], self._copies[-1:])
        shown: dict[str, float] = {}
        for copy in ready:
            values = copy.read()
            self.history.extend(values[:copy.unread])
            points = [dict(host) for _, _, host in copy.steps]
            for (i, name), value in zip(copy.names, values[copy.unread:]):
                points[i][f"train/{name}"] = value
            if self.logger is not None:
                for (step, _, _), point in zip(copy.steps, points):
                    self.logger.log_metrics(point, step)
            shown = points[-1] if points else shown
        return shown

    def _start_copy(self) -> None:
        if not self._unread and not self._steps:
            return
        names = [(i, name) for i, (_, device, _) in enumerate(self._steps) for name in device]
        values, arrived = None, None
        if self._unread or names:
            stacked = torch.stack([*self._unread, *(self._steps[i][1][n] for i, n in names)]).float()
            values = torch.empty(stacked.shape, pin_memory=stacked.is_cuda)  # pinned: the copy does not wait
            values.copy_(stacked, non_blocking=True)
            if stacked.is_cuda:
                arrived = torch.cuda.Event()
                arrived.record()
        self._copies.append(_Copy(values, arrived, len(self._unread), names, self._steps))
        self._unread, self._steps = [], []

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        # Lightning refuses to clip for a fused optimizer (a GradScaler concern); bf16 and fp32 gradients are
        # never scaled, so they are clipped here in one for-each pass
        if gradient_clip_val and self.trainer.precision != "16-mixed":
            # the tensors the optimizer steps hold the gradients: the parameters, or their fp32 masters
            clip_gradients(optimized_parameters(optimizer), gradient_clip_val)
        else:
            super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def configure_optimizers(self):
        return self.optimizer_factory(self.model, self.lr, self.weight_decay, self.warmup_ratio, self.total_steps)

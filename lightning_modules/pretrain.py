"""The LightningModule that pretrains the models of pretrain_models.py (objectives, continual
checkpoints, export).

The training step reads top to bottom. BERT/ALBERT: encoder -> MLM head on the *masked positions only*
(the output layer over the vocabulary is the largest matmul in a small model; the other ~85% of positions
would be thrown away by the loss) -> cross-entropy, + pair loss (NSP/SOP), + ALUM's adversarial term.
ELECTRA: generator MLM loss at the masked positions -> sample replacements (no gradient) -> discriminator
-> binary cross-entropy over the non-padding tokens; loss = MLM + `discriminator_weight` x RTD.
"""

from __future__ import annotations

import time

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
from lightning_modules.optim import adamw_with_linear_warmup, lamb_with_linear_warmup
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

class PretrainModule(pl.LightningModule):
    def __init__(self, model: nn.Module, *, objective: ObjectiveSpec, lr: float, weight_decay: float,
                 warmup_ratio: float, total_steps: int, optimizer: str = "adamw",
                 alum: Alum | None = None, seed: int = 0, master_weights: bool = False):
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
        # the objective's loss per micro-batch (this process): MLM for bert/albert, MLM + w x RTD for electra
        self.history: list[float] = []
        self._tick: float | None = None

    def encoders(self) -> list[nn.Module]:
        """The transformer stacks (what `trainer.compile` compiles): the MLM model's encoder, or ELECTRA's
        generator and discriminator encoders."""
        if self.electra:
            return [self.model.generator.electra, self.model.discriminator.electra]
        return [self.parts.encoder]

    @property
    def history_name(self) -> str:
        return "loss" if self.electra else "mlm_loss"

    def on_train_start(self) -> None:  # a resumed fit may start inside an epoch: its first step has a rate too
        self._tick = time.perf_counter()

    def on_train_epoch_start(self) -> None:
        self._tick = time.perf_counter()

    def on_train_batch_start(self, batch: dict, batch_idx: int) -> None:
        # Dropout (and ELECTRA's sampling) draw from a stream seeded by (seed, global micro-batch), which
        # the batch carries: a resumed run continues with exactly the random numbers an uninterrupted
        # one uses. (Not batch_idx: Lightning restarts or continues it depending on where it resumes.)
        torch.manual_seed(batch_seed(self.seed, batch["micro_batch"], 1))

    # ---- BERT / ALBERT: masked language model (+ NSP/SOP, + ALUM)

    def mlm_logits(self, inputs_embeds: torch.Tensor, batch: dict, selected: torch.Tensor):
        out = self.parts.encoder(inputs_embeds=inputs_embeds, **encoder_inputs(batch))
        hidden = out.last_hidden_state
        return self.parts.mlm_head(hidden[selected]), out

    def mlm_losses(self, batch: dict) -> dict[str, torch.Tensor]:
        selected = batch["labels"] != -100
        embeds = self.parts.embeddings(batch["input_ids"])
        logits, out = self.mlm_logits(embeds, batch, selected)
        mlm_loss = F.cross_entropy(logits.float(), batch["labels"][selected])
        losses = {"loss": mlm_loss, "mlm_loss": mlm_loss}
        if self.pair_loss:
            losses["pair_loss"] = F.cross_entropy(self.parts.pair_head(out.pooler_output).float(),
                                                  batch["pair_labels"])
            losses["loss"] = losses["loss"] + losses["pair_loss"]
        if self.alum is not None:
            losses["adversarial_loss"] = self.alum(lambda e: self.mlm_logits(e, batch, selected)[0], embeds, logits)
            losses["loss"] = losses["loss"] + losses["adversarial_loss"]
        return losses

    # ---- ELECTRA: generator MLM -> sampled replacements -> replaced-token detection

    def electra_losses(self, batch: dict) -> dict[str, torch.Tensor]:
        generator, discriminator = self.model.generator, self.model.discriminator
        inputs = encoder_inputs(batch)
        selected = batch["labels"] != -100
        hidden = generator.electra(input_ids=batch["input_ids"], **inputs).last_hidden_state
        gen_logits = generator.generator_lm_head(generator.generator_predictions(hidden[selected]))
        gen_loss = F.cross_entropy(gen_logits.float(), batch["labels"][selected])

        with torch.no_grad():  # sampled from the stream seeded in on_train_batch_start
            sampled = torch.multinomial(F.softmax(gen_logits.float(), dim=-1), 1).squeeze(-1)
        original = torch.where(selected, batch["labels"], batch["input_ids"])
        corrupted = original.masked_scatter(selected, sampled)
        replaced = (corrupted != original).float()  # a correct sample counts as original, as in ELECTRA

        rtd_logits = discriminator(input_ids=corrupted, **inputs).logits.float()
        real = batch["attention_mask"].bool()
        rtd_loss = F.binary_cross_entropy_with_logits(rtd_logits[real], replaced[real])
        with torch.no_grad():
            rtd_accuracy = ((rtd_logits[real] > 0).float() == replaced[real]).float().mean()
        return {"loss": gen_loss + self.discriminator_weight * rtd_loss, "gen_loss": gen_loss,
                "rtd_loss": rtd_loss, "rtd_accuracy": rtd_accuracy, "replaced_rate": replaced[real].mean()}

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        losses = self.electra_losses(batch) if self.electra else self.mlm_losses(batch)
        for name, value in losses.items():
            self.log(f"train/{name}", value, on_step=True, prog_bar=name == "loss")
        self.log("train/mask_rate", batch["mask_rate"], on_step=True, prog_bar=True)
        self.history.append(float(losses[self.history_name].detach()))
        return losses["loss"]

    def on_train_batch_end(self, outputs, batch: dict, batch_idx: int) -> None:
        now = time.perf_counter()
        if self._tick is not None:
            tokens = float(batch["attention_mask"].sum()) * self.trainer.world_size
            self.log("train/tokens_per_s", tokens / max(now - self._tick, 1e-9), on_step=True, prog_bar=True)
        self._tick = now

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        # Lightning's mixed-precision plugin refuses to clip for an optimizer that unscales gradients in its
        # step (fused AdamW): a GradScaler (fp16) concern. bf16 and fp32 gradients are never scaled, so they
        # are clipped here directly, as Lightning's plain-precision path would.
        if gradient_clip_val and self.trainer.precision != "16-mixed":
            # the tensors the optimizer steps hold the gradients: the parameters, or their fp32 masters
            torch.nn.utils.clip_grad_norm_(optimized_parameters(optimizer), gradient_clip_val)
        else:
            super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def configure_optimizers(self):
        return self.optimizer_factory(self.model, self.lr, self.weight_decay, self.warmup_ratio, self.total_steps)

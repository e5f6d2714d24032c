"""Pretraining models and the LightningModule that trains them.

Objectives (the `pretrain.objective` key), all built from transformers' model classes:

- ``bert``: BertForMaskedLM (MLM), or BertForPreTraining (MLM + NSP) when `pretrain.nsp` is set;
- ``albert``: AlbertForPreTraining (factorized embeddings of `pretrain.embedding_size`, cross-layer
  sharing, MLM + SOP).

The training step reads top to bottom: encoder -> MLM head on the *masked positions only* (the output
layer over the vocabulary is the largest matmul in a small model; the other ~85% of positions would be
thrown away by the loss) -> cross-entropy, + pair loss (NSP/SOP), + ALUM's adversarial term. The
exported model is a Hugging Face directory (`save_pretrained` + tokenizer) that `bioablate finetune
--model DIR` loads.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import nn
from transformers import (AlbertConfig, AlbertForPreTraining, BertConfig, BertForMaskedLM,
                          BertForPreTraining, PreTrainedModel)

from datamodules.errors import ConfigError, UnknownNameError
from lightning_modules.algorithms.alum import Alum
from lightning_modules.optim import adamw_with_linear_warmup, parameter_groups

OBJECTIVES = ("bert", "albert")
OPTIMIZERS = ("adamw", "lamb")


# ------------------------------------------------------------------------------------------- models

def build_model(objective: str, nsp: bool, vocab_size: int, pad_id: int, model_cfg: Any, seq_len: int,
                embedding_size: int = 128, share_layers: bool = True) -> PreTrainedModel:
    """A freshly initialised pretraining model of the configured size, with SDPA attention."""
    common = dict(vocab_size=vocab_size, hidden_size=model_cfg.hidden_size,
                  num_hidden_layers=model_cfg.num_layers, num_attention_heads=model_cfg.num_heads,
                  intermediate_size=model_cfg.intermediate_size,
                  max_position_embeddings=max(seq_len, model_cfg.max_position_embeddings),
                  pad_token_id=pad_id)
    if objective == "bert":
        config = BertConfig(**common)
        config._attn_implementation = "sdpa"
        return BertForPreTraining(config) if nsp else BertForMaskedLM(config)
    if objective == "albert":
        config = AlbertConfig(embedding_size=embedding_size, num_hidden_groups=1,
                              inner_group_num=1, hidden_dropout_prob=0.1,
                              attention_probs_dropout_prob=0.1, **common)
        config._attn_implementation = "sdpa"
        model = AlbertForPreTraining(config)
        if not share_layers:
            raise ConfigError("pretrain.share_layers=false is not supported by transformers' ALBERT "
                              "(num_hidden_groups must divide the layers); use objective=bert")
        return model
    raise UnknownNameError("objective", objective, OBJECTIVES)


def load_continual(path: Path, objective: str, nsp: bool) -> PreTrainedModel:
    """A pretrained checkpoint with a pretraining head; a head the checkpoint lacks (e.g. MiniLM, saved as
    a bare BertModel) is created fresh by from_pretrained."""
    if objective != "bert":
        raise ConfigError(f"pretrain.init: continual pretraining is implemented for objective=bert, "
                          f"not '{objective}'")
    cls = BertForPreTraining if nsp else BertForMaskedLM
    model = cls.from_pretrained(path, attn_implementation="sdpa")
    model.train()
    return model


def reinit_embeddings(model: PreTrainedModel, vocab_size: int) -> None:
    """New vocabulary on a pretrained model: word embeddings (and the tied MLM decoder and its bias)
    resized and re-initialised; everything else kept (the paper's Table 9, second column)."""
    model.resize_token_embeddings(vocab_size)
    embeddings = model.get_input_embeddings()
    nn.init.normal_(embeddings.weight, mean=0.0, std=model.config.initializer_range)
    output = model.get_output_embeddings()
    if output is not None and getattr(output, "bias", None) is not None:
        nn.init.zeros_(output.bias)
    model.tie_weights()


class Parts:
    """Uniform access to an HF pretraining model: encoder, word embeddings, MLM head, pair head."""

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


# --------------------------------------------------------------------------------------------- LAMB

class Lamb(torch.optim.Optimizer):
    """LAMB (You et al. 2020): Adam moments, decoupled weight decay, per-tensor trust ratio
    ||w|| / ||update|| (1 where either norm is 0)."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-6,
                 weight_decay: float = 0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["m"] = torch.zeros_like(p)
                    state["v"] = torch.zeros_like(p)
                state["step"] += 1
                m, v = state["m"], state["v"]
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                m_hat = m / (1 - beta1 ** state["step"])
                v_hat = v / (1 - beta2 ** state["step"])
                update = m_hat / (v_hat.sqrt() + group["eps"])
                if group["weight_decay"]:
                    update = update.add(p, alpha=group["weight_decay"])
                w_norm, u_norm = p.norm(), update.norm()
                trust = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
                p.add_(update, alpha=-group["lr"] * float(trust))
        return loss


# ------------------------------------------------------------------------------------------- module

class PretrainModule(pl.LightningModule):
    def __init__(self, model: PreTrainedModel, *, pair_loss: bool, lr: float, weight_decay: float,
                 warmup_ratio: float, total_steps: int, optimizer: str = "adamw",
                 alum: Alum | None = None, seed: int = 0):
        super().__init__()
        if optimizer not in OPTIMIZERS:
            raise UnknownNameError("optimizer", optimizer, OPTIMIZERS)
        self.model = model
        self.parts = Parts(model)
        self.pair_loss = pair_loss and self.parts.pair_head is not None
        self.lr, self.weight_decay, self.warmup_ratio = lr, weight_decay, warmup_ratio
        self.total_steps, self.optimizer_name, self.alum, self.seed = total_steps, optimizer, alum, seed
        self.history: list[float] = []  # training loss per micro-batch (this process)
        self._tick: float | None = None

    def on_train_epoch_start(self) -> None:
        self._tick = time.perf_counter()

    def on_train_batch_start(self, batch: dict, batch_idx: int) -> None:
        # dropout draws depend only on (seed, step, micro-batch): a run resumed from a checkpoint
        # continues with exactly the random numbers an uninterrupted run would use
        torch.manual_seed(self.seed * 1_000_003 + self.global_step * 1_009 + batch_idx)

    def mlm_logits(self, inputs_embeds: torch.Tensor, batch: dict, selected: torch.Tensor):
        out = self.parts.encoder(inputs_embeds=inputs_embeds, attention_mask=batch["attention_mask"],
                                 token_type_ids=batch["token_type_ids"])
        hidden = out.last_hidden_state
        return self.parts.mlm_head(hidden[selected]), out

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        selected = batch["labels"] != -100
        embeds = self.parts.embeddings(batch["input_ids"])
        logits, out = self.mlm_logits(embeds, batch, selected)
        mlm_loss = F.cross_entropy(logits.float(), batch["labels"][selected])
        loss = mlm_loss
        if self.pair_loss:
            pooled = out.pooler_output
            pair_loss = F.cross_entropy(self.parts.pair_head(pooled).float(), batch["pair_labels"])
            loss = loss + pair_loss
            self.log("train/pair_loss", pair_loss, on_step=True)
        if self.alum is not None:
            adversarial = self.alum(lambda e: self.mlm_logits(e, batch, selected)[0], embeds, logits)
            loss = loss + adversarial
            self.log("train/adversarial_loss", adversarial, on_step=True)

        now = time.perf_counter()
        if self._tick is not None:
            tokens = float(batch["attention_mask"].sum()) * self.trainer.world_size
            self.log("train/tokens_per_s", tokens / max(now - self._tick, 1e-9), on_step=True, prog_bar=True)
        self._tick = now
        self.log("train/loss", loss, on_step=True, prog_bar=True)
        self.log("train/mlm_loss", mlm_loss, on_step=True)
        self.log("train/mask_rate", batch["mask_rate"], on_step=True, prog_bar=True)
        self.history.append(float(mlm_loss.detach()))
        return loss

    def configure_optimizers(self):
        if self.optimizer_name == "adamw":
            return adamw_with_linear_warmup(self.model, self.lr, self.weight_decay, self.warmup_ratio,
                                            self.total_steps)
        from transformers import get_linear_schedule_with_warmup

        optimizer = Lamb(parameter_groups(self.model, self.weight_decay), lr=self.lr)
        scheduler = get_linear_schedule_with_warmup(optimizer, int(self.warmup_ratio * self.total_steps),
                                                    self.total_steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def export_model(model: PreTrainedModel, tokenizer, out_dir: Path, vocab_path: Path) -> Path:
    """Write a Hugging Face-format directory (config, safetensors weights with the pretraining heads,
    tokenizer + vocab.txt); written to a temporary folder, then renamed into place."""
    import shutil

    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.copyfile(vocab_path, tmp / "vocab.txt")
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return out_dir


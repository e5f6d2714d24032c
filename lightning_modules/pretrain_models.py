"""Pretraining models: what a run pretrains (`ObjectiveSpec`), the model each objective builds, a
checkpoint continued by another objective, and the exported Hugging Face directory.

- ``bert``: BertForMaskedLM, or BertForPreTraining (MLM + NSP) with `pretrain.nsp`;
- ``albert``: AlbertForPreTraining (factorized embeddings, cross-layer sharing, MLM + SOP);
- ``electra``: replaced-token detection (Clark et al. 2020): a small generator fills the masked positions
  and the discriminator, the model kept, tells which tokens were replaced; they share the embeddings.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import (
    AlbertConfig,
    AlbertForPreTraining,
    AutoConfig,
    BertConfig,
    BertForMaskedLM,
    BertForPreTraining,
    BertModel,
    ElectraConfig,
    ElectraForMaskedLM,
    ElectraForPreTraining,
    PreTrainedModel,
)
from transformers.models.bert.modeling_bert import BertPooler

from bioablate_core.errors import ConfigError
from bioablate_core.files import publish_dir
from lightning_modules.choice_names import OBJECTIVES
from lightning_modules.fused_qkv import is_fused, unfuse_qkv
from lightning_modules.master_weights import master_model

# `pretrain.objective` -> builder(common BERT-size settings, ObjectiveSpec) of a fresh model


# ------------------------------------------------------------------------------------------- objective

@dataclass(frozen=True)
class ObjectiveSpec:
    """What a run pretrains: `pretrain.objective` and the keys that shape it, built once from the config."""

    name: str = "bert"
    nsp: bool = False
    embedding_size: int = 128
    share_layers: bool = True
    generator_size: float = 0.25
    discriminator_weight: float = 50.0

    def __post_init__(self) -> None:
        OBJECTIVES.get(self.name)  # an unknown name: UnknownNameError listing the known ones

    @classmethod
    def from_config(cls, pretrain: Any) -> "ObjectiveSpec":
        """From the `pretrain` section of a run config."""
        return cls(pretrain.objective, pretrain.nsp, pretrain.embedding_size, pretrain.share_layers,
                   pretrain.generator_size, pretrain.discriminator_weight)

    @property
    def pairs(self) -> str:
        """The sentence-pair task the shards carry labels for: sop (albert), nsp (bert with nsp), none."""
        return "sop" if self.name == "albert" else ("nsp" if self.nsp and self.name == "bert" else "none")


# ------------------------------------------------------------------------------------------- models

def build_model(objective: ObjectiveSpec, vocab_size: int, pad_id: int, model_cfg: Any, seq_len: int) -> nn.Module:
    """A fresh `objective` model of `model_cfg`'s size for `vocab_size`, `pad_id` and `seq_len`, with SDPA."""
    builder = OBJECTIVES.get(objective.name)
    common = dict(vocab_size=vocab_size, hidden_size=model_cfg.hidden_size,
                  num_hidden_layers=model_cfg.num_layers, num_attention_heads=model_cfg.num_heads,
                  intermediate_size=model_cfg.intermediate_size,
                  max_position_embeddings=max(seq_len, model_cfg.max_position_embeddings),
                  pad_token_id=pad_id)
    return builder(common, objective)


@OBJECTIVES.register("bert")
def _bert(common: dict, objective: ObjectiveSpec) -> nn.Module:
    config = BertConfig(**common)
    config._attn_implementation = "sdpa"
    return BertForPreTraining(config) if objective.nsp else BertForMaskedLM(config)


@OBJECTIVES.register("albert")
def _albert(common: dict, objective: ObjectiveSpec) -> nn.Module:
    config = AlbertConfig(embedding_size=objective.embedding_size, num_hidden_groups=1, inner_group_num=1,
                          hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, **common)
    config._attn_implementation = "sdpa"
    model = AlbertForPreTraining(config)
    if not objective.share_layers:
        raise ConfigError("pretrain.share_layers=false is not supported by transformers' ALBERT "
                          "(num_hidden_groups must divide the layers); use objective=bert")
    return model


@OBJECTIVES.register("electra")
def _electra(common: dict, objective: ObjectiveSpec) -> nn.Module:
    # embeddings as wide as the discriminator (ELECTRA-Base's choice; no factorization to tune)
    config = ElectraConfig(embedding_size=common["hidden_size"], **common)
    config._attn_implementation = "sdpa"
    return Electra(ElectraForPreTraining(config), objective.generator_size)


def generator_config(discriminator: ElectraConfig, size: float) -> ElectraConfig:
    """ELECTRA's generator: the discriminator's depth, `size` x its width, heads and feed-forward size
    (Clark et al. 2020 find 1/4-1/2 best; Bio-ELECTRA trained with the official default, 1/4)."""
    if not 0 < size <= 1:
        raise ConfigError(f"pretrain.generator_size must be in (0, 1] (got {size})")
    hidden = max(1, round(discriminator.hidden_size * size))
    heads = max(1, round(discriminator.num_attention_heads * size))
    if hidden % heads:
        raise ConfigError(f"pretrain.generator_size={size}: the generator's width {hidden} is not divisible by "
                          f"its {heads} attention heads; pick a size that keeps both whole")
    config = ElectraConfig(**{**discriminator.to_dict(), "hidden_size": hidden, "num_attention_heads": heads,
                              "intermediate_size": max(1, round(discriminator.intermediate_size * size))})
    config._attn_implementation = "sdpa"
    return config


class Electra(nn.Module):
    """ELECTRA's generator and discriminator, sharing the discriminator's embeddings with the generator's
    output layer tied to them, as in ELECTRA; a projection maps them to the generator's width."""

    def __init__(self, discriminator: ElectraForPreTraining, generator_size: float):
        super().__init__()
        self.discriminator = discriminator
        self.generator = ElectraForMaskedLM(generator_config(discriminator.config, generator_size))
        shared = discriminator.electra.embeddings
        self.generator.electra.embeddings = shared
        self.generator.generator_lm_head.weight = shared.word_embeddings.weight


def exported_model(model: nn.Module, optimizer: torch.optim.Optimizer | None = None) -> PreTrainedModel:
    """The model, or ELECTRA's discriminator, with `optimizer`'s fp32 master weights where it keeps them."""
    if optimizer is not None:
        model = master_model(model, optimizer)
    return model.discriminator if isinstance(model, Electra) else model


def check_speed_choices(objective: ObjectiveSpec, *, packing: bool, master_weights: bool, fused_qkv: bool,
                        precision: str) -> None:
    """`pretrain.packing`, `pretrain.master_weights` and `pretrain.fused_qkv` fit the run, or a ConfigError."""
    if packing and objective.pairs != "none":
        raise ConfigError(f"pretrain.packing=true needs one sequence type per row: objective=bert without nsp, or "
                          f"electra (objective={objective.name}, nsp={str(objective.nsp).lower()} has a "
                          "sentence-pair task)")
    if master_weights and precision != "bf16-true":
        raise ConfigError(f"pretrain.master_weights=true keeps fp32 masters of bf16 parameters: it needs "
                          f"trainer.precision=bf16-true (got {precision})")
    if fused_qkv and objective.name == "albert":
        raise ConfigError("pretrain.fused_qkv=true fuses BERT and ELECTRA self-attention; ALBERT's attention is "
                          "a module of its own: use objective=bert or electra, or fused_qkv=false")


# which checkpoint types each objective can continue from
CONTINUAL_SOURCES = {"bert": ("bert",), "albert": ("albert",), "electra": ("electra", "bert")}


def check_init(path: Path, objective: str) -> str:
    """The checkpoint's model type, if `objective` can continue from it; else a ConfigError."""
    model_type = AutoConfig.from_pretrained(path).model_type
    sources = CONTINUAL_SOURCES.get(objective, ())
    if model_type not in sources:
        raise ConfigError(f"pretrain.init {path}: a '{model_type}' checkpoint cannot start "
                          f"objective={objective} (it continues from: {', '.join(sources)}); "
                          "pick a matching pretrain.objective or checkpoint")
    return model_type


def load_continual(path: Path, objective: ObjectiveSpec) -> nn.Module:
    """A pretrained checkpoint with a pretraining head (created fresh where it lacks one). ELECTRA keeps
    an ELECTRA or BERT checkpoint's encoder as the discriminator and adds a fresh generator."""
    model_type = check_init(path, objective.name)
    if objective.name == "bert":
        model = (BertForPreTraining if objective.nsp else BertForMaskedLM).from_pretrained(
            path, attn_implementation="sdpa")
    elif objective.name == "albert":
        model = AlbertForPreTraining.from_pretrained(path, attn_implementation="sdpa")
    elif model_type == "electra":
        model = Electra(ElectraForPreTraining.from_pretrained(path, attn_implementation="sdpa"),
                        objective.generator_size)
    else:
        model = Electra(bert_as_discriminator(BertModel.from_pretrained(path, add_pooling_layer=False)),
                        objective.generator_size)
    model.train()  # from_pretrained returns eval mode
    return model


def bert_as_discriminator(bert: BertModel) -> ElectraForPreTraining:
    """An ELECTRA discriminator with a BERT encoder's weights; the replaced-token head starts fresh."""
    c = bert.config
    config = ElectraConfig(vocab_size=c.vocab_size, embedding_size=c.hidden_size, hidden_size=c.hidden_size,
                           num_hidden_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
                           intermediate_size=c.intermediate_size, hidden_act=c.hidden_act,
                           max_position_embeddings=c.max_position_embeddings, type_vocab_size=c.type_vocab_size,
                           layer_norm_eps=c.layer_norm_eps, pad_token_id=c.pad_token_id)
    config._attn_implementation = "sdpa"
    discriminator = ElectraForPreTraining(config)
    missing, unexpected = discriminator.electra.load_state_dict(bert.state_dict(), strict=False)
    if missing or unexpected:
        raise ConfigError(f"pretrain.init: BERT checkpoint does not map onto ELECTRA (missing {missing[:3]}, "
                          f"unexpected {unexpected[:3]})")
    return discriminator


def reinit_embeddings(model: nn.Module, vocab_size: int) -> None:
    """New vocabulary on a pretrained model, the rest kept (the paper's Table 9, second column)."""
    if isinstance(model, Electra):
        reinit_embeddings(model.discriminator, vocab_size)
        generator = model.generator  # shares the (now resized) embeddings; its tied output layer follows
        generator.config.vocab_size = vocab_size
        generator.generator_lm_head = nn.Linear(generator.config.embedding_size, vocab_size)
        generator.generator_lm_head.weight = model.discriminator.electra.embeddings.word_embeddings.weight
        nn.init.zeros_(generator.generator_lm_head.bias)
        return
    model.resize_token_embeddings(vocab_size)
    embeddings = model.get_input_embeddings()
    nn.init.normal_(embeddings.weight, mean=0.0, std=model.config.initializer_range)
    output = model.get_output_embeddings()
    if output is not None and getattr(output, "bias", None) is not None:
        nn.init.zeros_(output.bias)
    model.tie_weights()


# ------------------------------------------------------------------------------------------- export

def with_pooler(model: PreTrainedModel) -> PreTrainedModel:
    """The model as exported: an MLM-only BERT gets an untrained pooler, at transformers' initialisation,
    since `AutoModel` otherwise initialises one at random on every load (no config key turns it off)."""
    if isinstance(model, BertForMaskedLM) and model.bert.pooler is None:
        with torch.random.fork_rng(devices=[]):  # the same pooler for every run, resumed or not
            torch.manual_seed(0)
            model.bert.pooler = BertPooler(model.config).to(model.device)
            model.bert.pooler.apply(model._init_weights)
    return model


def export_model(model: PreTrainedModel, tokenizer, out_dir: Path, vocab_path: Path,
                 card: str | None = None) -> Path:
    """Write a Hugging Face-format directory (weights with the pretraining heads, tokenizer, `card` as
    README.md) through a temporary folder. Fused QKV projections are written split, in transformers' layout."""
    import copy
    import shutil

    if is_fused(model):
        model = unfuse_qkv(copy.deepcopy(model))

    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with_pooler(model).save_pretrained(tmp)
    # unset, transformers writes 1e30 and never truncates: long inputs fail inside the model
    tokenizer.model_max_length = model.config.max_position_embeddings
    tokenizer.save_pretrained(tmp)
    shutil.copyfile(vocab_path, tmp / "vocab.txt")
    if card is not None:
        (tmp / "README.md").write_text(card, encoding="utf-8")
    return publish_dir(tmp, out_dir)

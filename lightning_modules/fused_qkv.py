"""`pretrain.fused_qkv`: one Linear of 3 x hidden for an attention layer's query, key and value.

One matmul instead of three reads the input once (as NVIDIA's and MosaicBERT's BERTs do). The stacked
weight holds the same numbers, so a fused model starts as an unfused one of the same seed; the sums are
blocked differently, so it is part of the fingerprint. `unfuse_qkv` splits them back for export.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.models.bert.modeling_bert import ALL_ATTENTION_FUNCTIONS, BertSelfAttention, eager_attention_forward
from transformers.models.electra.modeling_electra import ElectraSelfAttention

# the self-attention classes with separate query / key / value Linears that `fuse_qkv` replaces
FUSABLE = (BertSelfAttention, ElectraSelfAttention)


class FusedSelfAttention(nn.Module):
    """BertSelfAttention's encoder forward with one `qkv` Linear; `unfuse` builds the `original` again."""

    def __init__(self, attention: nn.Module):
        super().__init__()
        self.config, self.original = attention.config, type(attention)
        self.num_attention_heads, self.attention_head_size = (attention.num_attention_heads,
                                                              attention.attention_head_size)
        self.all_head_size, self.scaling = attention.all_head_size, attention.scaling
        self.dropout, self.is_decoder, self.is_causal = attention.dropout, attention.is_decoder, attention.is_causal
        self.layer_idx = attention.layer_idx
        parts = (attention.query, attention.key, attention.value)
        weight = torch.cat([p.weight.detach() for p in parts])
        self.qkv = nn.Linear(weight.shape[1], weight.shape[0], device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            self.qkv.weight.copy_(weight)
            self.qkv.bias.copy_(torch.cat([p.bias.detach() for p in parts]))
        self.train(attention.training)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs):
        if kwargs.get("cache") is not None or kwargs.get("past_key_values") is not None:
            raise ValueError("the fused-QKV self-attention is an encoder's: it keeps no key/value cache")
        kwargs.pop("cache", None), kwargs.pop("past_key_values", None)
        input_shape = hidden_states.shape[:-1]
        # (..., 3 x heads x head_size) -> 3 tensors of (batch, heads, length, head_size)
        qkv = self.qkv(hidden_states).view(*input_shape, 3, self.num_attention_heads, self.attention_head_size)
        query, key, value = (part.transpose(1, 2) for part in qkv.unbind(-3))
        attention = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager_attention_forward)
        output, weights = attention(self, query, key, value, attention_mask,
                                    dropout=0.0 if not self.training else self.dropout.p, scaling=self.scaling,
                                    **kwargs)
        return output.reshape(*input_shape, -1).contiguous(), weights

    def unfuse(self) -> nn.Module:
        """The transformers module this replaced, with the weights split back into query, key and value."""
        attention = self.original(self.config, is_causal=self.is_causal, layer_idx=self.layer_idx)
        attention.to(device=self.qkv.weight.device, dtype=self.qkv.weight.dtype)
        attention.train(self.training)
        weights, biases = self.qkv.weight.detach().chunk(3), self.qkv.bias.detach().chunk(3)
        with torch.no_grad():
            for linear, weight, bias in zip((attention.query, attention.key, attention.value), weights, biases):
                linear.weight.copy_(weight)
                linear.bias.copy_(bias)
        return attention


def _swap(model: nn.Module, kinds: tuple[type, ...], make) -> int:
    """Replace every submodule of `kinds` by `make(module)`; how many were replaced."""
    targets = [(name, module) for name, module in model.named_modules() if isinstance(module, kinds)]
    for name, module in targets:
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, child, make(module))
    return len(targets)


def fuse_qkv(model: nn.Module) -> nn.Module:
    """`model` with each BERT / ELECTRA self-attention's query, key and value in one Linear, in place; a
    model with none (ALBERT) is an error, not a silent no-op."""
    if _swap(model, FUSABLE, FusedSelfAttention) == 0:
        raise ValueError(f"{type(model).__name__} has no BERT or ELECTRA self-attention to fuse")
    return model


def unfuse_qkv(model: nn.Module) -> nn.Module:
    """`model` with every fused self-attention split back into transformers' own module, in place."""
    _swap(model, (FusedSelfAttention,), FusedSelfAttention.unfuse)
    return model


def is_fused(model: nn.Module) -> bool:
    return any(isinstance(module, FusedSelfAttention) for module in model.modules())

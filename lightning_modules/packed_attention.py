"""The encoder's inputs for a pretraining batch, padded or packed (`pretrain.packing`, datamodules/pretrain/shards.py).

A packed row's tokens attend within their own sequence (a block-diagonal 4-D mask, which transformers passes
to SDPA as is) and positions restart at each sequence, so each gets the hidden states it gets alone
(tests/lightning_modules/test_packed_attention.py). Padding attends to itself: an all-False row is NaN.
"""

from __future__ import annotations

import torch


def packed_attention_mask(document_ids: torch.Tensor) -> torch.Tensor:
    """(B, L) document ids -> (B, 1, L, L) boolean mask, True where query and key share a document."""
    return (document_ids[:, :, None] == document_ids[:, None, :])[:, None]


def attention_mask_4d(attention_mask: torch.Tensor) -> torch.Tensor:
    """[B, L] 1/0 -> the [B, 1, L, L] mask transformers builds for SDPA, given ready so that it does not call
    `mask.all()`, a read back from the device, on every forward pass."""
    length = attention_mask.shape[1]
    return attention_mask.bool()[:, None, None, :].expand(-1, 1, length, -1)


def encoder_inputs(batch: dict) -> dict[str, torch.Tensor]:
    """The encoder's keyword arguments for `batch`: a 4-D padding mask, or a packed batch's mask and positions."""
    if "document_ids" in batch:
        return {"attention_mask": packed_attention_mask(batch["document_ids"]),
                "position_ids": batch["position_ids"], "token_type_ids": batch["token_type_ids"]}
    return {"attention_mask": attention_mask_4d(batch["attention_mask"]), "token_type_ids": batch["token_type_ids"]}

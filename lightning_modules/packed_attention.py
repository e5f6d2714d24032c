"""The encoder's inputs for a pretraining batch, padded or packed (`pretrain.packing`, datamodules/pretrain/shards.py).

A packed row holds several sequences. Each token may attend only to the tokens of its own sequence: the
mask is block-diagonal, built on the device from the batch's `document_ids` (B, L) as a (B, 1, L, L)
boolean mask, which transformers passes to SDPA as it is (`create_bidirectional_mask` returns a 4-D mask
unchanged); positions restart at each sequence (`position_ids`). So each sequence's hidden states are
those it gets alone in a padded row (tests/lightning_modules/test_packed_attention.py). Padding shares
document id 0 and attends to itself only: no query row is left with no key (an all-False row is NaN).
"""

from __future__ import annotations

import torch


def packed_attention_mask(document_ids: torch.Tensor) -> torch.Tensor:
    """(B, L) document ids -> (B, 1, L, L) boolean mask, True where query and key share a document."""
    return (document_ids[:, :, None] == document_ids[:, None, :])[:, None]


def attention_mask_4d(attention_mask: torch.Tensor) -> torch.Tensor:
    """[B, L] 1/0 -> the [B, 1, L, L] boolean mask (True: attend) transformers would build for SDPA. Given
    ready, transformers uses it as it is; given the [B, L] mask, it first asks whether any token is padding
    (`mask.all()`, a read back from the device on every forward pass)."""
    length = attention_mask.shape[1]
    return attention_mask.bool()[:, None, None, :].expand(-1, 1, length, -1)


def encoder_inputs(batch: dict) -> dict[str, torch.Tensor]:
    """The keyword arguments (besides the tokens) a BERT / ALBERT / ELECTRA encoder takes for `batch`: the
    padding mask as 4-D (nothing read back), or for a packed batch the block-diagonal mask and restarting
    positions."""
    if "document_ids" in batch:
        return {"attention_mask": packed_attention_mask(batch["document_ids"]),
                "position_ids": batch["position_ids"], "token_type_ids": batch["token_type_ids"]}
    return {"attention_mask": attention_mask_4d(batch["attention_mask"]), "token_type_ids": batch["token_type_ids"]}

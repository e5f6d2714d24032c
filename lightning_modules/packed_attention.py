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


def encoder_inputs(batch: dict) -> dict[str, torch.Tensor]:
    """The keyword arguments (besides the tokens) a BERT / ALBERT / ELECTRA encoder takes for `batch`: the
    padding mask, or for a packed batch the block-diagonal mask and restarting positions."""
    if "document_ids" in batch:
        return {"attention_mask": packed_attention_mask(batch["document_ids"]),
                "position_ids": batch["position_ids"], "token_type_ids": batch["token_type_ids"]}
    return {"attention_mask": batch["attention_mask"], "token_type_ids": batch["token_type_ids"]}

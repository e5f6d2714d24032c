"""Task heads (the paper's Featurizer + Predict modules, Sec. 2.4) with their losses.

A head maps the encoder's last hidden states to logits, turns logits into a loss (cross-entropy for
classification, BCE for multi-label, MSE for regression) and into raw predictions (the argmax tag per
position, the class id, the multi-hot decision, the score). Which head a task gets follows from the task
encoder's `head` kind.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

IGNORE_INDEX = -100


class TokenHead(nn.Module):
    """Linear layer over every position; the loss sees only labelled positions (first sub-tokens)."""

    def __init__(self, hidden_size: int, num_labels: int, dropout: float):
        super().__init__()
        self.dropout, self.out = nn.Dropout(dropout), nn.Linear(hidden_size, num_labels)

    def forward(self, hidden: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.out(self.dropout(hidden))

    def loss(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return F.cross_entropy(logits.flatten(0, 1).float(), batch["labels"].flatten(),
                               ignore_index=IGNORE_INDEX)

    def predict(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return logits.argmax(-1)


class ClsHead(nn.Module):
    """Linear layer over the [CLS] encoding; `kind` picks the loss and the decision rule."""

    def __init__(self, hidden_size: int, num_labels: int, dropout: float, kind: str):
        super().__init__()
        if kind not in ("classification", "multilabel", "regression"):
            raise ValueError(f"unknown [CLS] head kind {kind!r}")
        self.kind = kind
        self.dropout, self.out = nn.Dropout(dropout), nn.Linear(hidden_size, num_labels)

    def forward(self, hidden: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.out(self.dropout(hidden[:, 0])).float()

    def loss(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        labels = batch["labels"]
        if self.kind == "regression":
            return F.mse_loss(logits.squeeze(-1), labels.float())
        if self.kind == "multilabel":
            return F.binary_cross_entropy_with_logits(logits, labels.float())
        return F.cross_entropy(logits, labels)

    def predict(self, logits: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.kind == "regression":
            return logits.squeeze(-1)
        if self.kind == "multilabel":
            return (logits > 0).long()  # sigmoid(logit) > 0.5
        return logits.argmax(-1)


def make_head(kind: str, hidden_size: int, num_labels: int, dropout: float) -> nn.Module:
    if kind == "token":
        return TokenHead(hidden_size, num_labels, dropout)
    return ClsHead(hidden_size, num_labels, dropout, kind)

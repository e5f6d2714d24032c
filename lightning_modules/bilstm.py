"""The BiLSTM head layer (`finetune.head=bilstm`, paper Table 12), apart so choice_names.py stays torch-free."""

from __future__ import annotations

import torch
from torch import nn


class BiLSTM(nn.Module):
    """A one-layer BiLSTM over the encoder output, as wide out as in; padding skipped."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.lstm = nn.LSTM(hidden_size, hidden_size // 2, batch_first=True, bidirectional=True)
        self.out_size = 2 * (hidden_size // 2)

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        lengths = attention_mask.sum(1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(hidden.float(), lengths, batch_first=True,
                                                   enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=hidden.shape[1])
        return out

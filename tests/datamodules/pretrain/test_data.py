"""Micro-batches of packed shards carry each token's document and its position within that document; the
masks never pick a packed sequence's [CLS] or [SEP]."""

from __future__ import annotations

import numpy as np
import torch

from datamodules.pretrain.data import BatchingSpec, MicroBatches, packed_positions
from datamodules.pretrain.masking import MaskingSpec, MaskTokens
from datamodules.pretrain.shards import build_shards
from datamodules.pretrain.vocab import read_vocab, resolve_vocab_file


def test_positions_restart_at_every_packed_sequence():
    segments = torch.tensor([[1, 1, 1, 2, 2, 3, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1], [1, 2, 2, 2, 0, 0, 0, 0]])
    out = packed_positions(segments)
    assert out["document_ids"] is segments
    assert out["position_ids"].tolist() == [[0, 1, 2, 0, 1, 0, 0, 1], [0, 1, 2, 3, 4, 5, 6, 7],
                                            [0, 0, 1, 2, 0, 1, 2, 3]]


def test_a_packed_micro_batch(small_pubmed, data_dir, tmp_path):
    bert = resolve_vocab_file("bert-base-uncased", data_dir)
    shards = build_shards(small_pubmed, bert, True, 128, "none", 0, tmp_path / "s", packing=True)
    batching = BatchingSpec(batch_size=16, accumulate=1, max_steps=4, checkpoint_every=4, seed=0)
    data = MicroBatches(shards, range(4), rank=0, world_size=1, batching=batching,
                        masking=MaskingSpec("wwm", 0.15, "constant"), tokens=MaskTokens.from_vocab(read_vocab(bert)))
    batches = list(data)
    for batch in batches:
        documents, positions = batch["document_ids"], batch["position_ids"]
        assert ((documents > 0) == batch["attention_mask"].bool()).all()
        labels = batch["labels"]
        # a packed sequence starts at position 0 with its own [CLS]; no [CLS]/[SEP] is a prediction target
        starts = (positions == 0) & (documents > 0)
        original = torch.where(labels != -100, labels, batch["input_ids"])
        assert (original[starts] == 101).all()
        assert not ((labels == 101) | (labels == 102)).any()
    several = torch.cat([b["document_ids"].amax(dim=1) for b in batches])
    assert (several >= 2).float().mean() > 0.1  # rows that hold more than one sequence
    selected = torch.cat([(b["labels"] != -100)[b["attention_mask"].bool()] for b in batches]).float().mean()
    assert 0.10 < float(selected) < 0.20  # the masking rate over real tokens, as in padded rows
    assert np.asarray(shards.segments).dtype == np.int16

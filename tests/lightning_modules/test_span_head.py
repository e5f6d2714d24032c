"""Extractive QA's span head (`lightning_modules.heads.SpanPredictor`): shapes, the loss over attended
positions, and how `HeadSpec` builds it for a span task encoder (a real one, on a staged dataset)."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F
from transformers import BertTokenizer

from datamodules.encoders import EncodingSpec
from datamodules.registry import get_dataset
from datamodules.task_kinds import make_encoder
from lightning_modules.heads import HEADS, HeadSpec, SpanPredictor


def batch_of(lengths: list[int], labels: list[tuple[int, int]]) -> dict[str, torch.Tensor]:
    width = max(lengths)
    mask = torch.tensor([[1] * n + [0] * (width - n) for n in lengths])
    return {"attention_mask": mask, "labels": torch.tensor(labels)}


def test_span_head_gives_two_logits_per_position_and_predicts_them_unchanged():
    torch.manual_seed(0)
    head = SpanPredictor(HEADS.get("linear"), hidden_size=16, dropout=0.0)
    batch = batch_of([7, 4, 5], [(2, 4), (0, 0), (1, 1)])
    logits = head(torch.randn(3, 7, 16), batch)
    assert logits.shape == (3, 7, 2) and logits.dtype == torch.float32
    assert torch.equal(head.predict(logits, batch), logits)
    assert head.probabilities(logits, batch) is None


def test_span_loss_is_the_mean_start_and_end_cross_entropy_over_attended_positions():
    torch.manual_seed(1)
    head = SpanPredictor(HEADS.get("linear"), hidden_size=8, dropout=0.0)
    lengths, labels = [6, 3], [(1, 4), (2, 2)]
    batch = batch_of(lengths, labels)
    logits = torch.randn(2, 6, 2, requires_grad=True)
    expected = 0.0
    for row, (n, (start, end)) in enumerate(zip(lengths, labels)):  # each window over its own positions
        expected += F.cross_entropy(logits[row, :n, 0][None], torch.tensor([start]))
        expected += F.cross_entropy(logits[row, :n, 1][None], torch.tensor([end]))
    loss = head.loss(logits, batch)
    assert loss.item() == pytest.approx(expected.item() / 4, rel=1e-6)
    # padding takes no probability: changing its logits changes nothing, and gets no gradient
    loss.backward()
    assert torch.all(logits.grad[1, 3:] == 0)
    shifted = logits.detach().clone()
    shifted[1, 3:] += 50.0
    assert head.loss(shifted, batch).item() == pytest.approx(loss.item(), rel=1e-6)
    # a confident right answer costs almost nothing; a confident wrong one a lot
    right = torch.full((2, 6, 2), -20.0)
    right[0, 1, 0] = right[0, 4, 1] = right[1, 2, 0] = right[1, 2, 1] = 20.0
    assert head.loss(right, batch).item() < 1e-6
    assert head.loss(right.roll(1, dims=1), batch).item() > 10


def test_headspec_builds_the_span_head_for_extractive_qa_and_refuses_a_crf(data_dir):
    tokenizer = BertTokenizer(vocab=str(data_dir / "vocab/bert-base-uncased/vocab.txt"), do_lower_case=True)
    encoder = make_encoder(get_dataset("bioasq-6b-factoid"), tokenizer, 64, EncodingSpec())
    assert encoder.output_kind == "span" and encoder.num_labels == 2
    head = HeadSpec().build(encoder, 32)
    assert isinstance(head, SpanPredictor) and head.out.out_features == 2
    bilstm = HeadSpec(head="bilstm").build(encoder, 32)
    assert isinstance(bilstm, SpanPredictor) and bilstm.layer is not None
    with pytest.raises(ValueError, match="span"):
        HeadSpec(head="crf").build(encoder, 32)

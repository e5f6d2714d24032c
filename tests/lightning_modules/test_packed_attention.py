"""Packed rows (`pretrain.packing`) compute what padded rows do: on real PubMed sequences packed by the shard
builder, each sequence's hidden states in a packed row (block-diagonal mask, positions restarting) equal
those it gets alone in a padded row, and the block-diagonal mask given to SDPA equals attention run per
document. A mask that lets documents see each other, or positions that do not restart, fails both."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers import BertConfig, BertModel

from datamodules.pretrain.corpora import load_corpus
from datamodules.pretrain.data import packed_positions
from datamodules.pretrain.shards import build_shards
from lightning_modules.packed_attention import attention_mask_4d, encoder_inputs, packed_attention_mask

SEQ_LEN = 64
TOLERANCE = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def packed(data_dir, tmp_path_factory):
    """Packed shards of real PubMed abstracts (bert-base-uncased WordPiece, rows of 64)."""
    corpus = load_corpus("pubmed", data_dir, max_words=6000, min_words=128, seed=1)
    vocab = data_dir / "vocab" / "bert-base-uncased" / "vocab.txt"
    return build_shards(corpus, vocab, True, SEQ_LEN, "none", 0, tmp_path_factory.mktemp("s") / "x", workers=1,
                        packing=True)


def packed_batch(shards, rows: slice) -> dict:
    ids = torch.from_numpy(shards.input_ids[rows].astype("int64"))
    segments = torch.from_numpy(shards.segments[rows].astype("int64"))
    return {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": (segments > 0).long(),
            **packed_positions(segments)}


def encoder() -> BertModel:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=30522, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=SEQ_LEN)
    config._attn_implementation = "sdpa"
    return BertModel(config, add_pooling_layer=False).eval()


def alone(model: BertModel, tokens: torch.Tensor) -> torch.Tensor:
    """The hidden states of one sequence in a padded row of its own (pad id 0, as bert-base-uncased)."""
    ids = torch.zeros((1, SEQ_LEN), dtype=torch.long)
    ids[0, :len(tokens)] = tokens
    mask = (torch.arange(SEQ_LEN) < len(tokens)).long()[None]
    return model(input_ids=ids, attention_mask=mask).last_hidden_state[0, :len(tokens)]


def rows_with_several(shards, count: int = 4) -> slice:
    several = [r for r in range(len(shards)) if shards.segments[r].max() >= 2]
    assert len(several) >= count, "the packed shards should hold rows of several sequences"
    return slice(several[0], several[0] + count)


@torch.no_grad()
def test_each_sequence_of_a_packed_row_equals_the_sequence_alone(packed):
    model, batch = encoder(), packed_batch(packed, rows_with_several(packed))
    hidden = model(input_ids=batch["input_ids"], **encoder_inputs(batch)).last_hidden_state
    checked = 0
    for r in range(len(batch["input_ids"])):
        for number in range(1, int(batch["document_ids"][r].max()) + 1):
            where = batch["document_ids"][r] == number
            torch.testing.assert_close(hidden[r, where], alone(model, batch["input_ids"][r, where]), **TOLERANCE)
            checked += 1
    assert checked > len(batch["input_ids"])  # several sequences a row

    # what the test guards: one padding mask over the whole row lets the sequences see each other ...
    leaky = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                  position_ids=batch["position_ids"]).last_hidden_state
    # ... and positions counted along the row place later sequences elsewhere
    shifted = model(input_ids=batch["input_ids"], attention_mask=packed_attention_mask(batch["document_ids"])
                    ).last_hidden_state
    real = batch["attention_mask"].bool()
    for wrong in (leaky, shifted):
        assert not torch.allclose(wrong[real], hidden[real], **TOLERANCE)


def test_the_block_diagonal_mask_given_to_sdpa_equals_attention_per_document(packed):
    batch = packed_batch(packed, rows_with_several(packed, 2))
    documents = batch["document_ids"]
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn((*documents.shape[:1], 4, SEQ_LEN, 16), generator=generator) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=packed_attention_mask(documents))
    for r in range(len(documents)):
        for number in documents[r].unique():
            where = documents[r] == number  # a document, or the row's padding (which attends to itself)
            each = F.scaled_dot_product_attention(q[r:r + 1, :, where], k[r:r + 1, :, where], v[r:r + 1, :, where])
            torch.testing.assert_close(out[r:r + 1, :, where], each, **TOLERANCE)
    assert packed_attention_mask(documents).shape == (len(documents), 1, SEQ_LEN, SEQ_LEN)
    # a mask that ignores the document boundaries is caught
    real = (documents > 0)
    leaky = F.scaled_dot_product_attention(q, k, v, attn_mask=(real[:, :, None] & real[:, None, :])[:, None]
                                           | torch.eye(SEQ_LEN, dtype=torch.bool))
    assert not torch.allclose(leaky, out, **TOLERANCE)


def test_a_padded_batch_keeps_its_padding_mask():
    batch = {"input_ids": torch.ones((2, 5), dtype=torch.long), "attention_mask": torch.ones((2, 5), dtype=torch.long),
             "token_type_ids": torch.zeros((2, 5), dtype=torch.long)}
    inputs = encoder_inputs(batch)
    # the same padding mask, given 4-D so transformers asks nothing of it on the device (no `mask.all()`)
    assert torch.equal(inputs["attention_mask"], attention_mask_4d(batch["attention_mask"]))
    assert inputs["attention_mask"].shape == (2, 1, 5, 5) and "position_ids" not in inputs

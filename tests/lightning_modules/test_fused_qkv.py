"""`pretrain.fused_qkv`: one (hidden -> 3 x hidden) Linear per attention layer computes what transformers'
query / key / value do, trains, and is split back on export: the exported folder is a standard BERT that
transformers' `BertModel` / `BertForMaskedLM` load with no missing or unexpected weights and the same
outputs as the fused model. A split in the wrong order (or a lost bias) changes those outputs."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import AlbertConfig, AlbertForPreTraining, BertForMaskedLM, BertModel

from datamodules.pretrain.vocab import hf_tokenizer, read_vocab
from lightning_modules.fused_qkv import FusedSelfAttention, fuse_qkv, is_fused, unfuse_qkv
from lightning_modules.pretrain_models import ObjectiveSpec, build_model, export_model

SIZE = type("Size", (), dict(hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128,
                             max_position_embeddings=64))
TOLERANCE = dict(rtol=1e-5, atol=1e-5)


def batch(vocab_size: int) -> dict:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab_size, (3, 24), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, 15:] = 0
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("objective", ["bert", "electra"])
def test_a_fused_model_computes_what_the_unfused_one_does(objective):
    torch.manual_seed(0)
    model = build_model(ObjectiveSpec(objective), 500, 0, SIZE, 64).eval()
    fused = fuse_qkv(copy.deepcopy(model))
    layers = [m for m in fused.modules() if isinstance(m, FusedSelfAttention)]
    assert len(layers) == (2 if objective == "bert" else 4)  # electra: generator and discriminator
    assert not any(name.endswith((".query.weight", ".key.weight", ".value.weight"))
                   for name, _ in fused.named_parameters())
    inputs = batch(500)
    with torch.no_grad():
        if objective == "bert":
            torch.testing.assert_close(fused(**inputs).logits, model(**inputs).logits, **TOLERANCE)
        else:
            torch.testing.assert_close(fused.discriminator(**inputs).logits, model.discriminator(**inputs).logits,
                                       **TOLERANCE)
            torch.testing.assert_close(fused.generator(**inputs).logits, model.generator(**inputs).logits, **TOLERANCE)


def test_fused_layers_train():
    torch.manual_seed(0)
    model = fuse_qkv(build_model(ObjectiveSpec("bert"), 500, 0, SIZE, 64)).train()
    inputs = batch(500)
    model(**inputs, labels=inputs["input_ids"]).loss.backward()
    qkv = model.bert.encoder.layer[0].attention.self.qkv
    assert qkv.weight.shape == (192, 64) and qkv.weight.grad is not None and qkv.weight.grad.abs().sum() > 0


def test_the_export_is_a_standard_bert_with_the_fused_models_outputs(data_dir, tmp_path):
    vocab_path = data_dir / "vocab" / "bert-base-uncased" / "vocab.txt"
    vocab = read_vocab(vocab_path)
    torch.manual_seed(0)
    model = fuse_qkv(build_model(ObjectiveSpec("bert"), len(vocab), 0, SIZE, 64))
    with torch.no_grad():  # trained weights: query, key and value (and their biases) all different
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    model.eval()
    out = export_model(model, hf_tokenizer(vocab_path, True), tmp_path / "model", vocab_path)
    assert is_fused(model)  # the model passed in is left fused
    inputs = batch(len(vocab))
    with torch.no_grad():
        expected_logits = model(**inputs).logits
        expected_hidden = model.bert(**inputs).last_hidden_state
    loaded, info = BertForMaskedLM.from_pretrained(out, output_loading_info=True)
    # the export adds a pooler (with_pooler), which an MLM model has no place for; nothing else is left over
    assert not info["missing_keys"] and not info["mismatched_keys"]
    assert set(info["unexpected_keys"]) <= {"bert.pooler.dense.weight", "bert.pooler.dense.bias"}
    encoder, info = BertModel.from_pretrained(out, add_pooling_layer=False, output_loading_info=True)
    assert not info["missing_keys"] and not info["mismatched_keys"]
    with torch.no_grad():
        torch.testing.assert_close(loaded.eval()(**inputs).logits, expected_logits, **TOLERANCE)
        torch.testing.assert_close(encoder.eval()(**inputs).last_hidden_state, expected_hidden, **TOLERANCE)


def test_unfusing_restores_transformers_modules():
    torch.manual_seed(0)
    model = build_model(ObjectiveSpec("bert"), 500, 0, SIZE, 64).eval()
    reference = {k: v.clone() for k, v in model.state_dict().items()}
    unfuse_qkv(fuse_qkv(model))
    assert not is_fused(model) and model.state_dict().keys() == reference.keys()
    assert all(torch.equal(model.state_dict()[k], v) for k, v in reference.items())
    assert not model.bert.encoder.layer[0].attention.self.training  # the mode it had


def test_albert_has_no_self_attention_to_fuse():
    config = AlbertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                          intermediate_size=64, embedding_size=16)
    with pytest.raises(ValueError, match="AlbertForPreTraining has no BERT or ELECTRA self-attention to fuse"):
        fuse_qkv(AlbertForPreTraining(config))

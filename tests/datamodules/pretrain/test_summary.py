"""The --dry-run corpus summary: exact from built shards, estimated from sampled files otherwise, and a
warning when a profile makes more than ten passes over its corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from datamodules.pretrain.corpora import load_corpus
from datamodules.pretrain.shards import build_shards
from datamodules.pretrain.summary import MAX_EPOCHS, corpus_summary


def test_summary_from_shards_is_exact_and_warns_past_ten_passes(data_dir: Path, tmp_path: Path):
    vocab = data_dir / "vocab" / "bert-base-uncased" / "vocab.txt"
    corpus = load_corpus("pubmed", data_dir, max_words=20000, min_words=128, seed=1)
    shards = build_shards(corpus, vocab, True, 64, "none", 0, tmp_path / "shards", workers=1)
    few = corpus_summary(corpus, seq_len=64, batch_size=16, accumulate=1, max_steps=10, shards_meta=shards.meta)
    assert few.exact and few.sequences == len(shards) and few.words == corpus.stats.words
    assert few.sequences_seen == 160 and few.epochs == pytest.approx(160 / len(shards)) and few.warning is None
    many = corpus_summary(corpus, seq_len=64, batch_size=16, accumulate=2, max_steps=1000, world_size=2,
                          shards_meta=shards.meta)
    assert many.epochs > MAX_EPOCHS and "passes over corpus pubmed" in many.warning
    text = "\n".join(many.lines())
    assert "1,000 steps x 64 sequences = 64,000 sequences" in text and text.endswith(many.warning)


def test_estimate_from_sampled_files_is_close_to_the_truth(data_dir: Path, tmp_path: Path, baseline_yaml):
    yaml = baseline_yaml(6)
    corpus = load_corpus(str(yaml), data_dir, min_words=50)
    vocab = data_dir / "vocab" / "pubmedbert-uncased" / "vocab.txt"
    estimate = corpus_summary(corpus, seq_len=128, batch_size=32, accumulate=1, max_steps=100, vocab_path=vocab,
                              sample_words=10000)
    assert not estimate.exact and estimate.files == 6 and "of 6 files sampled" in estimate.note
    assert estimate.words == pytest.approx(corpus.stats.words, rel=0.25)  # read 2 of 6 files, not all
    built = build_shards(corpus, vocab, True, 128, "none", 0, tmp_path / "shards", workers=1)
    assert estimate.tokens == pytest.approx(built.meta["tokens"], rel=0.25)
    capped = corpus_summary(load_corpus(str(yaml), data_dir, max_words=5000), seq_len=128, batch_size=32,
                            accumulate=1, max_steps=100)
    assert capped.words == 5000 and "1.3 tokens a word assumed" in capped.note

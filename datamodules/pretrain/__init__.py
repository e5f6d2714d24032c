"""Pretraining data: corpora (documents -> sentences), WordPiece vocabularies, tokenized memory-mapped
shards and masking. See docs/pretraining.md."""

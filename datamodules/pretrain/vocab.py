"""WordPiece vocabularies: train one on a corpus with `tokenizers`, or load a vocab.txt.

`pretrain.vocab` values:

- a staged vocabulary name (``bert-base-uncased``, ``pubmedbert-uncased``, ``scibert-scivocab-uncased``)
  or a path to a vocab.txt (or its folder);
- ``train:SIZE`` / ``train:SIZE:cased``: a WordPiece vocabulary of SIZE entries trained on the
  pretraining corpus (uncased by default), cached under <work>/cache/vocab/<fingerprint>/vocab.txt;
- ``init``: the vocabulary of the checkpoint given by `pretrain.init` (continual pretraining).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from tokenizers import BertWordPieceTokenizer, Tokenizer

from bioablate_core.errors import ConfigError
from bioablate_core.fingerprints import file_sha256
from datamodules.textfiles import read_text_lines

if TYPE_CHECKING:  # imported where used: the shard builder's workers import this module and start faster
    from transformers import BertTokenizer

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# below the specials plus an alphabet and its ## continuations, nearly every word splits into characters
MIN_VOCAB_SIZE = 100


@dataclass(frozen=True)
class VocabSpec:
    kind: str  # "train" | "file" | "init"
    size: int = 0
    lowercase: bool = True
    name: str = ""


def parse_vocab(value: str, lowercase: bool = True) -> VocabSpec:
    if value == "init":
        return VocabSpec("init", lowercase=lowercase, name=value)
    if value.startswith("train:"):
        parts = value.split(":")
        if len(parts) not in (2, 3) or not parts[1].isdigit() or (len(parts) == 3 and parts[2] not in
                                                                   ("cased", "uncased")):
            raise ConfigError(f"pretrain.vocab '{value}': expected train:SIZE or train:SIZE:cased|uncased")
        size = int(parts[1])
        check_vocab_size(size, f"pretrain.vocab '{value}': size")
        return VocabSpec("train", size, parts[2] == "uncased" if len(parts) == 3 else lowercase, value)
    return VocabSpec("file", lowercase=lowercase, name=value)


def check_vocab_size(size: int, source: str) -> None:
    if size < MIN_VOCAB_SIZE:
        raise ConfigError(f"{source} {size}: a vocabulary needs at least {MIN_VOCAB_SIZE} entries (the special "
                          "tokens, an alphabet and its ## continuations)")


def train_wordpiece(texts: Iterable[str], size: int, lowercase: bool, out_dir: Path) -> Path:
    """Train a BERT WordPiece vocabulary (BERT's normaliser and pre-tokenizer) and write vocab.txt."""
    check_vocab_size(size, "vocabulary size")
    tokenizer = BertWordPieceTokenizer(lowercase=lowercase, strip_accents=None if lowercase else False)
    tokenizer.train_from_iterator(texts, vocab_size=size, min_frequency=2, limit_alphabet=1000,
                                  special_tokens=SPECIAL_TOKENS, show_progress=False)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / "vocab.txt.tmp"
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
    tmp.write_text("".join(token + "\n" for token, _ in vocab), encoding="utf-8")
    tmp.replace(out_dir / "vocab.txt")
    return out_dir / "vocab.txt"


def read_vocab(path: Path) -> list[str]:
    tokens = read_text_lines(path)
    missing = [t for t in SPECIAL_TOKENS if t not in tokens]
    if missing:
        raise ConfigError(f"vocabulary {path} lacks the special tokens {', '.join(missing)}")
    return tokens


def fast_tokenizer(vocab_path: Path, lowercase: bool) -> Tokenizer:
    """The `tokenizers` BERT WordPiece tokenizer for bulk encoding (Rust, batched, no Python per token)."""
    return BertWordPieceTokenizer(str(vocab_path), lowercase=lowercase,
                                  strip_accents=None if lowercase else False)


def hf_tokenizer(vocab_path: Path, lowercase: bool) -> "BertTokenizer":
    """The transformers tokenizer saved with an exported model (`vocab=`: `vocab_file=` is ignored in 5.x)."""
    from transformers import BertTokenizer

    return BertTokenizer(vocab=str(vocab_path), do_lower_case=lowercase,
                         strip_accents=None if lowercase else False)


def file_hash(path: Path) -> str:
    return file_sha256(Path(path))[:16]


def resolve_vocab_file(value: str, data_dir: Path | None) -> Path:
    from datamodules.vocabs import resolve_vocab

    try:
        return resolve_vocab(value, data_dir)
    except ConfigError as e:
        raise ConfigError(str(e).replace("model.vocab", "pretrain.vocab") +
                          "; or train:SIZE[:cased] to train one, or init to inherit the checkpoint's") from None


def init_vocab_file(init_dir: Path, work_dir: Path, need: str = "to inherit; set pretrain.vocab") -> Path:
    """vocab.txt of a checkpoint, or one written from its tokenizer.json; `need` ends the error where neither."""
    if (init_dir / "vocab.txt").is_file():
        return init_dir / "vocab.txt"
    tok = init_dir / "tokenizer.json"
    if tok.is_file():
        vocab = json.loads(tok.read_text())["model"].get("vocab")
        if isinstance(vocab, dict):
            out = work_dir / "cache" / "vocab" / f"init-{file_hash(tok)}" / "vocab.txt"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text("".join(t + "\n" for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])))
            return out
    raise ConfigError(f"pretrain.init {init_dir}: no WordPiece vocabulary (vocab.txt or tokenizer.json) {need}")

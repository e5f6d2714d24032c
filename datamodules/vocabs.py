"""Staged vocabularies by name (`<data_dir>/vocab/<name>/vocab.txt`), or any path to a vocab.txt; here in
the data layer so fine-tuning and pretraining both resolve names without reaching upwards.
"""

from __future__ import annotations

from pathlib import Path

from bioablate_core.errors import ConfigError
from datamodules.textfiles import read_text


def staged_vocabs(data_dir: Path | None) -> list[str]:
    """The vocabulary names staged under <data_dir>/vocab."""
    folder = Path(data_dir) / "vocab" if data_dir is not None else None
    return sorted(p.name for p in folder.iterdir()) if folder is not None and folder.is_dir() else []


def resolve_vocab(vocab: str, data_dir: Path | None) -> Path:
    """A staged vocabulary name (a folder under <data_dir>/vocab) or a path to vocab.txt / its folder."""
    candidates = [Path(vocab).expanduser()]
    if data_dir is not None:
        candidates.insert(0, Path(data_dir) / "vocab" / vocab)
    for path in candidates:
        if path.is_dir() and (path / "vocab.txt").is_file():
            path = path / "vocab.txt"
        if path.is_file():
            read_text(path)  # a vocabulary that is not UTF-8 text fails here, naming its line
            return path
    raise ConfigError(f"model.vocab '{vocab}' is neither a staged vocabulary "
                      f"({', '.join(staged_vocabs(data_dir)) or 'none found'}) nor a path to a vocab.txt file")

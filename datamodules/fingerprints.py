"""Content hashing of files, for the fingerprints that decide whether a cached or finished result still
applies (datasets, corpora, model directories)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterable


def hash_files(paths: Iterable[Path], seed: bytes = b"") -> str:
    """16 hex digits of SHA-256 over `seed` and each file's name and content, streamed in 1 MiB chunks."""
    h = hashlib.sha256(seed)
    for path in paths:
        h.update(path.name.encode())
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:16]

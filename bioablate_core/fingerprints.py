"""Content hashing, for the fingerprints that decide whether a cached or finished result still applies:
of files (datasets, corpora, model directories) and of values (configs, tokenizers, encoding settings)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable

from bioablate_core.errors import ConfigError

# One process asks for the same hashes again and again (an experiment plans and collects hundreds of runs
# over a few datasets and models). A file counts as unchanged while its path, size and modification time
# are; the hash itself is the same as without the memo.
_MEMO: dict[tuple, str] = {}


def digest(value: Any, length: int = 16) -> str:
    """`length` hex digits of SHA-256 over `value` as canonical JSON (keys sorted; a value JSON cannot write, as
    its `str`): every run, split and cache fingerprint of a value is this one hash, so stored runs are found
    again as long as what they hash is."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:length]


def files_under(folder: Path) -> list[Path]:
    """Every file below `folder` (links followed), in the order `sorted()` gives Paths: by their parts.
    Directory entries tell files from folders without a stat each, and tuples of strings sort far faster
    than Paths; it matters because a BLURB folder (HoC) has thousands of files and every run's dataset
    fingerprint lists it."""
    found: list[tuple[str, ...]] = []

    def walk(directory: str, parts: tuple[str, ...], ancestors: frozenset[tuple[int, int]]) -> None:
        try:
            status = os.stat(directory)
            here = (status.st_dev, status.st_ino)
            if here in ancestors:  # a link back to a folder it is inside: the walk would never end
                raise OSError(errno.ELOOP, "a symbolic link loop (a link to a folder it is inside)")
            with os.scandir(directory) as entries:
                for entry in entries:
                    if entry.is_dir():
                        walk(entry.path, (*parts, entry.name), ancestors | {here})
                    elif entry.is_file():
                        found.append((*parts, entry.name))
        except OSError as error:
            raise ConfigError(f"{directory}: cannot be listed ({error.strerror or error}); remove or fix the "
                              "link, or move the folder") from None

    walk(str(folder), (), frozenset())
    return [folder.joinpath(*parts) for parts in sorted(found)]


def hash_files(paths: Iterable[Path], seed: bytes = b"") -> str:
    """16 hex digits of SHA-256 over `seed` and each file's name and content, streamed in 1 MiB chunks."""
    paths = list(paths)
    key = (seed, *((os.path.abspath(p), s.st_size, s.st_mtime_ns) for p in paths for s in [os.stat(p)]))
    if key in _MEMO:
        return _MEMO[key]
    h = hashlib.sha256(seed)
    for path in paths:
        h.update(path.name.encode())
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    _MEMO[key] = h.hexdigest()[:16]
    return _MEMO[key]


def file_sha256(path: Path) -> str:
    """The full SHA-256 of a file, streamed in 1 MiB chunks (downloads checked against the manifest, cache
    manifests)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()

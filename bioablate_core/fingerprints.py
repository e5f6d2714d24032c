"""Content hashing, for the fingerprints that decide whether a cached or finished result still applies:
of files (datasets, corpora, model directories) and of values (configs, tokenizers, encoding settings)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Iterable

from bioablate_core.errors import ConfigError

# a file counts as unchanged while its path, size and modification time are
_MEMO: dict[tuple, str] = {}
# a listing holds while every folder in it keeps its modification time; one changed in the last RACY_SECONDS
# is listed again, as git treats "racy" files
_LISTINGS: dict[tuple[str, str], tuple[tuple[tuple[str, int], ...], list[Path]]] = {}
RACY_SECONDS = 2.0


def digest(value: Any, length: int = 16) -> str:
    """`length` hex digits of SHA-256 over `value` as canonical JSON: every fingerprint of a value."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:length]


def files_under(folder: Path) -> list[Path]:
    """Every file below `folder` (links followed), in the order `sorted()` gives Paths."""
    key = (os.getcwd(), os.fspath(folder))  # the paths returned are built on `folder` as given
    memo = _LISTINGS.get(key)
    if memo is not None and _unchanged(memo[0]):
        return list(memo[1])
    found: list[tuple[str, ...]] = []
    folders: list[tuple[str, int]] = []

    def walk(directory: str, parts: tuple[str, ...], ancestors: frozenset[tuple[int, int]]) -> None:
        try:
            status = os.stat(directory)
            folders.append((directory, status.st_mtime_ns))
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
    listing = [folder.joinpath(*parts) for parts in sorted(found)]
    if all(time.time_ns() - mtime > RACY_SECONDS * 1e9 for _, mtime in folders):
        _LISTINGS[key] = (tuple(folders), listing)
    return list(listing)


def _unchanged(folders: tuple[tuple[str, int], ...]) -> bool:
    """Whether each folder of a listing is still there with the modification time it had."""
    try:
        return all(os.stat(folder).st_mtime_ns == mtime for folder, mtime in folders)
    except OSError:
        return False


def hash_files(paths: Iterable[Path], seed: bytes = b"") -> str:
    """16 hex digits of SHA-256 over `seed` and each file's name and content, streamed in 1 MiB chunks."""
    paths = list(paths)
    names = [os.fspath(p) for p in paths]  # relative names: the working directory is in the key
    key = (seed, os.getcwd(), tuple(names), tuple((s.st_size, s.st_mtime_ns) for s in map(os.stat, names)))
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
    """The full SHA-256 of a file, streamed in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()

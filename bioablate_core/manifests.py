"""Size-and-checksum manifests for cache folders (pretraining shards, tokenized splits), written last and
checked before reuse, so that a damaged cache is rebuilt instead of read (or crashing every rerun).

A manifest maps each file name to its size, modification time and SHA-256. Checking a folder compares the
size always (a truncated or extended file) and the checksum only where the modification time differs
from the manifest's (a file rewritten in place, even at the same size): a shard set of tens of GB is
hashed once when written, not at every load.
"""

from __future__ import annotations

from pathlib import Path

from bioablate_core.fingerprints import file_sha256


def manifest_of(folder: Path, names: list[str]) -> dict[str, dict]:
    """The manifest of `names` in `folder` as they are now."""
    out = {}
    for name in names:
        stat = (folder / name).stat()
        out[name] = {"bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": file_sha256(folder / name)}
    return out


def damage(folder: Path, manifest: dict[str, dict]) -> str | None:
    """What is wrong with `folder` against its `manifest` (one line naming the file), or None."""
    for name, expected in manifest.items():
        path = folder / name
        try:
            stat = path.stat()
        except OSError:
            return f"{name} is missing"
        if stat.st_size != expected["bytes"]:
            return f"{name} has {stat.st_size:,} bytes, {expected['bytes']:,} when written"
        if stat.st_mtime_ns != expected["mtime_ns"] and file_sha256(path) != expected["sha256"]:
            return f"{name} was rewritten since the cache was made (its checksum differs)"
    return None

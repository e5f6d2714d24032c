"""Size-and-checksum manifests for cache folders, written last and checked before reuse, so a damaged cache
is rebuilt instead of read. The checksum is compared only where the modification time differs, so large
shards are hashed once, when written.
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

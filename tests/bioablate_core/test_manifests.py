"""bioablate_core.manifests: a cache folder's manifest finds a missing, resized or rewritten file, and hashes a file
again only when its modification time changed."""

from __future__ import annotations

import os

from bioablate_core.manifests import damage, manifest_of


def test_damage_names_the_file_and_what_changed(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"x" * 1000)
    (tmp_path / "b.bin").write_bytes(b"y" * 10)
    manifest = manifest_of(tmp_path, ["a.bin", "b.bin"])
    assert damage(tmp_path, manifest) is None

    stat = (tmp_path / "a.bin").stat()
    (tmp_path / "a.bin").write_bytes(b"z" * 1000)  # same size, other bytes
    os.utime(tmp_path / "a.bin", ns=(stat.st_atime_ns, stat.st_mtime_ns))  # ...and the old time: not looked at
    assert damage(tmp_path, manifest) is None
    os.utime(tmp_path / "a.bin", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert damage(tmp_path, manifest) == "a.bin was rewritten since the cache was made (its checksum differs)"

    (tmp_path / "a.bin").write_bytes(b"x" * 1000)  # the same bytes, a new time: the checksum clears it
    assert damage(tmp_path, manifest) is None
    (tmp_path / "b.bin").write_bytes(b"y" * 5)
    assert damage(tmp_path, manifest) == "b.bin has 5 bytes, 10 when written"
    (tmp_path / "b.bin").unlink()
    assert damage(tmp_path, manifest) == "b.bin is missing"

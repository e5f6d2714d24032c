"""core.fingerprints: the file listing behind dataset and model fingerprints, and the content hash."""

from __future__ import annotations

import os

from core.fingerprints import files_under, hash_files


def test_files_under_lists_what_sorted_rglob_lists_in_the_same_order(tmp_path, data_dir):
    # names that order differently as strings and as path parts ("a-b/x" < "a/x" as strings only)
    for rel in ("a/x", "a-b/x", "a/b/c.txt", "a.txt", ".hidden", "z/.cache/blob"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    (tmp_path / "link-to-a.txt").symlink_to(tmp_path / "a.txt")  # a Hub snapshot's files are links
    (tmp_path / "dangling").symlink_to(tmp_path / "missing")
    (tmp_path / "empty-dir").mkdir()
    expected = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert files_under(tmp_path) == expected and len(expected) == 7
    hoc = data_dir / "HoC"  # thousands of files
    assert files_under(hoc) == sorted(p for p in hoc.rglob("*") if p.is_file())


def test_hash_files_follows_content_and_names_not_timestamps(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("one")
    b.write_text("two")
    before = hash_files([a, b])
    os.utime(a, ns=(1, 1))  # touched, same content: the memo is bypassed, the hash is not changed
    assert hash_files([a, b]) == before
    a.write_text("One")
    assert hash_files([a, b]) != before
    assert hash_files([b, a]) != hash_files([a, b])
    assert hash_files([a], seed=b"x") != hash_files([a])

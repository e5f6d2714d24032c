"""Published folders get plain modes under the umask, whatever their writer chose; a file rewritten atomically
is the old content or the new, with nothing left beside it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from bioablate_core.files import current_umask, normalise_modes, publish_dir, write_text_atomic


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_owner_only_files_become_readable_by_all_under_umask_022(tmp_path: Path):
    old = os.umask(0o022)
    try:
        tmp = tmp_path / "model.tmp"
        (tmp / "sub").mkdir(parents=True)
        for path in (tmp / "model.safetensors", tmp / "sub" / "vocab.txt"):
            path.write_text("x")
            os.chmod(path, 0o600)
        os.chmod(tmp / "sub", 0o700)
        out = publish_dir(tmp, tmp_path / "model")
        assert not tmp.exists() and out == tmp_path / "model"
        assert _mode(out) == 0o755 and _mode(out / "sub") == 0o755
        assert _mode(out / "model.safetensors") == 0o644 and _mode(out / "sub" / "vocab.txt") == 0o644
    finally:
        os.umask(old)


def test_a_stricter_umask_is_respected_and_restored(tmp_path: Path):
    old = os.umask(0o077)
    try:
        (tmp_path / "f").write_text("x")
        os.chmod(tmp_path / "f", 0o644)
        normalise_modes(tmp_path)
        assert _mode(tmp_path / "f") == 0o600 and _mode(tmp_path) == 0o700
        assert current_umask() == 0o077
    finally:
        os.umask(old)


def test_a_file_written_atomically_replaces_the_old_content_and_leaves_no_part_file(tmp_path: Path):
    path = tmp_path / "new" / "plan.json"
    assert write_text_atomic(path, "old") == path  # its folder is created
    held = path.open(encoding="utf-8")  # a reader that opened the old file keeps reading the old file
    write_text_atomic(path, "new")
    assert held.read() == "old" and path.read_text(encoding="utf-8") == "new"
    held.close()
    assert [p.name for p in path.parent.iterdir()] == ["plan.json"]

"""Publishing a folder others will read: ordinary file modes, and an atomic move into place.

Some writers (safetensors' `save_file` among them) create files readable by their owner only (0600): a
model folder copied to a shared disk or uploaded would then be unreadable to everyone else. A published
folder gets the modes a plain `open()` / `mkdir()` would give under the process's umask: 0644 files and
0755 folders with the usual umask 022.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def current_umask() -> int:
    """The process's umask (reading it means setting it; it is put straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def normalise_modes(root: Path) -> None:
    """Give `root` and everything below it plain modes under the umask: 0666 & ~umask for files (no
    execute bit: nothing in a model folder is a program), 0777 & ~umask for folders."""
    mask = current_umask()
    os.chmod(root, 0o777 & ~mask)
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            os.chmod(Path(folder) / name, 0o777 & ~mask)
        for name in files:
            os.chmod(Path(folder) / name, 0o666 & ~mask)


def publish_dir(tmp: Path, out_dir: Path) -> Path:
    """Move the finished folder `tmp` to `out_dir` (replacing what was there) with plain modes; a reader
    never sees a half-written `out_dir`, only the old one or the new one."""
    normalise_modes(tmp)
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return out_dir

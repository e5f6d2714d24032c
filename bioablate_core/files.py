"""Publishing what others will read: ordinary file modes, and an atomic move into place (of a folder, or
of one file's new content).

Some writers (safetensors' `save_file`) create 0600 files, unreadable to others once shared; a published
folder gets the modes a plain `open()` / `mkdir()` would give under the umask.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path


def current_umask() -> int:
    """The process's umask (reading it means setting it; it is put straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def normalise_modes(root: Path) -> None:
    """Give `root` and everything below it plain modes under the umask (no execute bit on files)."""
    mask = current_umask()
    os.chmod(root, 0o777 & ~mask)
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            os.chmod(Path(folder) / name, 0o777 & ~mask)
        for name in files:
            os.chmod(Path(folder) / name, 0o666 & ~mask)


def publish_dir(tmp: Path, out_dir: Path) -> Path:
    """Move the finished folder `tmp` to `out_dir` with plain modes; a reader sees the old one or the new."""
    normalise_modes(tmp)
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return out_dir


def write_text_atomic(path: Path, text: str) -> Path:
    """Write `text` to `path` through a file beside it and a rename: never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    part.write_text(text, encoding="utf-8")
    os.replace(part, path)
    return path


def user_cache_dir() -> Path:
    """bioablate's folder in the user cache, for what is derived once per machine, never a run's output."""
    try:
        from platformdirs import user_cache_dir as platform_cache_dir
    except ImportError:
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bioablate"
    return Path(platform_cache_dir("bioablate", appauthor=False))


# errors that say the folder refuses writes (a read-only mount, no permission), not that it is full
READ_ONLY_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM)
# no space left, a quota reached, a file size limit (ulimit -f): every later write of the same size fails too
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def disk_full(error: BaseException) -> OSError | None:
    """The OSError of a full disk behind `error` (itself, its cause or context), or None."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in DISK_FULL_ERRNOS:
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


NOT_A_FOLDER_ERRNOS = (errno.EEXIST, errno.ENOTDIR)  # mkdir on a file, or under one


def unwritable(path: Path, probe_bytes: int = 0, advice: bool = False) -> str | None:
    """Why files cannot be written in the folder `path` (a probe file of `probe_bytes` is written and
    removed), or None; `advice` adds what to do about it."""
    probe = Path(path) / f".write-probe-{os.getpid()}"
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"x" * probe_bytes)
    except OSError as error:
        reason = str(error.strerror or error)
        if not advice:
            return reason
        if error.errno in READ_ONLY_ERRNOS:
            return f"{reason}: it is read-only for this user; pick a writable folder"
        if error.errno in NOT_A_FOLDER_ERRNOS:  # a file where the folder (or one above it) belongs
            return "a file is in its place (or in the place of a folder above it), not a folder; give a folder"
        if error.errno in DISK_FULL_ERRNOS:
            return f"{reason}; free space there or pick another folder"
        return f"{reason}; pick another folder"  # e.g. a parent that cannot hold folders (/proc)
    finally:
        try:
            probe.unlink(missing_ok=True)
        except OSError:
            pass
    return None


def writable_dir(path: Path, option: str) -> Path:
    """`path` as a folder to write into, created if needed, or a one-line ConfigError naming `option`."""
    from bioablate_core.errors import ConfigError

    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {path} is a file; name a folder (it is created if missing)")
    reason = unwritable(path)
    if reason is not None:
        raise ConfigError(f"{option} {path}: cannot write there ({reason})")
    return path

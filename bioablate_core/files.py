"""Publishing what others will read: ordinary file modes, and an atomic move into place (of a folder, or
of one file's new content).

Some writers (safetensors' `save_file` among them) create files readable by their owner only (0600): a
model folder copied to a shared disk or uploaded would then be unreadable to everyone else. A published
folder gets the modes a plain `open()` / `mkdir()` would give under the process's umask: 0644 files and
0755 folders with the usual umask 022.
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


def write_text_atomic(path: Path, text: str) -> Path:
    """Write `text` to `path` through a file beside it and a rename: a reader (another process, or this one
    after a crash) sees the old content or the new, never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    part.write_text(text, encoding="utf-8")
    os.replace(part, path)
    return path


def user_cache_dir() -> Path:
    """bioablate's folder in the user cache: platformdirs' `user_cache_dir("bioablate")` (which honours
    XDG_CACHE_HOME on Linux), or without platformdirs `$XDG_CACHE_HOME/bioablate`, else
    `~/.cache/bioablate`. For what is derived once per machine and version, never a run's output."""
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
    """The OSError of a full disk (DISK_FULL_ERRNOS) behind `error` (itself, or its cause or context), or
    None: what a run that failed writing its checkpoint, store or cache has in common with every run
    after it."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in DISK_FULL_ERRNOS:
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


NOT_A_FOLDER_ERRNOS = (errno.EEXIST, errno.ENOTDIR)  # mkdir on a file, or under one


def unwritable(path: Path, probe_bytes: int = 0, advice: bool = False) -> str | None:
    """Why files cannot be written in the folder `path` (created if missing; a probe file of `probe_bytes`
    is written and removed: a few KB show a full disk too), or None when they can. `advice`: with what to
    do about it (a read-only folder is not helped by freeing space)."""
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
    """`path` as a folder to write into, created if needed: a file in its place, or a folder that cannot
    be created or written (read-only, no permission, a full disk), is a one-line ConfigError naming
    `option`, before any work whose result would have nowhere to go."""
    from bioablate_core.errors import ConfigError

    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {path} is a file; name a folder (it is created if missing)")
    reason = unwritable(path)
    if reason is not None:
        raise ConfigError(f"{option} {path}: cannot write there ({reason})")
    return path

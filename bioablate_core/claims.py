"""Claims: at most one live process works on a thing (a run, a pretraining stage, a shard build) at a time.

    with claim(work_dir / "runs" / fingerprint / "claim.lock") as me:   # waits while another holds it
        ...                                                               # the work; `me` is our Holder
    holder(path)        # -> Holder(host, pid, since) of the live holder, or None

A claim is an exclusive `fcntl.flock`, which the OS releases when the holder dies, so it needs no timeout;
it works across machines on filesystems with flock (NFSv4, Lustre). Not `filelock`, which cannot say who
holds the lock. The file holds the holder's description; the lock, not the text, decides. Lock files are
never deleted: two processes could then "hold" one (old inode, new file). A forked child keeps the claim
until it exits too.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator


@dataclass(frozen=True)
class Holder:
    """Who holds a claim: the host name, process id and when (Unix time) it was taken."""

    host: str
    pid: int
    since: float

    def __str__(self) -> str:
        if self.pid == 0:  # UNKNOWN: the holder has not written its description
            return "another process (it has not described itself yet)"
        when = datetime.fromtimestamp(self.since, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"{self.host}:{self.pid} since {when}"

    @classmethod
    def me(cls) -> "Holder":
        return cls(socket.gethostname(), os.getpid(), time.time())

    def is_alive_here(self) -> bool | None:
        """On this host: whether the holder's process still exists; None on another host (unknown)."""
        if self.host != socket.gethostname():
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # exists, owned by another user
            return True
        return True


UNKNOWN = Holder("unknown-host", 0, 0.0)  # a holder that has not written its description yet


EXIT_CLAIM_HELD = 75  # EX_TEMPFAIL, the CLI's exit status for ClaimHeld: try again later


class ClaimHeld(Exception):
    """Another live process holds the claim and the caller asked not to wait (the CLI exits 75: try later)."""

    def __init__(self, what: str, holder: Holder | None):
        self.what, self.holder = what, holder
        super().__init__(f"{what} is held by {holder or UNKNOWN}; not waiting (--no-wait)")


def _open(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # read-write: NFS needs it for an exclusive lock


def _try_lock(fd: int, kind: int = fcntl.LOCK_EX) -> bool:
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _read_holder(fd: int, patience_s: float = 1.0) -> Holder:
    """The holder's description; an empty one is read again for `patience_s` (it is written just after)."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            info = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
            return Holder(str(info["host"]), int(info["pid"]), float(info["since"]))
        except (ValueError, KeyError, TypeError, OSError):
            if time.monotonic() >= deadline:
                return UNKNOWN
            time.sleep(0.05)


def holder(path: Path | str) -> Holder | None:
    """The live holder of the claim on `path`, or None when nobody holds it."""
    path = Path(path)
    if not path.exists():
        return None
    fd = _open(path)
    try:
        if _try_lock(fd, fcntl.LOCK_SH):  # free: a shared probe would block an exclusive holder
            return None
        return _read_holder(fd)
    finally:
        os.close(fd)  # releases the probe, if taken


@contextmanager
def claim(path: Path | str, *, wait: bool = True, what: str | None = None,
          on_wait: Callable[[Holder], None] | None = None) -> Iterator[Holder]:
    """Hold the claim on `path` for the block, yielding our `Holder`. If another holds it, wait (calling
    `on_wait(holder)` once), or with `wait=False` raise `ClaimHeld`, whose message names `what`."""
    path = Path(path)
    fd = _open(path)
    try:
        if not _try_lock(fd):
            current = _read_holder(fd)
            if not wait:
                raise ClaimHeld(what or str(path), current)
            if on_wait is not None:
                on_wait(current)
            fcntl.flock(fd, fcntl.LOCK_EX)  # blocks; a signal handler that raises still interrupts it
        me = Holder.me()
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"host": me.host, "pid": me.pid, "since": me.since}).encode(), 0)
        try:
            yield me
        finally:
            os.ftruncate(fd, 0)  # no stale description for the next reader
    finally:
        os.close(fd)  # releases the lock

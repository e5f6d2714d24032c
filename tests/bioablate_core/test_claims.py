"""bioablate_core/claims.py: one holder at a time, across real processes; the OS frees a dead holder's claim."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from bioablate_core.claims import ClaimHeld, Holder, claim, holder

REPO_ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def stopped(process: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """The process for the block, killed and reaped after it whatever happens."""
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def hold_in_subprocess(path: Path, seconds: float = 60) -> subprocess.Popen:
    """A separate process that takes the claim, prints "held" and sleeps."""
    code = textwrap.dedent(f"""
        import sys, time
        from bioablate_core.claims import claim
        with claim({str(path)!r}):
            print("held", flush=True)
            time.sleep({seconds})
    """)
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert process.stdout.readline().strip() == "held"
    return process


def test_a_free_claim_has_no_holder_and_the_holder_is_described(tmp_path):
    path = tmp_path / "deep" / "claim.lock"
    assert holder(path) is None  # no file yet
    with claim(path) as me:
        assert me.host == socket.gethostname() and me.pid == os.getpid() and me.since <= time.time()
        assert holder(path) == me
        assert str(me).startswith(f"{me.host}:{me.pid} since ")
    assert holder(path) is None and path.exists()  # released; the lock file stays (see the module doc)


def test_another_process_holding_it_makes_no_wait_raise_with_its_description(tmp_path):
    path = tmp_path / "claim.lock"
    with stopped(hold_in_subprocess(path)) as other:
        found = holder(path)
        assert found is not None and found.pid == other.pid and found.is_alive_here()
        with pytest.raises(ClaimHeld, match=rf"run x is held by {socket.gethostname()}:{other.pid} since"):
            with claim(path, wait=False, what="run x"):
                pass


def test_the_os_frees_the_claim_of_a_killed_holder(tmp_path):
    path = tmp_path / "claim.lock"
    other = hold_in_subprocess(path)
    other.send_signal(signal.SIGKILL)
    other.wait()
    assert holder(path) is None
    assert Holder(socket.gethostname(), other.pid, 0.0).is_alive_here() is False
    with claim(path, wait=False) as me:
        assert me.pid == os.getpid()


def test_a_waiter_says_once_who_it_waits_for_and_gets_the_claim_when_released(tmp_path):
    path = tmp_path / "claim.lock"
    seen: list[Holder] = []
    with stopped(hold_in_subprocess(path, seconds=1.0)) as other:
        start = time.time()  # it holds the claim from here on
        with claim(path, on_wait=seen.append) as me:
            assert me.pid == os.getpid()
            assert time.time() - start >= 0.5  # only once the other released it (after ~1 s)
    assert [h.pid for h in seen] == [other.pid]


def test_two_threads_never_hold_it_together(tmp_path):
    """flock locks belong to the open file, so two claims in one process exclude each other as well."""
    path = tmp_path / "claim.lock"
    inside, overlaps = [], []

    def work():
        for _ in range(20):
            with claim(path):
                inside.append(1)
                if len(inside) > 1:
                    overlaps.append(1)
                time.sleep(0.001)
                inside.pop()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not overlaps


def lock_then_describe(path: Path, delay: float | None) -> subprocess.Popen:
    """A process that takes the lock and writes its description only `delay` seconds later (None: never),
    as a holder caught between its flock and its write."""
    write = "" if delay is None else (f"time.sleep({delay}); os.pwrite(fd, json.dumps({{'host': socket.gethostname(), "
                                      "'pid': os.getpid(), 'since': time.time()}).encode(), 0)")
    code = textwrap.dedent(f"""
        import fcntl, json, os, socket, time
        fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("locked", flush=True)
        {write}
        time.sleep(60)
    """)
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "locked"
    return process


def test_a_holder_caught_before_it_described_itself_is_waited_for_then_named(tmp_path):
    """The waiter read the lock file between the holder's flock and its write: it said "unknown-host:0
    since 1970-01-01". It now reads again for a moment; a holder that never writes is "another process"."""
    path = tmp_path / "claim.lock"
    with stopped(lock_then_describe(path, 0.3)) as late:
        with pytest.raises(ClaimHeld, match=rf"held by {socket.gethostname()}:{late.pid} since 20"):
            with claim(path, wait=False, what="stage x"):
                pass
    with stopped(lock_then_describe(tmp_path / "other.lock", None)):
        with pytest.raises(ClaimHeld) as held:
            with claim(tmp_path / "other.lock", wait=False, what="stage y"):
                pass
        assert str(held.value) == ("stage y is held by another process (it has not described itself yet); "
                                   "not waiting (--no-wait)")

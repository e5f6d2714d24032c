"""SIGINT and SIGTERM as one exception, `Interrupted`, that nothing on the way up swallows.

    with handling_interrupts():        # the CLI wraps every command in this
        ...                            # Ctrl-C / SIGTERM raise Interrupted(signum) here
    check()                            # at safe points: re-raise a signal whose exception was lost
    with deferred():                   # steps a signal must not cut in two: it is raised after them
        ...

Why not KeyboardInterrupt: Lightning catches KeyboardInterrupt inside `fit`, ignores SIGINT from then on
and calls `sys.exit(1)` (the run looked FAILED with `SystemExit: 1`, exit status 1). `Interrupted` derives
from BaseException, not Exception, so `except Exception` blocks (a run loop recording failures and going
on) let it through, and Lightning tears down and re-raises it.

An exception raised while Python runs a finalizer (`__del__`, e.g. a profiler's) is printed and dropped;
the signal is remembered (`pending()`) until `handling_interrupts` exits, and `check()` raises it again.

Why `deferred`: the exception is raised between whichever two bytecodes the signal arrives at, and some
steps must not be cut in two. Inside SQLAlchemy's session-state guard it leaves the session unable to
close, and comes out as another error ("Method 'close()' can't be called here", "This transaction is
closed"); right after MLflow created a run, before the run's id reached the caller, nobody could end that
run (issue 18: it stayed RUNNING). Such steps run `deferred`: a first signal is remembered and raised when
the block ends. A second one raises at once, so a hung store can still be left. Outside deferred blocks,
an error raised while `pending()` names a signal is best treated as the signal's doing (callers check).

Exit status: 128 + the signal number, the shell convention: 130 for SIGINT, 143 for SIGTERM (what SLURM
sends on preemption and at the time limit; a launcher can requeue on 143).
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_pending: int | None = None
_deferring = 0  # depth of `deferred` blocks in the main thread
_held: int | None = None  # the signal a `deferred` block holds, raised when the outermost one ends


class Interrupted(BaseException):
    """The process received SIGINT or SIGTERM; `exit_code` is 128 + the signal number."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def __str__(self) -> str:
        return signal.Signals(self.signum).name


class Preempted(BaseException):
    """The scheduler is about to end the job; training stopped after saving a checkpoint
    (lightning_modules/preemption.py raises it). A BaseException, as `Interrupted` is: code that records
    failures (`except Exception`) must let it through to the launcher, which requeues the job. Here, not beside
    the callback, so the launcher and `bioablate status` catch it without importing Lightning."""


def _raise(signum: int, _frame) -> None:
    global _pending, _held
    first = _pending is None
    _pending = signum
    if _deferring and first:
        _held = signum
        return
    raise Interrupted(signum)


def deliver_once(signum: int) -> None:
    """Act as if `signum` arrived now, unless a signal already did: for a signal that stands for another
    and may come several times for one event (a pool worker's parent-death signal, which Linux sends again
    each time the worker is reparented, once per exiting thread of its parent). A real second SIGINT /
    SIGTERM raises at once, even inside a `deferred` block: a repeat of one event must not."""
    if _pending is None:
        _raise(signum, None)


def pending() -> int | None:
    """The signal received inside `handling_interrupts`, or None."""
    return _pending


def check() -> None:
    """Raise `Interrupted` if a signal arrived (also one whose exception a finalizer dropped)."""
    if _pending is not None:
        raise Interrupted(_pending)


@contextmanager
def deferred() -> Iterator[None]:
    """A first SIGINT / SIGTERM arriving inside the block is raised as `Interrupted` when the block ends
    (at once if a signal was already pending), not inside it; if the block raises, that error goes on and
    `pending()` names the signal. Nests; outside the main thread it does nothing (signals reach the main
    thread only)."""
    global _deferring, _held
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _deferring += 1
    held = None
    try:
        yield
    finally:
        _deferring -= 1
        if not _deferring:
            held, _held = _held, None
    if held is not None:
        raise Interrupted(held)


def install() -> None:
    """SIGINT and SIGTERM raise `Interrupted` from now on in this process (e.g. a worker process that
    runs until its pool shuts down); call from the main thread."""
    global _pending, _held
    _pending = _held = None
    for signum in SIGNALS:
        signal.signal(signum, _raise)


@contextmanager
def handling_interrupts() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` inside the block (main thread only; elsewhere this does
    nothing); the previous handlers come back after it. An error leaving the block while a signal is
    pending leaves it as `Interrupted`, raised from that error: the signal's doing (a store call it cut in
    two), not a failure to report with a traceback."""
    global _pending, _held
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in SIGNALS}
    install()
    try:
        yield
    except Exception as error:
        if _pending is None:
            raise
        raise Interrupted(_pending) from error
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _pending = _held = None

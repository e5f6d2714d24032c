"""SIGINT and SIGTERM as one exception, `Interrupted`, that nothing on the way up swallows.

    with handling_interrupts():        # the CLI wraps every command in this
        ...                            # Ctrl-C / SIGTERM raise Interrupted(signum) here
    check()                            # at safe points: re-raise a signal whose exception was lost
    with deferred():                   # steps a signal must not cut in two: it is raised after them
        ...

Not KeyboardInterrupt: Lightning catches it inside `fit` and calls `sys.exit(1)`. `Interrupted` derives from
BaseException, so `except Exception` blocks let it through. A signal whose exception a finalizer dropped
stays `pending()`, and `check()` raises it again.

`deferred` guards steps a signal must not cut in two (inside SQLAlchemy's session guard, or between MLflow
creating a run and its id reaching the caller): a first signal is raised when the block ends, a second at
once, so a hung store can still be left. Exit status: 128 + the signal number (143 for SLURM's SIGTERM).
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
    """The scheduler is about to end the job; training stopped after saving a checkpoint. A BaseException,
    so it reaches the launcher, which requeues; here so catching it needs no Lightning import."""


def _raise(signum: int, _frame) -> None:
    global _pending, _held
    first = _pending is None
    _pending = signum
    if _deferring and first:
        _held = signum
        return
    raise Interrupted(signum)


def deliver_once(signum: int) -> None:
    """Act as if `signum` arrived now, unless a signal already did: for a signal that may repeat for one
    event (a pool worker's parent-death signal, sent again on each reparenting), which must not count twice."""
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
    """A first SIGINT / SIGTERM inside the block is raised as `Interrupted` when it ends; if the block raises,
    that error goes on and `pending()` names the signal. Nests; a no-op outside the main thread."""
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
    """SIGINT and SIGTERM raise `Interrupted` from now on in this process; call from the main thread."""
    global _pending, _held
    _pending = _held = None
    for signum in SIGNALS:
        signal.signal(signum, _raise)


@contextmanager
def handling_interrupts() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` inside the block (main thread only). An error leaving it
    while a signal is pending leaves as `Interrupted`, raised from that error: the signal's doing."""
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

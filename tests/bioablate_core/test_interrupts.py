"""bioablate_core/interrupts.py: SIGINT / SIGTERM become Interrupted (exit 130 / 143), are not lost in finalizers,
and the previous handlers come back."""

from __future__ import annotations

import gc
import os
import signal

import pytest

from bioablate_core import interrupts
from bioablate_core.interrupts import Interrupted, handling_interrupts


@pytest.mark.parametrize("signum, code, name", [(signal.SIGINT, 130, "SIGINT"), (signal.SIGTERM, 143, "SIGTERM")])
def test_a_signal_raises_interrupted_with_the_conventional_exit_code(signum, code, name):
    before = signal.getsignal(signum)
    with pytest.raises(Interrupted) as raised:
        with handling_interrupts():
            os.kill(os.getpid(), signum)
            sum(range(1000))  # the handler runs between bytecodes
    assert raised.value.exit_code == code and str(raised.value) == name
    assert not isinstance(raised.value, Exception)  # `except Exception` (a run loop) lets it through
    assert signal.getsignal(signum) is before and interrupts.pending() is None


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped exception
def test_a_signal_swallowed_by_a_finalizer_is_raised_again_by_check():
    class SignalledWhileFinalized:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)
            sum(range(1000))  # the handler runs here: its exception is printed and dropped

    with pytest.raises(Interrupted) as raised:
        with handling_interrupts():
            SignalledWhileFinalized()
            gc.collect()
            assert interrupts.pending() == signal.SIGINT  # we got here: the exception was swallowed
            interrupts.check()
    assert raised.value.signum == signal.SIGINT


def test_check_does_nothing_without_a_signal():
    with handling_interrupts():
        interrupts.check()


def test_a_signal_inside_deferred_is_raised_when_the_outermost_block_ends():
    steps = []
    with pytest.raises(Interrupted) as raised:
        with handling_interrupts():
            with interrupts.deferred():
                with interrupts.deferred():
                    os.kill(os.getpid(), signal.SIGTERM)
                    sum(range(1000))  # the handler ran: it only remembered the signal
                    steps.append("inner block finished")
                steps.append("outer block finished")  # the inner block's end raised nothing
    assert steps == ["inner block finished", "outer block finished"]
    assert raised.value.signum == signal.SIGTERM


def test_a_second_signal_inside_deferred_raises_at_once():
    steps = []
    with pytest.raises(Interrupted):
        with handling_interrupts():
            with interrupts.deferred():
                os.kill(os.getpid(), signal.SIGINT)
                sum(range(1000))
                steps.append("first signal deferred")
                os.kill(os.getpid(), signal.SIGINT)  # e.g. Ctrl-C again while a store hangs
                sum(range(1000))
                steps.append("second signal deferred")
    assert steps == ["first signal deferred"]


def test_a_repeated_delivery_of_one_event_waits_for_the_deferred_block():
    """A pool worker's parent-death signal comes once per exiting thread of its parent: taken with
    `deliver_once`, the repeat neither raises inside the store write nor raises twice."""
    steps = []
    with pytest.raises(Interrupted) as raised:
        with handling_interrupts():
            with interrupts.deferred():
                interrupts.deliver_once(signal.SIGTERM)
                steps.append("first delivery deferred")
                interrupts.deliver_once(signal.SIGTERM)
                steps.append("repeat ignored")
            steps.append("not reached: raised when the block ended")
    assert steps == ["first delivery deferred", "repeat ignored"] and raised.value.signum == signal.SIGTERM


def test_an_error_leaving_the_block_while_a_signal_is_pending_leaves_it_as_the_signal():
    with pytest.raises(Interrupted) as raised:
        with handling_interrupts():
            with interrupts.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                sum(range(1000))
                raise RuntimeError("This transaction is closed")  # what a store call cut in two raises
    assert raised.value.signum == signal.SIGTERM and isinstance(raised.value.__cause__, RuntimeError)


def test_an_error_without_a_signal_leaves_the_block_as_itself():
    with pytest.raises(RuntimeError):
        with handling_interrupts():
            raise RuntimeError("a real failure")


def test_deferred_blocks_after_the_signal_was_raised_run_to_their_end():
    """Ending a run KILLED after the signal: its store calls (each deferred) must not raise it again."""
    steps = []
    with handling_interrupts():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            sum(range(1000))
        except Interrupted:
            for step in ("tag it stopped", "end it KILLED"):
                with interrupts.deferred():
                    steps.append(step)
    assert steps == ["tag it stopped", "end it KILLED"]

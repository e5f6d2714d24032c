"""A pool worker's watch on its parent (`watch_for_orphaning`), on a simulated clock: it never sends a
second SIGTERM (which would cut the ending of the run in two), sends one only when the parent-death
signal was lost, and exits once the grace is over. The whole path, a real `bioablate run` SIGKILLed with
its workers training, is tests/e2e/test_run_claims.py."""

from __future__ import annotations

from ablations.experiment.workers import watch_for_orphaning


class Clock:
    """Simulated time; the watch's state changes happen at given times."""

    def __init__(self, orphaned_at: float, signalled_at: float | None):
        self.now, self.orphaned_at, self.signalled_at = 0.0, orphaned_at, signalled_at
        self.events: list[tuple[str, float]] = []

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def watch(self) -> list[tuple[str, float]]:
        watch_for_orphaning(lambda: self.now >= self.orphaned_at,
                            lambda: self.signalled_at is not None and self.now >= self.signalled_at,
                            lambda: self.events.append(("signal", self.now)),
                            lambda: self.events.append(("exit", self.now)),
                            poll_s=0.5, signal_grace_s=10.0, exit_grace_s=30.0, sleep=self.sleep)
        return self.events


def test_a_parent_death_signal_that_reaches_the_handler_late_gets_no_second_signal():
    # the main thread was in a long C call: its handler ran 3 s after the orphaning
    events = Clock(orphaned_at=5.0, signalled_at=8.0).watch()
    assert [name for name, _ in events] == ["exit"]
    assert events[0][1] >= 8.0 + 30.0 - 0.5  # the run had its grace to end KILLED


def test_a_lost_parent_death_signal_is_sent_once_after_the_grace_then_the_worker_exits():
    events = Clock(orphaned_at=5.0, signalled_at=None).watch()
    assert [name for name, _ in events] == ["signal", "exit"]
    signal_at, exit_at = events[0][1], events[1][1]
    assert 5.0 + 10.0 <= signal_at <= 5.0 + 10.5 and exit_at == signal_at + 30.0


def test_a_signal_already_handled_is_not_repeated():
    events = Clock(orphaned_at=2.0, signalled_at=1.0).watch()
    assert [name for name, _ in events] == ["exit"]


CTRL_C_AT_WORKER_START = """
import sys, time
from bioablate_core import interrupts
from ablations.experiment.workers import stop_workers, worker_pool

def main():
    with interrupts.handling_interrupts():
        pool = worker_pool(2, 1, False)
        try:
            [pool.submit(time.sleep, 3) for _ in range(2)]
            print("started", flush=True)
            time.sleep(60)
        except BaseException:  # as ablations.experiment.runner does
            stop_workers()
            raise
        finally:
            pool.shutdown(cancel_futures=True)

if __name__ == "__main__":
    try:
        main()
    except interrupts.Interrupted as stop:
        sys.exit(stop.exit_code)
"""


def test_ctrl_c_while_the_workers_start_stops_the_invocation_without_a_traceback(tmp_path):
    """The terminal's SIGINT reaches the whole process group; workers just started (their interpreter
    starting, or importing torch in the initializer) printed KeyboardInterrupt and "Exception in
    initializer" tracebacks. They leave that signal to the parent, which terminates them."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    script = tmp_path / "invocation.py"
    script.write_text(CTRL_C_AT_WORKER_START)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])})
    assert parent.stdout.readline() == "started\n"  # the two workers' processes are starting
    time.sleep(1)  # their interpreters importing the project, or the initializer importing torch: seconds
    os.killpg(parent.pid, signal.SIGINT)
    _, err = parent.communicate(timeout=120)
    assert parent.returncode == 128 + signal.SIGINT
    assert "Traceback" not in err and "initializer" not in err and "leaked" not in err, err

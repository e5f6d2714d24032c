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

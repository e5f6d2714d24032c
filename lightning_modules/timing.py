"""A run's timing profile: where its wall time goes, measured by timers where the work happens.

    with profiled() as profile:             # a run (ablations/run/finetune.py)
        with section("model_load"):         # the work, wherever it is done
            ...
        trainer = pl.Trainer(callbacks=[LoopTimer(), ...])  # lightning_modules/loop_timer.py
        run.log_metrics(profile.metrics())  # system/time/<part>, system/time/wall

Sections nest and time goes to the innermost open one, so nothing counts twice; only the thread that opened
the profile is timed, and `other` is the rest of the wall time. A process's first run also carries the
process's start (interpreter, imports).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager, nullcontext
from typing import ContextManager, Iterator

import psutil

from bioablate_core.hardware import TIME_PREFIX

# every part of a profile, in the order a run goes through them (logged as system/time/<part>)
PARTS = ("process_start_imports", "model_load", "tokenization", "train_steps", "dev_eval", "test",
         "checkpoint_writes", "mlflow_logging", "other")
_process_start_taken = False  # the first profile of this process carried its start


class Profile:
    """Seconds per part of one run (see the module doc)."""

    def __init__(self, since_process_start: float = 0.0):
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self.seconds["process_start_imports"] = since_process_start
        self.thread = threading.get_ident()
        self.started = self.mark = time.perf_counter()
        self.open: list[str] = []

    def _switch(self) -> None:
        """Credit the time since the last switch to the innermost open section."""
        now = time.perf_counter()
        if self.open:
            self.seconds[self.open[-1]] += now - self.mark
        self.mark = now

    def enter(self, part: str) -> None:
        if part not in self.seconds:
            raise ValueError(f"unknown timing part {part!r}; one of {', '.join(PARTS)}")
        if threading.get_ident() == self.thread:
            self._switch()
            self.open.append(part)

    def leave(self, part: str) -> None:
        if threading.get_ident() == self.thread and part in self.open:
            self._switch()
            del self.open[len(self.open) - 1 - self.open[::-1].index(part)]

    @contextmanager
    def section(self, part: str) -> Iterator[None]:
        self.enter(part)
        try:
            yield
        finally:
            self.leave(part)

    def metrics(self) -> dict[str, float]:
        """system/time/<part> for every part and system/time/wall, in seconds, as of now."""
        self._switch()
        wall = self.seconds["process_start_imports"] + time.perf_counter() - self.started
        measured = sum(v for k, v in self.seconds.items() if k != "other")
        return {**{f"{TIME_PREFIX}{k}": round(v, 4) for k, v in self.seconds.items() if k != "other"},
                f"{TIME_PREFIX}other": round(wall - measured, 4), f"{TIME_PREFIX}wall": round(wall, 4)}


_active: Profile | None = None


@contextmanager
def profiled() -> Iterator[Profile]:
    """Profile the block as one run (the first in this process also carries the process's start)."""
    global _active, _process_start_taken
    since_start = 0.0 if _process_start_taken else max(0.0, time.time() - psutil.Process().create_time())
    _process_start_taken = True
    outer, _active = _active, Profile(since_start)
    try:
        yield _active
    finally:
        _active = outer


def section(part: str) -> ContextManager[None]:
    """Time the block as `part` of the run being profiled (nothing outside a run)."""
    return _active.section(part) if _active is not None else nullcontext()


def enter_part(part: str) -> None:
    """Open `part` from a hook that cannot hold a `with` block open; nothing outside a run."""
    if _active is not None:
        _active.enter(part)


def leave_part(part: str) -> None:
    """Close `part`, opened by `enter_part`."""
    if _active is not None:
        _active.leave(part)

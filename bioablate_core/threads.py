"""How many CPU threads torch uses, and how its OpenMP threads wait, chosen from the CPUs actually free.

OpenMP threads that finish first spin while waiting for the others; on a shared machine they wait for
threads another process holds off the CPU, and the spinning burns the others' time. So before torch is
imported (libgomp reads its settings once) a command that trains takes:

- threads: the CPUs of its affinity mask less those others keep busy, at least 1;
- the wait policy: PASSIVE where other work holds any of those CPUs, else OpenMP's default spin.

Busy CPUs are read from /proc/stat over a short sample, not the load average, which counts a command that
just ended as other work. The user's MKL_NUM_THREADS / OMP_NUM_THREADS / OMP_WAIT_POLICY win. No fixed
setting would do: the right one differs between a quiet machine and a shared one.

Each run then takes its count again (`for_run`): a run of a long command samples the load anew (the wait
policy stays: libgomp reads it once), and a resumed run computes on the count it started with, because sums
split over another number of threads differ in the last digits and a resume is to be bitwise.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, replace
from typing import Callable, Optional

SAMPLE_S = 0.2  # how long the CPUs' idle time is watched at start
SHARED_BUSY = 0.5  # CPUs kept busy by others from which the machine counts as shared (PASSIVE waiting)
WAIT_POLICIES = ("PASSIVE", "ACTIVE")  # OpenMP's two, in any case
THREADS_TAG = "torch_threads"  # the MLflow tag of the count a run started on (a resume reads it)
HOW_TO_CHANGE = "set OMP_NUM_THREADS and OMP_WAIT_POLICY (PASSIVE or ACTIVE) to choose"
# the variables torch takes its thread count from, the first set one deciding (ATen's intraop default)
THREAD_COUNT_VARIABLES = ("MKL_NUM_THREADS", "OMP_NUM_THREADS")


@dataclass(frozen=True)
class ThreadChoice:
    threads: int
    wait_policy: Optional[str]  # None: OpenMP's default
    usable: int  # CPUs in the affinity mask
    busy: float  # of those, how many others keep busy
    from_user: tuple[str, ...] = ()  # the environment variables that decided instead
    torch_took: Optional[int] = None  # what torch took, where known and not `threads` (it caps a count at its CPUs)

    def line(self) -> str:
        policy = self.wait_policy or "OpenMP's default (spin, then sleep)"
        named = [name for name in THREAD_COUNT_VARIABLES if name in self.from_user]
        if named and self.torch_took is not None:
            threads = f"{self.torch_took} ({named[0]}={self.threads}, which torch caps at its CPU count)"
        elif named:
            threads = f"{self.threads} ({named[0]})"
        else:
            threads = f"{self.threads} of {self.usable} usable CPUs ({self.busy:.1f} busy with other work)"
        source = " (OMP_WAIT_POLICY)" if "OMP_WAIT_POLICY" in self.from_user else ""
        how = HOW_TO_CHANGE.replace("OMP_NUM_THREADS", named[0]) if named else HOW_TO_CHANGE
        return f"bioablate: torch threads: {threads}; OpenMP wait policy: {policy}{source}; {how}"


def choose(usable: int, busy: float) -> tuple[int, Optional[str]]:
    """Threads and wait policy for `usable` CPUs of which others keep `busy` busy."""
    threads = max(1, min(usable, int(usable - busy + 0.5)))
    return threads, ("PASSIVE" if busy >= SHARED_BUSY else None)


def usable_cpus() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def busy_cpus(cpus: list[int], sample_s: float = SAMPLE_S) -> float:
    """How many of `cpus` other work keeps busy over `sample_s`; without /proc/stat, from the load average."""
    before = _idle_and_total(cpus)
    if before is None:
        share = len(cpus) / (os.cpu_count() or len(cpus))
        return min(float(len(cpus)), os.getloadavg()[0] * share if hasattr(os, "getloadavg") else 0.0)
    time.sleep(sample_s)
    after = _idle_and_total(cpus)
    idle, total = after[0] - before[0], after[1] - before[1]
    return min(float(len(cpus)), len(cpus) * (1 - idle / total) if total > 0 else 0.0)


def _idle_and_total(cpus: list[int]) -> Optional[tuple[int, int]]:
    """Idle and total jiffies of `cpus` from /proc/stat; None off Linux. Niced work counts as busy: under
    autogroup scheduling nice only ranks the processes of one session."""
    wanted = {f"cpu{n}" for n in cpus}
    idle = total = 0
    try:
        with open("/proc/stat") as f:
            for line in f:
                fields = line.split()
                if fields and fields[0] in wanted:
                    ticks = [int(x) for x in fields[1:]]
                    idle += ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
                    total += sum(ticks[:8])  # guest time is already counted in user
    except (OSError, ValueError, IndexError):
        return None
    return (idle, total) if total else None


def configured_threads(environ: Optional[dict] = None) -> int:
    """The thread count torch takes: MKL_NUM_THREADS, else OMP_NUM_THREADS, else the usable CPUs."""
    env = os.environ if environ is None else environ
    for name in THREAD_COUNT_VARIABLES:
        if env.get(name):
            return _thread_count(name, env[name])
    return len(usable_cpus())


def _thread_count(name: str, value: str) -> int:
    """`value` of the variable `name` as a thread count, else a ConfigError (torch would quietly guess)."""
    first = value.split(",")[0].strip()
    if not first.isdigit() or int(first) < 1:
        from bioablate_core.errors import ConfigError

        raise ConfigError(f"{name}={value!r} is not a thread count: set it to a whole number of 1 or more, or "
                          "unset it to let bioablate choose from the CPUs free")
    return int(first)


_CHOSEN: Optional[ThreadChoice] = None  # this process's choice, until `announce` has said it
_AUTO: Optional[ThreadChoice] = None  # this process's choice where the load made it (no user variable)


def configure(environ: Optional[dict] = None) -> ThreadChoice:
    """Set OMP_NUM_THREADS, OMP_WAIT_POLICY and KMP_BLOCKTIME; call before torch is imported."""
    env = os.environ if environ is None else environ
    cpus = usable_cpus()
    given = tuple(name for name in (*THREAD_COUNT_VARIABLES, "OMP_WAIT_POLICY") if env.get(name))
    # each given count checked (a mistake in the one torch passes over is still one), the first deciding
    counts = [_thread_count(name, env[name]) for name in THREAD_COUNT_VARIABLES if name in given]
    busy = busy_cpus(cpus) if not (counts and "OMP_WAIT_POLICY" in given) else 0.0
    threads, policy = choose(len(cpus), busy)
    if counts:
        threads = counts[0]
    else:
        env["OMP_NUM_THREADS"] = str(threads)
    if "OMP_WAIT_POLICY" in given:
        policy = env["OMP_WAIT_POLICY"].strip().upper()
        if policy not in WAIT_POLICIES:  # libgomp would ignore it and spin as by default
            from bioablate_core.errors import ConfigError

            raise ConfigError(f"OMP_WAIT_POLICY={env['OMP_WAIT_POLICY']!r} is not a wait policy: set it to PASSIVE or "
                              "ACTIVE, or unset it to let bioablate choose from the CPUs free")
    elif policy:
        env["OMP_WAIT_POLICY"] = policy
        env.setdefault("KMP_BLOCKTIME", "0")
    choice = ThreadChoice(threads, policy, len(cpus), busy, given)
    if environ is None:
        global _CHOSEN, _AUTO
        _CHOSEN = choice
        _AUTO = None if counts else choice
    return choice


def for_run(recorded: Optional[int] = None, busy: Callable[[list[int]], float] = busy_cpus) -> int:
    """The thread count one run computes on, set in torch and returned: `recorded`, the count of the run it
    resumes; else, where `configure` chose from the load and nobody changed torch's count since, a choice
    made again from the load now; else torch's count as it is. A change is said in one line."""
    import torch

    global _AUTO
    now = torch.get_num_threads()
    auto = _AUTO is not None and now == _AUTO.threads
    if recorded is not None:
        count, why = recorded, "the count the run it resumes started on"
    elif auto:
        cpus = usable_cpus()
        load = busy(cpus)
        count = choose(len(cpus), load)[0]
        why = f"of {len(cpus)} usable CPUs ({load:.1f} busy with other work)"
    else:
        return now
    if auto:
        _AUTO = replace(_AUTO, threads=count)
    if count != now:
        torch.set_num_threads(count)
        print(f"bioablate: torch threads: {count} {why} (were {now})", file=sys.stderr, flush=True)
    return count


def announce() -> None:
    """Say this process's choice on stderr, once, after the command has checked its input."""
    global _CHOSEN
    if _CHOSEN is not None:
        import torch  # the work about to start imports it anyway; the line says what torch took

        took = torch.get_num_threads()
        choice = _CHOSEN if took == _CHOSEN.threads else replace(_CHOSEN, torch_took=took)
        print(choice.line(), file=sys.stderr, flush=True)
        _CHOSEN = None

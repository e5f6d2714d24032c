"""Threads and the OpenMP wait policy chosen from the CPUs actually free (bioablate_core/threads.py): under
a real load, in a real interpreter that then imports torch (the command line's line saying the choice:
tests/e2e/test_run_output.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bioablate_core import threads
from bioablate_core.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]
# the choice is said as soon as it is made (the test then stops the load: torch's import needs no busy CPUs,
# and spinning through it cost two cores ~5 s a test), then what torch took from it
CHOOSE_THEN_TORCH = """
import json, os, sys
from bioablate_core import threads
choice = threads.configure()
print(json.dumps({"usable": choice.usable, "busy": choice.busy, "line": choice.line()}), flush=True)
sys.stdin.readline()
import torch
print(json.dumps({"threads": torch.get_num_threads(), "policy": os.environ.get("OMP_WAIT_POLICY")}))
"""


def _env(**given: str) -> dict:
    # none of the thread settings the test run itself has (tests/conftest.py gives xdist workers one thread)
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "KMP_BLOCKTIME", "MKL_NUM_THREADS")}
    return {**env, "PYTHONPATH": str(REPO_ROOT), **given}


def _pinned(cpus: set[int]):
    return lambda: os.sched_setaffinity(0, cpus)


class BusyCPUs:
    """Up to two CPUs of this process's mask, each kept busy by a spinning process pinned to it."""

    def __init__(self):
        self.cpus = set(sorted(os.sched_getaffinity(0))[:2])
        self.spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"], preexec_fn=_pinned({cpu}))
                         for cpu in self.cpus]
        time.sleep(0.5)  # started and spinning

    def stop(self) -> None:
        for spinner in self.spinners:
            spinner.kill()
            spinner.wait()


@pytest.fixture
def busy_cpus():
    busy = BusyCPUs()
    yield busy
    busy.stop()


def _choose_in_subprocess(busy: BusyCPUs, **env: str) -> dict:
    child = subprocess.Popen([sys.executable, "-c", CHOOSE_THEN_TORCH], env=_env(**env), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=_pinned(busy.cpus))
    chosen = child.stdout.readline()  # the choice, made under the load
    busy.stop()
    out, err = child.communicate("go\n", timeout=120)
    assert child.returncode == 0 and chosen, err
    return {**json.loads(chosen), **json.loads(out)}


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
def test_busy_cpus_give_one_thread_that_sleeps_while_it_waits(busy_cpus):
    """Every CPU of the process's mask busy with another process: torch gets one thread and the PASSIVE
    wait policy (torch's own default there is a thread per CPU of the mask, spinning while it waits)."""
    chosen = _choose_in_subprocess(busy_cpus)
    assert chosen["usable"] == len(busy_cpus.cpus) and chosen["busy"] >= len(busy_cpus.cpus) - 0.5
    assert chosen["threads"] == 1 and chosen["policy"] == "PASSIVE"
    assert "1 of" in chosen["line"] and "OMP_NUM_THREADS" in chosen["line"]  # and how to change it


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
def test_the_users_settings_win(busy_cpus):
    chosen = _choose_in_subprocess(busy_cpus, OMP_NUM_THREADS="2", OMP_WAIT_POLICY="active")
    assert chosen["threads"] == 2 and chosen["policy"] == "active"
    assert "2 (OMP_NUM_THREADS)" in chosen["line"] and "ACTIVE (OMP_WAIT_POLICY)" in chosen["line"]


# the line a command says when its work starts, then the thread count torch computes with
ANNOUNCE_THEN_TORCH = """
from bioablate_core import threads
threads.configure()
threads.announce()
import torch
print(torch.get_num_threads())
"""


def _announced(**env: str) -> tuple[str, int]:
    child = subprocess.run([sys.executable, "-c", ANNOUNCE_THEN_TORCH], capture_output=True, text=True,
                           env=_env(**env), timeout=120)
    assert child.returncode == 0, child.stderr
    return child.stderr.strip(), int(child.stdout)


@pytest.mark.parametrize("given,said", [
    # torch takes its count from MKL_NUM_THREADS before OMP_NUM_THREADS (the line had said 2 where torch ran on 1)
    ({"MKL_NUM_THREADS": "1", "OMP_NUM_THREADS": "2"}, "torch threads: 1 (MKL_NUM_THREADS); "),
    # more threads than the machine's CPUs: torch takes its CPU count (the line had said the count asked)
    ({"OMP_NUM_THREADS": str((os.cpu_count() or 1) + 2)},
     f"torch threads: {{took}} (OMP_NUM_THREADS={(os.cpu_count() or 1) + 2}, which torch caps at its CPU count)"),
])
def test_the_line_says_the_thread_count_torch_took(given, said):
    line, took = _announced(**given)
    assert said.format(took=took) in line, (line, took)


@pytest.mark.parametrize("name,value", [("MKL_NUM_THREADS", "abc"), ("OMP_NUM_THREADS", "0"),
                                        ("OMP_NUM_THREADS", "-2,1")])
def test_a_thread_count_that_is_none_is_one_line_naming_the_variable(name, value):
    with pytest.raises(ConfigError, match=f"^{name}='{value}' is not a thread count: set it to a whole number"):
        threads.configure({name: value, "OMP_WAIT_POLICY": "PASSIVE"})


@pytest.mark.parametrize("value", ["bogus", "", "spin"])
def test_a_wait_policy_that_is_none_is_one_line_naming_the_variable(value):
    environ = {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": value}
    if not value:  # unset in effect: bioablate chooses
        assert threads.configure(environ).wait_policy in (None, "PASSIVE")
        return
    with pytest.raises(ConfigError, match=f"^OMP_WAIT_POLICY='{value}' is not a wait policy: set it to PASSIVE or "):
        threads.configure(environ)
    assert threads.configure({"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": " passive"}).wait_policy == "PASSIVE"


def test_the_worker_processes_share_out_the_count_torch_reads():
    assert threads.configured_threads({"MKL_NUM_THREADS": "1", "OMP_NUM_THREADS": "2"}) == 1
    assert threads.configured_threads({"OMP_NUM_THREADS": "3,1"}) == 3


def test_the_command_line_refuses_a_thread_count_that_is_none_in_one_line():
    child = subprocess.run([sys.executable, "-m", "ablations.cli", "finetune", "--task", "gad"], capture_output=True,
                           text=True, env=_env(MKL_NUM_THREADS="two"), timeout=120, cwd=REPO_ROOT)
    assert child.returncode == 2 and child.stderr.splitlines() == [
        "bioablate: error: MKL_NUM_THREADS='two' is not a thread count: set it to a whole number of 1 or more, or "
        "unset it to let bioablate choose from the CPUs free"], child.stderr


def test_free_cpus_are_the_usable_less_the_busy():
    assert threads.choose(2, 0.1) == (2, None)  # alone: every CPU, OpenMP's default waiting
    assert threads.choose(2, 0.7) == (1, "PASSIVE")
    assert threads.choose(16, 3.2) == (13, "PASSIVE")
    assert threads.choose(2, 9.0) == (1, "PASSIVE")  # never fewer than one


def test_a_load_that_has_ended_does_not_count(monkeypatch):
    """The 1-minute load average still says 2 CPUs busy for a minute after a command on them ended; the
    CPUs' idle time over the sample says they are free now: the next command takes both (a script's loop
    over seeds ran every command after the first on one thread of two)."""
    ticks = iter([(1_000, 2_000), (1_020, 2_020)])  # /proc/stat over the sample: 20 of 20 ticks idle
    monkeypatch.setattr(threads, "_idle_and_total", lambda cpus: next(ticks))
    monkeypatch.setattr(os, "getloadavg", lambda: (2.0, 1.2, 0.5))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    busy = threads.busy_cpus([0, 1], sample_s=0.0)
    assert busy == 0.0 and threads.choose(2, busy) == (2, None)


def test_without_proc_stat_the_load_average_decides(monkeypatch):
    monkeypatch.setattr(threads, "_idle_and_total", lambda cpus: None)
    monkeypatch.setattr(os, "getloadavg", lambda: (3.0, 1.0, 1.0))
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert threads.busy_cpus([0, 1], sample_s=0.0) == 1.5  # the pair's share of the machine's load


# a long command's runs, each taking its count again: the load now, a resumed run's recorded count, a caller's
RUN_BY_RUN = """
import json
from bioablate_core import threads
threads.configure()
import torch
usable, seen = len(threads.usable_cpus()), []
seen.append(threads.for_run(busy=lambda cpus: 0.0))               # quiet: every CPU
seen.append(threads.for_run(busy=lambda cpus: float(len(cpus))))  # others took every CPU: one thread
seen.append(threads.for_run(recorded=usable, busy=lambda cpus: float(len(cpus))))  # a resume: its count
seen.append(torch.get_num_threads())
torch.set_num_threads(1)                                          # a caller chose: kept
seen.append(threads.for_run(busy=lambda cpus: 0.0))
print(json.dumps({"usable": usable, "seen": seen}))
"""


@pytest.mark.skipif(len(threads.usable_cpus()) < 2, reason="needs two CPUs to tell counts apart")
@pytest.mark.parametrize("given", [{}, {"OMP_NUM_THREADS": "1"}])
def test_each_run_takes_its_count_again_and_a_resume_the_count_it_started_on(given):
    done = subprocess.run([sys.executable, "-c", RUN_BY_RUN], env=_env(**given), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    usable = out["usable"]
    if given:  # the user's count stays, except where a resume needs its own
        assert out["seen"] == [1, 1, usable, usable, 1], out
    else:
        assert out["seen"] == [usable, 1, usable, usable, 1], out
        assert f"torch threads: 1 of {usable} usable CPUs" in done.stderr  # a change is said
    assert "the count the run it resumes started on" in done.stderr

"""A pytest plugin that writes each test's wall time and CPU, its worker's own and that of the child
processes the worker waited for, one tab-separated line per test: where the suite's time goes, and how much of
it is waiting (wall minus CPU; SLURM jobs run under slurmd, so their CPU is not counted).

    PYTHONPATH=scripts CPU_CENSUS=/tmp/census.tsv .venv/bin/python -m pytest -p pytest_cpu_census -n 2 --dist loadfile
    sort -rn /tmp/census.tsv | head          # wall, own CPU, children's CPU, test id, worker, end (epoch s)

A child's CPU is counted when it is waited for (`subprocess.run`, `Popen.wait`), so a child left running past
its test counts toward the test that reaps it. docs/performance.md, "The suite, session 27", reads one."""

from __future__ import annotations

import os
import time

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start, before = time.perf_counter(), os.times()
    yield
    after, wall = os.times(), time.perf_counter() - start
    worker = os.environ.get("PYTEST_XDIST_WORKER", "-")
    own = after.user - before.user + after.system - before.system
    children = after.children_user - before.children_user + after.children_system - before.children_system
    with open(os.environ.get("CPU_CENSUS", "cpu_census.tsv"), "a", encoding="utf-8") as out:
        out.write(f"{wall:.2f}\t{own:.2f}\t{children:.2f}\t{item.nodeid}\t{worker}\t{time.time():.1f}\n")

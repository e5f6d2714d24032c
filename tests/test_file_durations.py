"""scripts/test_file_durations.py reads a `--durations=0` log into each file's seconds, and the suite's
order (tests/conftest.py) puts the files it measured longest first."""

from __future__ import annotations

import importlib.util
import json
import types
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("test_file_durations",
                                                  REPO_ROOT / "scripts" / "test_file_durations.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_durations_log_sums_each_files_phases_longest_first():
    log = """
============================= slowest durations ==============================
12.50s call     tests/e2e/test_a.py::test_one[x]
0.60s setup    tests/e2e/test_a.py::test_one[x]
30.00s call     tests/b/test_b.py::test_two
0.40s teardown tests/e2e/test_a.py::test_other
0.30s call     tests/c/test_c.py::test_tiny
(4789 durations < 0.005s hidden.  Use -vv to show these durations.)
"""
    seconds = _script().file_seconds(log)
    assert seconds == {"tests/b/test_b.py": 30, "tests/e2e/test_a.py": 14}  # < 1 s: left out
    assert list(seconds) == ["tests/b/test_b.py", "tests/e2e/test_a.py"]  # longest first


def test_the_measured_files_exist_and_the_suite_takes_them_longest_first(request):
    measured = json.loads((REPO_ROOT / "tests" / "file_durations.json").read_text())
    assert all((REPO_ROOT / path).is_file() for path in measured), \
        [p for p in measured if not (REPO_ROOT / p).is_file()]
    order = list(dict.fromkeys(item.path.relative_to(REPO_ROOT).as_posix() for item in request.session.items))
    if len(order) < len(measured) / 2:
        pytest.skip("a few files selected: the order is the suite's")
    ranked = [path for path in order if path in measured]
    assert [measured[p] for p in ranked] == sorted((measured[p] for p in ranked), reverse=True)


def test_xdist_sends_the_files_in_the_suites_order(pytestconfig):
    """CI's workers (`-n 2 --dist loadfile`) take whole files in the order the suite sorted them, not
    pytest-xdist's own (files with more tests first: tests/conftest.py turns it off). Its scheduler, given
    this run's options, on two stand-in workers that record what they are sent."""
    from xdist import scheduler  # a dev dependency (pyproject.toml): the suite runs on it

    class Worker:
        def __init__(self, name: str):
            self.gateway, self.sent, self.shutting_down = types.SimpleNamespace(id=name), [], False

        def send_runtest_some(self, indices: list[int]) -> None:
            self.sent += indices

        def shutdown(self) -> None:
            pass

    # a long one-test file first (as the suite sorts by seconds), then a file of three short tests
    collection = ["tests/long.py::test_a", *(f"tests/many.py::test_{i}" for i in range(3)), "tests/short.py::test_b"]
    # this run's options (whatever the run's own -n: two workers here)
    config = types.SimpleNamespace(option=pytestconfig.option,
                                   getvalue=lambda name: ["popen"] * 2 if name == "tx" else pytestconfig.getvalue(name))
    schedule = scheduler.LoadFileScheduling(config)
    workers = [Worker("gw0"), Worker("gw1")]
    for worker in workers:
        schedule.add_node(worker)
        schedule.add_node_collection(worker, collection)
    schedule.schedule()
    assert workers[0].sent[0] == 0 and workers[1].sent[:3] == [1, 2, 3], [w.sent for w in workers]

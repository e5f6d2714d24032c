"""scripts/test_file_durations.py reads a `--durations=0` log into each file's seconds, and the suite's
order (tests/conftest.py) puts the files it measured longest first."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("test_file_durations", REPO_ROOT / "scripts" / "test_file_durations.py")
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
    assert all((REPO_ROOT / path).is_file() for path in measured), [p for p in measured if not (REPO_ROOT / p).is_file()]
    order = list(dict.fromkeys(item.path.relative_to(REPO_ROOT).as_posix() for item in request.session.items))
    if len(order) < len(measured) / 2:
        pytest.skip("a few files selected: the order is the suite's")
    ranked = [path for path in order if path in measured]
    assert [measured[p] for p in ranked] == sorted((measured[p] for p in ranked), reverse=True)

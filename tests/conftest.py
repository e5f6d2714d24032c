"""Shared fixtures and the test tiers.

Tests read the real staged datasets: `BIOABLATE_DATA`, else `../shared/data` beside the repository (where
CI puts it). Markers (see pyproject.toml): `needs_data` is set here on every test that uses the `data_dir`
fixture, `postgres` on every test that uses a PostgreSQL server (`postgres_url`), `browser` on every test
that drives a headless Chromium (`chromium`, skipped with the reason where none is installed); `slow` and
`ddp` are set in the test files. The fast tier is `pytest -m "not slow"`.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def _data_dir() -> Path:
    env = os.environ.get("BIOABLATE_DATA")
    return (Path(env) if env else REPO_ROOT.parent / "shared" / "data").resolve()


# Under pytest-xdist (`-n 2`, as CI runs), each worker and every process it starts computes on one thread:
# two workers then share the two cores instead of four threads fighting over them.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    # and its threads sleep while they wait (given, the command line's choice reads no CPU load: 0.2 s saved
    # in every command the tests start; bioablate_core/threads.py)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Absolute for every process the tests start: several run the CLI from another working directory (pasted
# hints, servers), where CI's relative `../shared/data` would name nothing.
if os.environ.get("BIOABLATE_DATA"):
    os.environ["BIOABLATE_DATA"] = str(_data_dir())


# The tests' files in memory where there is room for them: every MLflow call is an SQLite transaction and
# every checkpoint and cache file is fsynced before its rename, and on this project's disks one commit
# waits ~8-18 ms for the disk (0.07 ms on tmpfs); the whole suite makes tens of thousands. What the tests
# check is the same on either filesystem (what survives a power cut is no test's subject). The suite writes
# ~8 GB, so only where /dev/shm has TMPFS_FREE free; removed at the end. `--basetemp DIR` (kept) or
# BIOABLATE_TEST_TMPFS=0 leaves them on disk.
TMPFS = Path("/dev/shm")
TMPFS_FREE = 16 * 2**30
_IN_MEMORY = pytest.StashKey[Path]()  # the folder this run made there


@pytest.hookimpl(tryfirst=True)  # before pytest's tmpdir plugin reads the option
def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist (3.x) reorders `--dist loadfile`'s files by how many tests each holds, most first, which
    # undid the longest-first order below (pytest_collection_modifyitems): the one-test files of 20-30 s (the
    # micro benchmark suite, the DDP runs) ran last on one worker while the other sat idle (46 s at the end)
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    if config.option.basetemp or os.environ.get("BIOABLATE_TEST_TMPFS") == "0" or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # given, declined, or an xdist worker (it gets a folder inside its controller's)
    if TMPFS.is_dir() and os.access(TMPFS, os.W_OK) and shutil.disk_usage(TMPFS).free >= TMPFS_FREE:
        config.option.basetemp = str(TMPFS / f"bioablate-tests-{os.getpid()}")
        config.stash[_IN_MEMORY] = Path(config.option.basetemp)


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_IN_MEMORY, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = _data_dir()
    assert (path / "MANIFEST.md").exists(), f"staged data not found at {path}; set BIOABLATE_DATA"
    return path


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The PostgreSQL server CI starts (an SQLAlchemy URL in BIOABLATE_TEST_POSTGRES)."""
    url = os.environ.get("BIOABLATE_TEST_POSTGRES")
    if not url:
        pytest.skip("BIOABLATE_TEST_POSTGRES is not set: this test needs a PostgreSQL server. Run the "
                    "tests through .ci/run (it installs PostgreSQL and starts it on 127.0.0.1), or start one "
                    "yourself and export BIOABLATE_TEST_POSTGRES=postgresql+psycopg2://user:password@"
                    "127.0.0.1:5432/db")
    return url


@pytest.fixture(scope="session")
def chromium() -> str:
    """A Chromium for the headless-browser tests (tests/browser.py): its path."""
    from tests.browser import find_chromium

    path = find_chromium()
    if path is None:
        pytest.skip("chromium is not installed: the headless-browser tests need it (Debian: apt-get install "
                    "chromium; .ci/run installs it)")
    return path


# the tests that take tens of seconds each: end-to-end runs, a real cluster, several processes, a browser
LONG_MARKERS = ("slow", "slurm", "ddp", "browser")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "data_dir" in names:
            item.add_marker(pytest.mark.needs_data)
        if "postgres_url" in names:
            item.add_marker(pytest.mark.postgres)
        if "chromium" in names:
            item.add_marker(pytest.mark.browser)
    # Longest files first (each file's tests in their order): CI's two workers (-n 2 --dist loadfile) take
    # whole files in this order, so the longest first balances them (a 13-minute file taken last left one
    # worker running it alone). By the seconds measured (tests/file_durations.json, written by
    # scripts/test_file_durations.py), then by how many long tests a file holds. Every worker sorts the same
    # items the same way.
    measured = json.loads((Path(__file__).parent / "file_durations.json").read_text())
    long_tests: dict[Path, int] = {}
    for item in items:
        long = any(item.get_closest_marker(marker) for marker in LONG_MARKERS)
        long_tests[item.path] = long_tests.get(item.path, 0) + long

    def longest_first(item: pytest.Item) -> tuple[int, int]:
        return -measured.get(item.path.relative_to(REPO_ROOT).as_posix(), 0), -long_tests[item.path]

    items.sort(key=longest_first)  # stable: the order within a file is kept


@pytest.fixture(autouse=True)
def _user_datasets_do_not_outlive_their_test():
    """A user dataset a test registers (from YAML, directly or through a run) is removed after it, so no
    test sees another's datasets in the process-wide registry."""
    from datamodules.registry import DATASETS

    before = set(DATASETS)
    yield
    for name in set(DATASETS) - before:
        DATASETS.unregister(name)

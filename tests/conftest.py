"""Shared fixtures. Tests read the real staged datasets: `BIOABLATE_DATA`, else `../shared/data` beside
the repository (where CI puts it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def _data_dir() -> Path:
    env = os.environ.get("BIOABLATE_DATA")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = _data_dir()
    assert (path / "MANIFEST.md").exists(), f"staged data not found at {path}; set BIOABLATE_DATA"
    return path

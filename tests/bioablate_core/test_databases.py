"""Passwords in URLs (bioablate_core/databases.py): masked where a URL is shown, left out of a command
printed to be pasted (where a masked `***` would be sent as the password)."""

from __future__ import annotations

import pytest

from bioablate_core.databases import hide_passwords, leave_out_passwords

CASES = [  # (text, masked, left out)
    ("--storage postgresql+psycopg2://alice:s3cr%40t@db:5432/optuna --work-dir w",
     "--storage postgresql+psycopg2://alice:***@db:5432/optuna --work-dir w",
     "--storage postgresql+psycopg2://alice@db:5432/optuna --work-dir w"),
    ("--tracking-uri http://bob:pw@127.0.0.1:5000/ --storage sqlite:////tmp/optuna.db",
     "--tracking-uri http://bob:***@127.0.0.1:5000/ --storage sqlite:////tmp/optuna.db",
     "--tracking-uri http://bob@127.0.0.1:5000/ --storage sqlite:////tmp/optuna.db"),
    ("postgresql://carol@db/x (no password)", "postgresql://carol@db/x (no password)",
     "postgresql://carol@db/x (no password)"),
]


@pytest.mark.parametrize("text, masked, left_out", CASES)
def test_a_password_is_masked_where_shown_and_left_out_of_a_command(text, masked, left_out):
    assert hide_passwords(text) == masked
    assert leave_out_passwords(text) == left_out

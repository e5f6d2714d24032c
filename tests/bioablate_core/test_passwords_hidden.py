"""Issue 69 item 3: no URL shown on screen or in an error shows its password, whether it is written
`user:secret@host` or as a `?password=` query value (bioablate_core/databases.py `hide_passwords`, and the
CLI's output, which goes through it whoever printed the line)."""

from __future__ import annotations

import io
import logging
import socket

import pytest

from bioablate_core.databases import HidingPasswords, hide_passwords, leave_out_passwords, redact
from tests.cli import bioablate_in_process


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("uri", [
    "http://u:secret@127.0.0.1:{port}",
    "postgresql://u@127.0.0.1:{port}/db?password=secret",
    "postgresql://u:secret@127.0.0.1:{port}/db?sslmode=disable&password=secret",
])
def test_table_against_a_store_nothing_answers_never_shows_the_password(tmp_path, data_dir, uri):
    out = bioablate_in_process("table", "quickstart", "--data-dir", str(data_dir), "--work-dir", str(tmp_path / "w"),
                               "--tracking-uri", uri.format(port=free_port()), cwd=tmp_path)
    assert out.returncode != 0 and "127.0.0.1" in out.stderr  # the error names the store...
    assert "secret" not in out.stdout + out.stderr  # ...without its password


@pytest.mark.parametrize("text,hidden,left_out", [
    ("postgresql://u@h:5432/db?password=secret2", "postgresql://u@h:5432/db?password=***",
     "postgresql://u@h:5432/db"),
    ("postgresql://u:pw@h/db?sslmode=require&password=secret2&application_name=x",
     "postgresql://u:***@h/db?sslmode=require&password=***&application_name=x",
     "postgresql://u@h/db?sslmode=require&application_name=x"),
    ("in postgresql://h/db?PASSWORD=secret2 (then)", "in postgresql://h/db?PASSWORD=*** (then)",
     "in postgresql://h/db (then)"),
    ("http://u:secret@127.0.0.1:5055/", "http://u:***@127.0.0.1:5055/", "http://u@127.0.0.1:5055/"),
    ("sqlite:////tmp/mlruns.db", "sqlite:////tmp/mlruns.db", "sqlite:////tmp/mlruns.db"),
])
def test_both_forms_of_a_password_are_hidden(text, hidden, left_out):
    assert hide_passwords(text) == hidden and leave_out_passwords(text) == left_out


def test_a_database_urls_shown_form_hides_a_query_password():
    assert "secret2" not in redact("postgresql+psycopg2://u@h/db?password=secret2")


def test_what_a_library_prints_or_logs_through_the_cli_stream_is_hidden():
    sink = io.StringIO()
    stream = HidingPasswords(sink)
    print("connecting to http://u:secret@host:5000", file=stream)
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("tests.passwords")
    logger.addHandler(handler)
    try:
        logger.warning("retrying postgresql://h/db?password=secret2")
    finally:
        logger.removeHandler(handler)
    assert "secret" not in sink.getvalue() and sink.getvalue().count("***") == 2
    assert stream.getvalue() == sink.getvalue()  # the stream's own attributes pass through

"""`bioablate ARGS` run in the test's process, as a shell would run it from a directory.

A process of its own would add ~10 s of imports (Lightning, MLflow, transformers) and nothing the test
looks at: the command's work (runs, sbatch jobs, servers it talks to) is the same either way. What the
command changes in the process for its own sake is put back afterwards: the working directory, the
environment (its quieting sets library log variables), the libraries' log levels and the warning filters.
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from ablations.cli import main
from bioablate_core.console import NOISY_LIBRARIES, QUIET_ENVIRONMENT, RERAISED_ERROR_LOGGERS


def bioablate_in_process(*args: str, cwd: Path, unset: tuple[str, ...] = (),
                         env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the CLI's entry point on `args` from `cwd`, with the variables in `unset` removed and those in
    `env` set for the call; returns what `subprocess.run(..., capture_output=True, text=True)` would.
    The variables the CLI's quieting sets are removed too, as in a fresh shell: another command run in
    this process may have left them (the CLI sets them only where the user has not)."""
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    levels = {name: logging.getLogger(name).level for name in (*NOISY_LIBRARIES, *RERAISED_ERROR_LOGGERS)}
    out, err = io.StringIO(), io.StringIO()
    try:
        for name in (*QUIET_ENVIRONMENT, *unset):
            os.environ.pop(name, None)
        os.environ.update(env or {})
        os.chdir(cwd)
        with warnings.catch_warnings(), redirect_stdout(out), redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    return subprocess.CompletedProcess(["bioablate", *args], code, out.getvalue(), err.getvalue())


def stop_group(process: subprocess.Popen) -> None:
    """End a server started in a process group of its own (`start_new_session=True`): SIGTERM to the
    group, SIGKILL after 30 s."""
    import signal

    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()

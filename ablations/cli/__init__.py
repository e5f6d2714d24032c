"""The `bioablate` command line: `bioablate --help`, and `bioablate COMMAND --help` for each command,
whose page ends with examples (ablations/cli/help.py; tests/ablations/cli/test_cli.py parses each of them).
This module holds `main` and the one-line error handling; parser.py builds the argument parser; the
commands are in runs.py (finetune, pretrain, run, status, table), data.py (data, vocab, list), sweep.py,
serve.py (ui, server, export, predict) and predictions.py (predictions). Each command parses nothing itself
and calls the study layer's front door (ablations/api/), as the benchmarks and the notebook do, and imports
nothing else of the project but `bioablate_core` (tests/bioablate_core/test_layering.py).

User mistakes (`BioablateError`) print one line and exit 2; a run that fails exits 1 after marking its
MLflow run FAILED. SIGINT (Ctrl-C) and SIGTERM mark the run KILLED and exit 130 and 143 (128 + the
signal, `bioablate_core.interrupts`); `bioablate run` stops at the first one. A run another live process is working
on is waited for (one "waiting for ..." line), then reused; with `--no-wait` the command prints who holds
it and exits 75 (EX_TEMPFAIL: try again later).
"""

from __future__ import annotations

import errno
import os
import sys

from ablations.cli.data import cmd_data_fetch, cmd_data_stats, cmd_list, cmd_vocab_compare, cmd_vocab_train
from ablations.cli.help import announce
from ablations.cli.parser import build_parser
from ablations.cli.predictions import cmd_predictions
from ablations.cli.runs import cmd_finetune, cmd_import, cmd_pretrain, cmd_run, cmd_status, cmd_table
from ablations.cli.serve import cmd_export, cmd_predict, cmd_server, cmd_ui
from ablations.cli.sweep import cmd_sweep
from bioablate_core import threads
from bioablate_core.claims import EXIT_CLAIM_HELD, ClaimHeld
from bioablate_core.console import configure_logging, quiet_libraries
from bioablate_core.databases import HidingPasswords, hide_passwords
from bioablate_core.errors import BioablateError
from bioablate_core.interrupts import Interrupted, handling_interrupts
from bioablate_core.limits import readable

EXIT_USER_ERROR = 2
EXIT_RUN_FAILED = 1
EXIT_CLOSED_PIPE = 128 + 13  # SIGPIPE's: what a shell reports for a command whose reader went away
# OSErrors that are the machine's state rather than a bug: one line, no traceback
ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM,
                      errno.ENOTDIR, errno.EISDIR}  # (the last two: a file where a folder belongs, or the reverse)


# What a command says it is loading, at once (on a terminal), before the imports that take seconds
LOADING = {
    "finetune": lambda a: f"{a.task or ' '.join(a.config)} and {a.model or f'the {a.profile} profile model'}",
    "pretrain": lambda a: f"corpus {a.corpus or f'of the {a.profile} profile'} for pretraining",
    "run": lambda a: f"experiment {a.experiment}",
    "table": lambda a: f"experiment {a.experiment} and its runs" if a.experiment else f"the bundle in {a.from_dir}",
    "sweep": lambda a: f"sweep {' '.join([a.target, *a.rest[:1]])}"}
QUICK = ("list",)  # commands that import neither Lightning nor MLflow: nothing to quiet, nothing to wait for
# commands that compute with torch: their threads and OpenMP wait policy are chosen before torch loads
COMPUTING = ("finetune", "pretrain", "run", "sweep")

COMMANDS = {"finetune": cmd_finetune, "list": cmd_list, ("data", "stats"): cmd_data_stats,
            ("data", "fetch"): cmd_data_fetch,
            "pretrain": cmd_pretrain, ("vocab", "train"): cmd_vocab_train,
            ("vocab", "compare"): cmd_vocab_compare,
            "sweep": cmd_sweep, "ui": cmd_ui, "table": cmd_table, "run": cmd_run, "status": cmd_status,
            "server": cmd_server, "export": cmd_export, "predict": cmd_predict, "import": cmd_import,
            "predictions": cmd_predictions}


def main(argv: list[str] | None = None) -> int:
    """Run a command; whatever it (or a library under it) prints hides URLs' passwords."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = HidingPasswords(sys.stdout), HidingPasswords(sys.stderr)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = saved


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # argparse gives a command's trailing positionals (`run EXP --profile micro key=value`) only the
    # arguments before the first option: overrides written after options are overrides too
    trailing = "overrides" if hasattr(args, "overrides") else "rest" if hasattr(args, "rest") else None
    if extra and trailing and all("=" in e and not e.startswith("-") for e in extra):
        setattr(args, trailing, [*getattr(args, trailing), *extra])
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    configure_logging(args.verbose)
    group = getattr(args, f"{args.command}_command", None)  # `data stats`, `vocab train`: a subcommand
    key = (args.command, group) if group else args.command
    if key in LOADING:
        announce(LOADING[key](args))
    if not args.verbose and key not in QUICK:
        quiet_libraries()
    try:
        if key in COMPUTING and "torch" not in sys.modules:  # (imported already: main called in a test process)
            threads.configure()
        with handling_interrupts():
            code = COMMANDS[key](args)
            sys.stdout.flush()  # here, where a reader that went away (`| head`) is caught, not at exit
            return code
    except BrokenPipeError:  # the reader closed the pipe early: as a killed `cat` would, quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        return EXIT_CLOSED_PIPE
    except BioablateError as error:
        print(f"bioablate: error: {readable(hide_passwords(str(error)))}", file=sys.stderr)  # a URI it names
        return EXIT_USER_ERROR
    except ClaimHeld as held:
        print(f"bioablate: {held}", file=sys.stderr)
        return EXIT_CLAIM_HELD
    except Interrupted as stop:
        print(f"bioablate: interrupted ({stop})", file=sys.stderr)
        return stop.exit_code
    except OSError as error:  # the machine's state, not a bug: a started run is FAILED with this reason
        if error.errno not in ENVIRONMENT_ERRNOS:
            raise
        if error.filename:
            print(f"bioablate: error: {error.filename}: {error.strerror or error}", file=sys.stderr)
        else:  # written through a file object (no name on the error): where the command writes
            out = getattr(args, "out", None)
            work = getattr(args, "work_dir", None) or os.environ.get("BIOABLATE_WORK") or "outputs"
            where = f"--out {os.path.abspath(out)}" if out else \
                f"work directory {os.path.abspath(os.path.expanduser(work))}"
            print(f"bioablate: error: {error.strerror or error} while writing ({where}); free space there or "
                  "write elsewhere", file=sys.stderr)
        return EXIT_RUN_FAILED
    except KeyboardInterrupt:  # before the handlers were installed
        print("bioablate: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # the tracking store failing under a run is the machine's state, not a bug
        if key in QUICK:
            raise
        from omegaconf.errors import InterpolationResolutionError

        if isinstance(error, InterpolationResolutionError):  # `key=${...}` naming no key: a user's mistake
            key = getattr(error, "full_key", None)
            print(f"bioablate: error: {key + ': ' if key else ''}{str(error).splitlines()[0]}", file=sys.stderr)
            return EXIT_USER_ERROR
        from ablations import api

        reason = api.store_failure(error)
        if reason is None:
            raise
        print(f"bioablate: error: {reason}", file=sys.stderr)
        return EXIT_RUN_FAILED


"""The help side of the `bioablate` command line (ablations/cli/): the examples that end every help
page, each command's description, `--version`, the line that says what is being loaded, and the options
several commands share (parser.py and predictions.py add them).

Light on purpose: `bioablate --help` imports only this and argparse.
"""

from __future__ import annotations

import argparse
import sys


def examples(*commands: str) -> dict:
    """`add_parser` keywords that end a help page with an Example section of real commands."""
    return {"epilog": "Examples:\n" + "\n".join(f"  {command}" for command in commands),
            "formatter_class": argparse.RawDescriptionHelpFormatter}


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", help="folder with the staged datasets (default: $BIOABLATE_DATA)")


def add_store_options(parser: argparse.ArgumentParser, work_dir_help: str = "outputs, checkpoints, caches") -> None:
    """Where runs go: the work directory and the MLflow store (by default inside it)."""
    parser.add_argument("--work-dir", help=f"{work_dir_help} (default: $BIOABLATE_WORK or ./outputs)")
    parser.add_argument("--tracking-uri", help="MLflow tracking URI (default: sqlite:///<work-dir>/mlruns.db)")


def add_datasets(parser: argparse.ArgumentParser, what: str = "") -> None:
    """`--datasets YAML`, as `finetune` takes it: user datasets registered first; `what` says what for."""
    parser.add_argument("--datasets", action="append", metavar="YAML",
                        help=f"register a user dataset from YAML (repeatable{what}; docs/custom-datasets.md)")


def announce(what: str) -> None:
    """Say at once what is being loaded (the imports and loading take seconds before any other output);
    on a terminal only, so piped output and scripts see just the results."""
    if sys.stderr.isatty():
        print(f"bioablate: loading {what} ...", file=sys.stderr, flush=True)


class VersionAction(argparse.Action):
    """`--version`, computed only when asked (it reads package metadata and may ask git)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version (and the git commit, in a checkout) and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from ablations import api

        print(api.version())
        parser.exit()


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parsers of `parser`'s subcommands by name (argparse keeps them in its subparsers action)."""
    return {name: child for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name, child in action.choices.items()}


def describe_commands(parser: argparse.ArgumentParser) -> None:
    """Each command's help page opens with the line `bioablate --help` lists it with."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for listed in action._choices_actions:
                child = action.choices[listed.dest]
                child.description = child.description or listed.help
                describe_commands(child)

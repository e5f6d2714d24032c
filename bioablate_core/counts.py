"""A count a user gives (seeds, folds, sequence lengths) checked against its bounds before anything is built
from it (`seeds: 1000000000` would build a billion-element list), in one line naming the key and the range.

    n = check_count(value, "seeds", most=MAX_SEEDS)          # ConfigError naming `seeds`
    parser.add_argument("--rounds", type=count_argument(1, 1000))   # argparse: one usage line
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

from bioablate_core.errors import ConfigError

MAX_SEEDS = 1000  # seeds per cell: the papers use 5 to 10; a thousand is a typo, not a study
MAX_FOLDS = 10_000  # cross-validation folds (leave-one-out over a small dataset still fits)
MAX_TRIALS = 100_000  # a sweep's trials: each is a fine-tuning run (or one per seed)


def count_problem(value: Any, least: int, most: int) -> str | None:
    """Why `value` is not a whole number from `least` to `most`, or None; a huge number is never formatted."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"expected a whole number from {least:,} to {most:,}, got {value!r}"[:200]
    if value < least:
        return f"{value:,} is below the least, {least:,}" if value > -10**30 else f"below the least, {least:,}"
    if value > most:
        shown = f"{value:,}" if value < 10**30 else "a number far"
        return f"{shown} is above the most this accepts, {most:,}"
    return None


def check_count(value: Any, where: str, *, least: int = 1, most: int, fix: str = "") -> int:
    """`value` as an int from `least` to `most`, or a ConfigError `"<where>: <problem>[; <fix>]"`."""
    problem = count_problem(value, least, most)
    if problem is not None:
        raise ConfigError(f"{where}: {problem}{f'; {fix}' if fix else ''}")
    return int(value)


def count_argument(least: int, most: int) -> Callable[[str], int]:
    """An argparse `type` for a bounded count: a bad one is argparse's one usage line and exit 2."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number from {least:,} to {most:,}, "
                                             f"got {text!r}") from None
        problem = count_problem(value, least, most)
        if problem is not None:
            raise argparse.ArgumentTypeError(problem)
        return value

    parse.__name__ = "count"
    return parse

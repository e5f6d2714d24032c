"""The `bioablate` commands about the staged data: `data stats`, `data fetch`, `vocab train`, `vocab compare`
and `list` (ablations/cli/ parses their arguments; ablations/api/data.py and catalog.py do the work).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ablations import api
from bioablate_core.limits import check_vocab_size


def cmd_data_stats(args: argparse.Namespace) -> int:
    print(api.data_stats(args.data_dir, args.task or (), args.tagging, args.datasets or ()))
    return 0


def cmd_data_fetch(args: argparse.Namespace) -> int:
    """Stats go to stdout, progress and the summary to stderr: stdout equals `data stats` of the folder."""
    summary, stats = api.fetch_data(Path(args.to) if args.to else None, args.only, args.mirror, args.jobs,
                                    show_progress=sys.stderr.isatty())
    print(summary, file=sys.stderr)
    if stats is not None:
        print(stats)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    print("\n".join(api.listing(args.what, args.profile)))
    return 0


def cmd_vocab_train(args: argparse.Namespace) -> int:
    check_vocab_size(args.size, f"--size {args.size}", "--size 30522", "option --size")
    print(api.train_vocab(Path(args.out), args.corpus, args.size, args.cased, args.max_words, args.min_words,
                          args.data_dir))
    return 0


def cmd_vocab_compare(args: argparse.Namespace) -> int:
    print(api.compare_vocabs(args.vocab or (), args.general, args.domain, args.task or (), not args.no_table8,
                             args.format, args.data_dir), end="")
    return 0

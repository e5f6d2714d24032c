"""The `bioablate` commands about the staged data: `data stats`, `data fetch`, `vocab train`, `vocab compare`
and `list` (ablations/cli/ parses their arguments).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_data_stats(args: argparse.Namespace) -> int:
    from ablations.places import resolve_data_dir
    from datamodules.registry import dataset_names, get_dataset

    data_dir = resolve_data_dir(args.data_dir)
    names = args.task or dataset_names()
    for name in names:
        get_dataset(name)  # an unknown name fails before any reading
    _print_stats(data_dir, names, args.tagging)
    return 0


def _print_stats(data_dir: Path, names: list[str], tagging: str | None) -> None:
    from datamodules.registry import check_data_dir, get_dataset
    from datamodules.stats import dataset_stats, render

    check_data_dir(data_dir, names)
    rows, notes = [], {}
    for name in names:
        spec = get_dataset(name)
        rows += dataset_stats(spec, data_dir, tagging)
        notes[name] = spec.notes
    print(render(rows, notes))


def cmd_data_fetch(args: argparse.Namespace) -> int:
    """Stats go to stdout, progress and the summary to stderr: stdout equals `data stats` of the folder."""
    from datamodules.fetch import fetch_data, summary

    result = fetch_data(Path(args.to) if args.to else None, args.only, args.mirror, args.jobs,
                        show_progress=sys.stderr.isatty())
    print(summary(result), file=sys.stderr)
    from datamodules.fetch.manifest import load_manifest, select
    from datamodules.registry import dataset_names, get_dataset

    # every dataset built from the fetched files, in `data stats` order (one group may make several:
    # BioASQ's golden files are bioasq-4b/5b/6b-factoid's too; vocabularies make none)
    fetched = {entry.dest for source in select(load_manifest(), result.groups) for entry in source.files}
    names = [name for name in dataset_names() if get_dataset(name).root is None and any(
        path == f or path.startswith(f.rstrip("/") + "/") for f in get_dataset(name).files for path in fetched)]
    if names:
        _print_stats(result.data_dir, names, None)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from ablations.cli.catalog import listing

    print("\n".join(listing(args.what, args.profile)))
    return 0


def cmd_vocab_train(args: argparse.Namespace) -> int:
    from ablations.config import PretrainConfig
    from ablations.places import resolve_data_dir
    from core.files import writable_dir
    from core.schema import check_ranges
    from datamodules.pretrain.corpora import evaluation_pmids, load_corpus
    from datamodules.pretrain.vocab import check_vocab_size, train_wordpiece

    check_vocab_size(args.size, "--size")  # before reading any corpus
    check_ranges("--max-words/--min-words", PretrainConfig, vars(args), "pretrain.")  # keys as pretrain's
    writable_dir(Path(args.out), "--out")
    data_dir = resolve_data_dir(args.data_dir)
    corpus = load_corpus(args.corpus, data_dir, max_words=args.max_words, min_words=args.min_words,
                         exclude_pmids=evaluation_pmids(data_dir))
    path = train_wordpiece(corpus.sentences(), args.size, not args.cased, Path(args.out))  # one streamed pass
    print(f"{path}: {sum(1 for _ in open(path, encoding='utf-8'))} entries from {corpus.stats.words} words "
          f"of {args.corpus}")
    return 0


def cmd_vocab_compare(args: argparse.Namespace) -> int:
    from ablations.places import resolve_data_dir
    from ablations.tables import FORMATS, render_grid, table1_grid, table8_grid
    from ablations.tables.vocab_compare import table1, table8
    from core.errors import UnknownNameError
    from datamodules.registry import dataset_names, get_dataset

    if args.format not in FORMATS:  # before computing anything
        raise UnknownNameError("table format", args.format, FORMATS)
    data_dir = resolve_data_dir(args.data_dir)
    vocabs = args.vocab or ["bert-base-uncased", "scibert-scivocab-uncased", "pubmedbert-uncased"]
    print(render_grid(table1_grid(table1(vocabs, data_dir)), args.format), end="")
    if not args.no_table8:
        names = args.task or dataset_names()
        for name in names:
            get_dataset(name)
        print()
        print(render_grid(table8_grid(table8(args.general, args.domain, data_dir, names), args.general, args.domain),
                          args.format), end="")
    return 0

"""The staged data and vocabularies, for `bioablate data` and `bioablate vocab` (ablations/api/ re-exports
these): what each returns is the text the command prints. Heavy imports stay inside the functions."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

DEFAULT_VOCABS = ("bert-base-uncased", "scibert-scivocab-uncased", "pubmedbert-uncased")  # Table 1's three


def data_stats(data_dir: Optional[str] = None, tasks: Sequence[str] = (), tagging: Optional[str] = None,
               datasets: Sequence[str] = ()) -> str:
    """Counts per dataset and split beside the paper's (every registered dataset unless `tasks`); an
    unknown name fails before any reading. `datasets`: user datasets' YAML files, registered and counted
    (without `tasks`: only they)."""
    from ablations.places import resolve_data_dir
    from datamodules.custom import register_from_yaml
    from datamodules.registry import dataset_names, get_dataset

    users = [register_from_yaml(path).name for path in datasets]
    names = list(tasks) or users or dataset_names()
    if users and not tasks:  # a user dataset names its own files: no staged folder needed
        return _stats(Path(data_dir or "."), names, tagging)
    for name in names:
        get_dataset(name)
    return _stats(resolve_data_dir(data_dir), names, tagging)


def _stats(data_dir: Path, names: list[str], tagging: Optional[str]) -> str:
    from datamodules.registry import check_data_dir, get_dataset
    from datamodules.stats import dataset_stats, render

    check_data_dir(data_dir, names)
    rows, notes = [], {}
    for name in names:
        spec = get_dataset(name)
        rows += dataset_stats(spec, data_dir, tagging)
        notes[name] = spec.notes
    return render(rows, notes)


def fetch_data(to: Optional[Path] = None, only: Optional[Sequence[str]] = None, mirror: Optional[str] = None,
               jobs: int = 8, show_progress: bool = False) -> tuple[str, Optional[str]]:
    """Download the datasets and vocabularies (`only`: these groups) from their pinned origins and verify
    them. Returns the summary and the `data stats` of every dataset built from the fetched files (None:
    none was, as for vocabularies alone)."""
    from datamodules.fetch import fetch_data as fetch
    from datamodules.fetch import summary
    from datamodules.fetch.manifest import load_manifest, select
    from datamodules.registry import dataset_names, get_dataset

    result = fetch(Path(to) if to else None, only, mirror, jobs, show_progress=show_progress)
    # every dataset built from the fetched files, in `data stats` order (one group may make several:
    # BioASQ's golden files are bioasq-4b/5b/6b-factoid's too; vocabularies make none)
    fetched = {entry.dest for source in select(load_manifest(), result.groups) for entry in source.files}
    names = [name for name in dataset_names() if get_dataset(name).root is None and any(
        path == f or path.startswith(f.rstrip("/") + "/") for f in get_dataset(name).files for path in fetched)]
    return summary(result), (_stats(result.data_dir, names, None) if names else None)


def train_vocab(out: Path, corpus: str = "pubmed", size: int = 30000, cased: bool = False,
                max_words: Optional[int] = None, min_words: int = 128, data_dir: Optional[str] = None) -> str:
    """A WordPiece vocabulary trained on `corpus` in one streamed pass, written to `out`/vocab.txt; returns
    what was written. The size, word limits and folder are checked before any corpus is read."""
    from ablations.config import PretrainConfig
    from ablations.places import resolve_data_dir
    from bioablate_core.files import writable_dir
    from bioablate_core.schema import check_ranges
    from datamodules.pretrain.corpora import evaluation_pmids, load_corpus
    from datamodules.pretrain.vocab import check_vocab_size, train_wordpiece

    check_vocab_size(size, "--size")
    check_ranges("--max-words/--min-words", PretrainConfig, {"max_words": max_words, "min_words": min_words},
                 "pretrain.")  # keys as pretrain's
    writable_dir(Path(out), "--out")
    data = resolve_data_dir(data_dir)
    words = load_corpus(corpus, data, max_words=max_words, min_words=min_words, exclude_pmids=evaluation_pmids(data))
    path = train_wordpiece(words.sentences(), size, not cased, Path(out))
    return (f"{path}: {sum(1 for _ in open(path, encoding='utf-8'))} entries from {words.stats.words} words "
            f"of {corpus}")


def compare_vocabs(vocabs: Sequence[str] = (), general: str = "bert-base-uncased", domain: str = "pubmedbert-uncased",
                   tasks: Sequence[str] = (), table8: bool = True, fmt: str = "markdown",
                   data_dir: Optional[str] = None) -> str:
    """The paper's Table 1 (how `vocabs` split biomedical terms) and, with `table8`, Table 8 (input lengths
    under the `general` and `domain` vocabularies on `tasks`, default all), in `fmt`."""
    from ablations.places import resolve_data_dir
    from ablations.tables import FORMATS, render_grid, table1_grid, table8_grid
    from ablations.tables.vocab_compare import table1
    from ablations.tables.vocab_compare import table8 as lengths
    from bioablate_core.errors import UnknownNameError
    from datamodules.registry import dataset_names, get_dataset

    if fmt not in FORMATS:  # before computing anything
        raise UnknownNameError("table format", fmt, FORMATS)
    data = resolve_data_dir(data_dir)
    text = render_grid(table1_grid(table1(list(vocabs) or list(DEFAULT_VOCABS), data)), fmt)
    if table8:
        names = list(tasks) or dataset_names()
        for name in names:
            get_dataset(name)
        text += "\n" + render_grid(table8_grid(lengths(general, domain, data, names), general, domain), fmt)
    return text

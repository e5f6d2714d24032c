"""Pretraining corpora: defined in YAML, streamed document by document, filtered in bounded memory.

The YAML format is in docs/pretraining.md; the built-in corpora are `experiments/corpora/*.yaml`.
`pretrain.corpus` is an expression over names or YAML paths: ``+`` mixes corpora (``pubmed+pmc``,
interleaved so each has given about as many words), ``>`` trains stages in order (``general>pubmed``).
A `Corpus` streams: each pass reads the files again, holding one document plus the de-duplication hashes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import random
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from bioablate_core.errors import BioablateError, ConfigError
from bioablate_core.files import user_cache_dir, write_text_atomic
from bioablate_core.fingerprints import hash_files
from datamodules.pretrain.corpus_specs import (  # noqa: F401
    CORPORA,
    CorpusSpec,
    Part,
    corpus_names,
    parse_corpus,
    read_corpus_yaml,
    resolve_corpus,
    spec_files,
)
from datamodules.pretrain.formats import (
    FORMATS,
    READ_ERRORS,
    Document,
    archive_members,
    is_archive,
    read_documents,
    unreadable,
)
from datamodules.textfiles import read_text_lines

log = logging.getLogger("bioablate")
PRETRAIN_DIR = "pretrain"

__all__ = ["Document", "Corpus", "CorpusSpec", "CorpusStats", "CORPORA", "corpus_names", "load_corpus",
           "parse_corpus", "read_corpus_yaml", "resolve_corpus", "corpus_fingerprint", "evaluation_pmids",
           "split_sentences"]


# Bump when what this module, formats.py or corpus_specs.py yield changes. It stands in the fingerprint for
# their bytes, so tidying them keeps stored runs; tests/datamodules/pretrain/test_corpus_contents.py pins
# the output, so a change without a bump fails there.
CORPUS_CODE_VERSION = 1


def files_fingerprint(paths, seed: bytes = b"") -> str:
    """Content hash of the given files, `seed` and the corpus code's version."""
    return hash_files(paths, seed=f"corpus-code:{CORPUS_CODE_VERSION}|".encode() + seed)


def corpus_fingerprint(name: str, data_dir: Path) -> str:
    """Hash of the expression's corpus definitions, their files' contents and the corpus code's version."""
    paths, definitions = [], []
    for stage in parse_corpus(name):
        for ref in stage:
            spec = resolve_corpus(ref)
            definitions.append(repr((spec.name, spec.parts, dataclasses.astuple(spec.filters))))
            paths += [p for p, _ in spec_files(spec, data_dir)]
    return files_fingerprint(paths, "\n".join(definitions).encode())


# ------------------------------------------------------------------------------------------ filters

_PMID_ID = re.compile(r"^(\d{7,9})(?:[.\-]|$)")


def evaluation_pmids(data_dir: Path) -> frozenset[str]:
    """PMIDs of every BLURB document where the staged data carry them (user datasets excluded: they are not
    in a pretraining run's fingerprint). Parsing all thirteen datasets is slow, so the set is cached in
    memory and in the user cache folder, keyed by the datasets' content fingerprints."""
    from datamodules.blurb import BLURB_DATASETS

    present = [spec for spec in BLURB_DATASETS if not spec.missing_files(data_dir)]
    bc5 = Path(data_dir) / PRETRAIN_DIR / "pubmed-abstracts" / "bc5cdr_pmids.derived.txt"
    key = hash_files([bc5] if bc5.is_file() else [],
                     seed=(f"corpus-code:{CORPUS_CODE_VERSION}|"
                           + " ".join(f"{spec.name}:{spec.fingerprint(data_dir)}" for spec in present)).encode())
    pmids = _PMIDS.get(key)
    if pmids is not None:
        return pmids
    cached = user_cache_dir() / "evaluation-pmids" / f"{key}.txt"
    if cached.is_file():
        pmids = frozenset(cached.read_text().split())
    else:
        pmids = _parse_pmids(present, data_dir, bc5)
        try:  # written whole, then renamed: never read half-written
            write_text_atomic(cached, "".join(p + "\n" for p in sorted(pmids)))
        except OSError as error:
            log.debug("evaluation PMIDs not cached in %s: %s", cached, error)
    _PMIDS[key] = pmids
    return pmids


_PMIDS: dict[str, frozenset[str]] = {}  # content key -> PMIDs, for this process


def _parse_pmids(specs: list, data_dir: Path, bc5: Path) -> frozenset[str]:
    """The PMIDs in the instance ids of `specs`' datasets, plus the derived BC5CDR list."""
    ids = (instance.id for spec in specs for split in spec.read(data_dir).values() for instance in split)
    found = {match.group(1) for match in map(_PMID_ID.match, ids) if match}
    if bc5.is_file():
        found |= {line.strip() for line in read_text_lines(bc5) if line.strip()}
    return frozenset(found)


_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_ABBREVIATION = re.compile(r"(?:[A-Z]|[A-Z][a-z]{0,2}|al|vs|et|i\.e|e\.g|approx|Fig|Figs|Eq|No|cf)\.")


def split_sentences(text: str) -> list[str]:
    """Paragraphs (lines), then sentence ends: '.', '!' or '?' followed by space and a capital/digit,
    not after a common abbreviation or a single capital (initials, 'E. coli' stays whole)."""
    sentences = []
    for paragraph in text.split("\n"):
        start = 0
        for match in _SENTENCE_END.finditer(paragraph):
            end = match.start()
            space = paragraph.rfind(" ", start, end)  # the word before the end (no copy of the sentence)
            before = paragraph[space + 1 if space >= 0 else start:end].lstrip("([\"'")
            if _ABBREVIATION.fullmatch(before):
                continue
            sentences.append(paragraph[start:end + 1].strip())
            start = match.end()
        tail = paragraph[start:].strip()
        if tail:
            sentences.append(tail)
    return [s for s in sentences if s]


def words_hash(words: list[str]) -> int:
    """64 bits of BLAKE2b over a document's lower-cased words (de-duplication up to case and whitespace)."""
    return int.from_bytes(hashlib.blake2b(" ".join(words).lower().encode(), digest_size=8).digest(), "little")


class SeenHashes:
    """Document hashes seen so far at 8 bytes each, not a Python set's ~70: every `fold_at` new hashes are
    sorted into a numpy run, and runs of similar size merged (a log-structured merge tree)."""

    def __init__(self, fold_at: int = 1 << 16):
        self.fold_at, self.recent, self.runs = fold_at, set(), []

    def add(self, h: int) -> bool:
        """True when `h` is new (and now recorded), False for a duplicate."""
        if h in self.recent:
            return False
        key = np.uint64(h)
        for run in self.runs:
            i = run.searchsorted(key)
            if i < len(run) and run[i] == key:
                return False
        self.recent.add(h)
        if len(self.recent) >= self.fold_at:
            run = np.fromiter(self.recent, dtype=np.uint64, count=len(self.recent))
            run.sort()
            self.recent = set()
            while self.runs and len(self.runs[-1]) <= 2 * len(run):
                run = np.sort(np.concatenate([self.runs.pop(), run]), kind="mergesort")
            self.runs.append(run)
        return True

    def __len__(self) -> int:
        return len(self.recent) + sum(len(r) for r in self.runs)


# ------------------------------------------------------------------------------------------ corpus

@dataclass
class CorpusStats:
    documents: int = 0
    words: int = 0
    dropped_short: int = 0
    dropped_duplicate: int = 0
    dropped_eval_pmid: int = 0
    by_part: dict[str, int] = field(default_factory=dict)  # documents kept per corpus name


Record = tuple  # (text, pmid or None, words, de-duplication hash) of one document


def _record(doc: Document) -> Record:
    words = doc.text.split()
    return doc.text, doc.pmid, len(words), words_hash(words)


def _records(files: Iterable[tuple[Path, Part]]) -> Iterator[Record]:
    for path, part in files:
        for doc in read_documents(path, part.format, part.text, part.pmid):
            yield _record(doc)


@dataclass
class _Failure:
    """A user error raised in a pool worker, carried back whole (its class and one-line message)."""

    kind: type
    message: str

    def error(self) -> BioablateError:
        error = self.kind.__new__(self.kind)
        Exception.__init__(error, self.message)
        return error


def file_records(path: Path, part: Part) -> list[Record] | _Failure:
    """One file's records, read in a pool worker (parsing is as costly as tokenizing for MEDLINE XML)."""
    try:
        return list(_records([(path, part)]))
    except BioablateError as e:
        return _Failure(type(e), str(e))


def member_records(path: Path, part: Part, members: list[tuple[str, bytes]]) -> list[Record] | _Failure:
    """The records of a batch of an archive's members, parsed in a pool worker."""
    read_member = FORMATS.get(part.format).read_member
    try:
        return [_record(read_member(path, name, data)) for name, data in members]
    except BioablateError as e:
        return _Failure(type(e), str(e))


ARCHIVE_BATCH_BYTES = 8 << 20  # members sent to a worker at a time: bounds memory, amortises the send


def _pool_tasks(files: list[tuple[Path, Part]]) -> Iterator[tuple]:
    """(function, args) for the pool in reading order: a file, or a batch of a tar archive's members."""
    for path, part in files:
        fmt = FORMATS.get(part.format)
        if not (is_archive(path) and fmt.read_member is not None):
            yield file_records, (path, part)
            continue
        batch, size = [], 0
        try:
            for name, data in archive_members(path, fmt.member_suffixes):
                batch.append((name, data))
                size += len(data)
                if size >= ARCHIVE_BATCH_BYTES:
                    yield member_records, (path, part, batch)
                    batch, size = [], 0
        except READ_ERRORS as e:
            raise unreadable(path, e) from None
        if batch:
            yield member_records, (path, part, batch)


def _pooled_records(pool, files: list[tuple[Path, Part]], ahead: int) -> Iterator[Record]:
    """Records of `files` in order, read by `pool`, at most `ahead` tasks in flight."""
    pending: deque = deque()
    tasks = _pool_tasks(files)
    while True:
        while len(pending) < ahead and (task := next(tasks, None)) is not None:
            pending.append(pool.apply_async(*task))
        if not pending:
            return
        result = pending.popleft().get()
        if isinstance(result, _Failure):
            raise result.error()
        yield from result


@dataclass
class _Reader:
    """One corpus of a stage: its records, its own filters and cap, and the words it has given."""

    spec: CorpusSpec
    records: Iterator[Record]
    min_words: int
    exclude: frozenset[str] | set[str] | None
    cap: int | None
    words: int = 0
    done: bool = False


class Corpus:
    """A corpus expression, streamed; `stats` holds the counts of the last complete pass (making one if none)."""

    def __init__(self, name: str, specs: list[list[CorpusSpec]], data_dir: Path | None, *, max_words: int | None,
                 min_words: int, dedup: bool, exclude_pmids, seed: int):
        self.name, self.specs, self.data_dir = name, specs, data_dir
        self.max_words, self.min_words, self.dedup, self.seed = max_words, min_words, dedup, seed
        self.exclude_pmids = exclude_pmids
        self._stats: CorpusStats | None = None
        self.files = [[spec_files(spec, data_dir) for spec in stage] for stage in specs]  # globs checked now

    @property
    def stats(self) -> CorpusStats:
        if self._stats is None:
            for _ in self.documents():
                pass
        return self._stats

    @property
    def stages(self) -> list["StageView"]:
        return [StageView(self, s) for s in range(len(self.specs))]

    def identity(self) -> dict:
        """A cheap key of what decides the documents, under which an interrupted shard build resumes."""
        files = [[[str(p), os.stat(p).st_size, os.stat(p).st_mtime_ns] for spec_list in stage for p, _ in spec_list]
                 for stage in self.files]
        return {"name": self.name, "definitions": [[repr((s.parts, dataclasses.astuple(s.filters))) for s in stage]
                                                   for stage in self.specs],
                "files": files, "max_words": self.max_words, "min_words": self.min_words, "dedup": self.dedup,
                "exclude_pmids": hashlib.sha256("\n".join(sorted(self.exclude_pmids or ())).encode()).hexdigest(),
                "seed": self.seed}

    def sentences(self) -> Iterator[str]:
        """Every sentence of the corpus, in one pass (what a vocabulary is trained on)."""
        for _, _, sentences in self.documents():
            yield from sentences

    def _reader(self, spec: CorpusSpec, files: list, cap: int | None, pool, ahead: int) -> _Reader:
        f = spec.filters
        exclude = self.exclude_pmids
        if f.exclude_eval_pmids and self.data_dir is not None:
            exclude = evaluation_pmids(Path(self.data_dir)) | (exclude or frozenset())
        if cap is not None:  # a capped corpus samples its files
            files = list(files)
            random.Random(self.seed).shuffle(files)
        # line formats cost less to read here than to send to a worker and back
        costly = all(FORMATS.get(part.format).costly for _, part in files)
        records = _pooled_records(pool, files, ahead) if pool is not None and costly else _records(files)
        own_cap = f.max_words if cap is None else min(cap, f.max_words or cap)
        return _Reader(spec, records, max(self.min_words, f.min_words, 1), exclude, own_cap)

    def documents(self, split: bool = True, pool=None, ahead: int = 2) -> Iterator[tuple[int, str, list[str] | str]]:
        """(stage, corpus name, sentences) of each kept document; with `split=False` an uncut document comes
        as its text, for the caller's workers to split. A `pool` parses XML files, same documents and order."""
        stats, seen = CorpusStats(), SeenHashes()
        cap = None if self.max_words is None else max(1, self.max_words // len(self.specs))
        for s, (stage_specs, stage_files) in enumerate(zip(self.specs, self.files)):
            readers = [self._reader(spec, files, cap, pool, ahead) for spec, files in zip(stage_specs, stage_files)]
            stage_words = 0
            while cap is None or stage_words < cap:
                live = [r for r in readers if not r.done]
                if not live:
                    break
                reader = min(live, key=lambda r: r.words)  # the corpus that has given the fewest words
                record = next(reader.records, None)
                if record is None:
                    reader.done = True
                    continue
                text, pmid, words, key = record
                if words < reader.min_words:
                    stats.dropped_short += 1
                    continue
                if reader.exclude and pmid in reader.exclude:
                    stats.dropped_eval_pmid += 1
                    continue
                if (self.dedup or reader.spec.filters.dedup) and not seen.add(key):
                    stats.dropped_duplicate += 1
                    continue
                limit = min(x for x in (cap and cap - stage_words, reader.cap and reader.cap - reader.words,
                                        words) if x is not None)
                if limit >= words:
                    body, n = split_sentences(text) if split else text, words
                else:
                    body, n = [], 0
                    for sentence in split_sentences(text):
                        if n >= limit:
                            break  # the document crossing a cap is cut at a sentence boundary
                        body.append(sentence)
                        n += len(sentence.split())
                reader.words += n
                stage_words += n
                if reader.cap is not None and reader.words >= reader.cap:
                    reader.done = True
                stats.documents += 1
                stats.words += n
                stats.by_part[reader.spec.name] = stats.by_part.get(reader.spec.name, 0) + 1
                yield s, reader.spec.name, body
        if stats.documents == 0:
            raise ConfigError(f"pretrain.corpus '{self.name}': no document is left after filtering "
                              f"(min_words={self.min_words}, max_words={self.max_words})")
        self._stats = stats


class StageView:
    """Stage `s` of a corpus, iterable (again and again) as documents of sentences."""

    def __init__(self, corpus: Corpus, stage: int):
        self.corpus, self.stage = corpus, stage

    def __iter__(self) -> Iterator[list[str]]:
        for s, _, sentences in self.corpus.documents():
            if s == self.stage:
                yield sentences
            elif s > self.stage:
                return


def load_corpus(name: str, data_dir: Path, *, max_words: int | None = None, min_words: int = 0,
                dedup: bool = True, exclude_pmids: frozenset[str] | set[str] | None = None, seed: int = 0) -> Corpus:
    """The corpus expression `name` under `data_dir`, ready to stream. The filters `min_words`, `dedup` and
    `exclude_pmids` add to each YAML's own (the stricter wins); `max_words` caps each stage at
    `max_words / stages` words, sampling files in `seed`'s order."""
    specs = [[resolve_corpus(ref) for ref in stage] for stage in parse_corpus(name)]
    return Corpus(name, specs, data_dir, max_words=max_words, min_words=min_words, dedup=dedup,
                  exclude_pmids=exclude_pmids, seed=seed)

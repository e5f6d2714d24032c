"""Tokenized, packed, memory-mapped pretraining sequences, and the deterministic batch plan over them.

`build_shards` packs each document's sentences into sequences of exactly `seq_len` slots:

- ``pairs="none"``: ``[CLS] sentences ... [SEP]``, as many whole sentences of one document as fit;
- ``pairs="nsp"``: ``[CLS] A [SEP] B [SEP]``; B follows A, or (50%, label 1) comes from another document
  of the same batch, as in BERT's create_pretraining_data and NVIDIA's LDDL;
- ``pairs="sop"``: two consecutive segments, swapped in 50% of sequences (label 1), ALBERT's SOP.

With ``packing`` (pairs ``none`` only) documents run on through full rows, several ``[CLS] ... [SEP]``
sequences to a row, cut between words; ``segments`` numbers them so attention stays within a sequence.
It departs from BERT's one sequence a row, so it is off by default.

A batch's sequences depend only on its documents, the seed and its number, and batches are appended in
order, so the shards are byte-identical whatever the number of workers, and a killed build resumes after
the last batch recorded in ``index.jsonl``. The fingerprint covers the corpus, vocabulary, settings and
this code. `BatchPlan` maps a global micro-batch number to sample indices from seeded permutations alone,
so a resumed run sees exactly the data of an uninterrupted one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import random
import shutil
import signal
import struct
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

from bioablate_core.claims import claim
from bioablate_core.errors import ConfigError
from bioablate_core.manifests import damage, manifest_of
from datamodules.pretrain.corpora import Corpus, split_sentences
from datamodules.pretrain.vocab import fast_tokenizer, file_hash, read_vocab

log = logging.getLogger("bioablate")

PAIR_MODES = ("none", "nsp", "sop")
ARRAYS = ("input_ids", "token_type_ids", "word_start", "lengths", "pair_labels", "stages")
PACKED_ARRAYS = (*ARRAYS, "segments")  # packed shards: which sequence of its row each token belongs to
MANIFEST = "manifest.json"  # the arrays' sizes, times and checksums (bioablate_core.manifests)


@dataclass
class Shards:
    path: Path
    input_ids: np.ndarray
    token_type_ids: np.ndarray
    word_start: np.ndarray
    lengths: np.ndarray
    pair_labels: np.ndarray
    stages: np.ndarray
    meta: dict
    segments: np.ndarray | None = None  # packed shards only (module doc)

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def stage_sizes(self) -> list[int]:
        return self.meta["stage_sizes"]


def shards_fingerprint(corpus_fp: str, vocab_path: Path, settings: dict) -> str:
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(corpus_fp.encode())
    h.update(Path(vocab_path).read_bytes())
    h.update(json.dumps(settings, sort_keys=True).encode())
    return h.hexdigest()[:16]


def array_names(packed: bool) -> tuple[str, ...]:
    return PACKED_ARRAYS if packed else ARRAYS


def load_shards(path: Path) -> Shards:
    meta = json.loads((path / "meta.json").read_text())
    arrays = {name: np.load(path / f"{name}.npy", mmap_mode="r") for name in array_names(meta.get("packed", False))}
    return Shards(path, meta=meta, **arrays)


def open_shards(path: Path) -> Shards | None:
    """The finished shards in `path`, or None. A set its manifest finds damaged is removed with a warning,
    so the caller rebuilds it instead of failing at every rerun."""
    try:
        json.loads((path / "meta.json").read_text())
        manifest = json.loads((path / MANIFEST).read_text()) if (path / MANIFEST).is_file() else None
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        problem = f"meta.json or {MANIFEST} is unreadable ({error})"
    else:
        problem = damage(path, manifest) if manifest is not None else None
        if problem is None:
            try:
                return load_shards(path)
            except (OSError, ValueError) as error:  # a set built before manifests: numpy's own size check
                problem = str(error)
    log.warning("the shard cache %s is damaged (%s): building it again", path, problem)
    shutil.rmtree(path, ignore_errors=True)
    return None


# ------------------------------------------------------------------------------------------ packing

def _pack_plain(doc: list[list[int]], body: int) -> list[list[int]]:
    """Whole sentences of one document per sequence; a sentence longer than a sequence is cut."""
    out, chunk = [], []
    for sentence in doc:
        for start in range(0, max(len(sentence), 1), body):
            piece = sentence[start:start + body]
            if len(chunk) + len(piece) > body and chunk:
                out.append(chunk)
                chunk = []
            chunk += piece
    if chunk:
        out.append(chunk)
    return out


def _pack_pairs(docs: list[list[list[int]]], d: int, body: int, mode: str, rng: random.Random):
    """BERT's create_instances_from_document: fill a chunk of sentences, split it into A and B."""
    doc = docs[d]
    out, chunk, n = [], [], 0
    for i, sentence in enumerate(doc):
        chunk.append(sentence[:body])
        n += len(chunk[-1])
        if i == len(doc) - 1 or n + len(doc[i + 1]) > body:
            if len(chunk) == 1:  # one (long) sentence: split it in the middle
                half = max(1, len(chunk[0]) // 2)
                chunk = [chunk[0][:half], chunk[0][half:]]
            cut = rng.randint(1, len(chunk) - 1)
            a, b = chunk[:cut], chunk[cut:]
            label = 0
            if mode == "nsp" and len(docs) > 1 and rng.random() < 0.5:
                other = d
                while other == d:
                    other = rng.randrange(len(docs))
                start = rng.randrange(max(1, len(docs[other])))
                b = docs[other][start:start + len(b) + 1] or [[]]
                label = 1
            elif mode == "sop" and rng.random() < 0.5:
                a, b, label = b, a, 1
            out.append(([t for s in a for t in s], [t for s in b for t in s], label))
            chunk, n = [], 0
    return out


MIN_PIECE = 16  # the fewest tokens of a document a row's leftover room takes: shorter pieces teach little


def run_on_rows(docs: list[list[int]], row_length: int, word_start: np.ndarray) -> list[list[list[int]]]:
    """`docs` (token lists) laid through rows of `row_length` slots as pieces to frame with [CLS] and [SEP]."""
    rows: list[list[list[int]]] = []
    row: list[list[int]] = []
    free = row_length
    for tokens in docs:
        start = 0
        while start < len(tokens):
            end = min(len(tokens), start + free - 2)
            while start < end < len(tokens) and not word_start[tokens[end]]:  # `end` opens the next piece
                end -= 1
            if row and end - start < min(MIN_PIECE, len(tokens) - start):  # too little room: a new row
                rows.append(row)
                row, free = [], row_length
                continue
            end = end if end > start else start + row_length - 2  # a word longer than a row is cut
            row.append(tokens[start:end])
            free -= end - start + 2
            start = end
    return rows + [row] if row else rows


class Packer:
    """Tokenizes and packs one batch of documents into the rows of every array."""

    def __init__(self, vocab_path: Path, lowercase: bool, seq_len: int, pairs: str, seed: int,
                 packing: bool = False):
        vocab = read_vocab(Path(vocab_path))
        index = {t: i for i, t in enumerate(vocab)}
        self.cls, self.sep, self.pad = index["[CLS]"], index["[SEP]"], index["[PAD]"]
        self.continuation = np.array([t.startswith("##") for t in vocab], dtype=bool)
        self.word_start = ~self.continuation
        self.tokenizer = fast_tokenizer(vocab_path, lowercase)
        self.seq_len, self.pairs, self.seed, self.packing = seq_len, pairs, seed, packing

    def __call__(self, batch: tuple[int, int, list[list[str] | str]]) -> dict[str, np.ndarray]:
        number, stage, docs = batch
        docs = [split_sentences(doc) if isinstance(doc, str) else doc for doc in docs]
        encodings = self.tokenizer.encode_batch([s for doc in docs for s in doc], add_special_tokens=False)
        ids = iter([e.ids for e in encodings])
        tokenized = [[next(ids) for _ in doc] for doc in docs]
        if self.packing:
            return self._packed_arrays([[t for sentence in doc for t in sentence] for doc in tokenized], stage)
        rng = random.Random(f"{self.seed}:{number}")  # a batch's randomness depends on nothing else
        rows: list[tuple[list[int], int]] = []  # ids, length of the type-0 part
        labels = []
        for d, doc in enumerate(tokenized):
            if self.pairs == "none":
                for chunk in _pack_plain(doc, self.seq_len - 2):
                    rows.append(([self.cls, *chunk, self.sep], self.seq_len))
                    labels.append(0)
                continue
            for a, b, label in _pack_pairs(tokenized, d, self.seq_len - 3, self.pairs, rng):
                while len(a) + len(b) > self.seq_len - 3:  # truncate the longer segment
                    (a if len(a) > len(b) else b).pop()
                rows.append(([self.cls, *a, self.sep, *b, self.sep], len(a) + 2))
                labels.append(label)
        n = len(rows)
        input_ids = np.full((n, self.seq_len), self.pad, dtype=np.int32)
        token_types = np.zeros((n, self.seq_len), dtype=np.uint8)
        lengths = np.empty(n, dtype=np.int32)
        for i, (row, first) in enumerate(rows):
            input_ids[i, :len(row)] = row
            token_types[i, first:len(row)] = 1
            lengths[i] = len(row)
        return {"input_ids": input_ids, "token_type_ids": token_types,
                "word_start": (~self.continuation[input_ids]).astype(np.uint8), "lengths": lengths,
                "pair_labels": np.array(labels, dtype=np.int8), "stages": np.full(n, stage, dtype=np.int8)}

    def _packed_arrays(self, docs: list[list[int]], stage: int) -> dict[str, np.ndarray]:
        """Documents (pairs ``none``: one token type, no pair label) run on through full rows."""
        rows = run_on_rows(docs, self.seq_len, self.word_start)
        n = len(rows)
        input_ids = np.full((n, self.seq_len), self.pad, dtype=np.int32)
        segments = np.zeros((n, self.seq_len), dtype=np.int16)
        lengths = np.empty(n, dtype=np.int32)
        for r, pieces in enumerate(rows):
            at = 0
            for number, piece in enumerate(pieces, start=1):
                input_ids[r, at:at + len(piece) + 2] = [self.cls, *piece, self.sep]
                segments[r, at:at + len(piece) + 2] = number
                at += len(piece) + 2
            lengths[r] = at
        return {"input_ids": input_ids, "token_type_ids": np.zeros((n, self.seq_len), dtype=np.uint8),
                "word_start": (~self.continuation[input_ids]).astype(np.uint8), "lengths": lengths,
                "pair_labels": np.zeros(n, dtype=np.int8), "stages": np.full(n, stage, dtype=np.int8),
                "segments": segments}


_WORKER_PACKER: Packer | None = None


def _start_worker(*args) -> None:
    global _WORKER_PACKER
    # the parent alone handles signals and stops the pool; a worker would print a traceback on its SIGTERM
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER_PACKER = Packer(*args)


def _pack_in_worker(batch):
    return _WORKER_PACKER(batch)


def _document_batches(corpus: Corpus, size: int, pool, ahead: int
                      ) -> Iterator[tuple[int, int, list[list[str] | str]]]:
    """(number, stage, documents as texts or sentences): batches of `size` documents, never across a stage."""
    number, stage, docs = 0, 0, []
    for s, _, sentences in corpus.documents(split=False, pool=pool, ahead=ahead):  # workers split sentences
        if docs and (s != stage or len(docs) == size):
            yield number, stage, docs
            number, docs = number + 1, []
        stage = s
        docs.append(sentences)
    if docs:
        yield number, stage, docs


@contextmanager
def _worker_pool(workers: int, packer_args: tuple):
    """A pool of `workers` processes that read files and pack batches; None (work in this process) for one."""
    if workers <= 1:
        yield None
        return
    # spawned, not forked: a fork copies locks other threads hold (tokenizers', an HTTP client's), which the
    # child can wait on forever; each worker tokenizes serially, the pool is the parallelism
    previous = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        pool = multiprocessing.get_context("spawn").Pool(workers, _start_worker, packer_args)
    finally:
        if previous is None:
            del os.environ["TOKENIZERS_PARALLELISM"]
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = previous
    with pool:
        yield pool


def _packed(batches: Iterable, pool, workers: int, packer_args: tuple) -> Iterator[dict[str, np.ndarray]]:
    """Packed batches in input order; at most two a worker in flight, so memory does not grow with the corpus."""
    if pool is None:
        packer = Packer(*packer_args)
        yield from map(packer, batches)
        return
    pending: deque = deque()
    for batch in batches:
        pending.append(pool.apply_async(_pack_in_worker, (batch,)))
        if len(pending) >= 2 * workers:
            yield pending.popleft().get()
    while pending:
        yield pending.popleft().get()


# ------------------------------------------------------------------------------------------ writing

HEADER_BYTES = 128  # a fixed-size .npy header, rewritten with the final shape when the build ends
DTYPES = {"input_ids": np.int32, "token_type_ids": np.uint8, "word_start": np.uint8, "lengths": np.int32,
          "pair_labels": np.int8, "stages": np.int8, "segments": np.int16}
ROW_ARRAYS = ("input_ids", "token_type_ids", "word_start", "segments")  # [N, seq_len]; the others [N]


def _npy_header(dtype, shape: tuple[int, ...]) -> bytes:
    header = repr({"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
                   "shape": tuple(shape)})
    body = header.ljust(HEADER_BYTES - 10 - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(body)) + body.encode("latin1")


class ShardWriter:
    """Appends packed batches to a build's .npy arrays, resuming after the last one index.jsonl records."""

    def __init__(self, folder: Path, key: dict, seq_len: int, stages: int, names: tuple[str, ...] = ARRAYS):
        self.folder, self.seq_len = folder, seq_len
        self.state = {"batches": 0, "rows": 0, "tokens": 0, "stage_rows": [0] * stages}
        if "segments" in names:
            self.state["segments"] = 0
        build, index = folder / "build.json", folder / "index.jsonl"
        if build.is_file() and json.loads(build.read_text()) == key and index.is_file():
            for line in index.read_text().splitlines():
                try:
                    self.state = json.loads(line)
                except json.JSONDecodeError:  # a line cut by the kill: that batch was not recorded
                    break
        else:
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            build.write_text(json.dumps(key))
            index.touch()
        self.files = {}
        for name in names:
            dtype = DTYPES[name]
            path = folder / f"{name}.npy"
            f = open(path, "r+b" if path.exists() else "w+b")
            f.truncate(HEADER_BYTES + self.state["rows"] * self._row_bytes(name))  # drop unrecorded rows
            f.seek(0)
            f.write(_npy_header(dtype, self._shape(name, self.state["rows"])))
            f.seek(0, os.SEEK_END)
            self.files[name] = f
        self.index = open(index, "a")

    def _shape(self, name: str, rows: int) -> tuple[int, ...]:
        return (rows, self.seq_len) if name in ROW_ARRAYS else (rows,)

    def _row_bytes(self, name: str) -> int:
        return int(np.prod(self._shape(name, 1))) * np.dtype(DTYPES[name]).itemsize

    def append(self, arrays: dict[str, np.ndarray]) -> None:
        for name, f in self.files.items():
            f.write(np.ascontiguousarray(arrays[name], dtype=DTYPES[name]).tobytes())
            f.flush()  # the rows reach the OS before the index says they exist
        s = self.state
        s["batches"] += 1
        s["rows"] += len(arrays["lengths"])
        s["tokens"] += int(arrays["lengths"].sum())
        if "segments" in s:
            s["segments"] += int(arrays["segments"].max(axis=1, initial=0).sum())
        for stage in np.unique(arrays["stages"]):
            s["stage_rows"][int(stage)] += int((arrays["stages"] == stage).sum())
        self.index.write(json.dumps(s) + "\n")
        self.index.flush()

    def finish(self) -> None:
        for name, f in self.files.items():
            f.seek(0)
            f.write(_npy_header(DTYPES[name], self._shape(name, self.state["rows"])))
            f.close()
        self.index.close()

    def close(self) -> None:
        for f in self.files.values():
            f.close()
        self.index.close()


# below this many words, starting spawned workers costs more than tokenizing in this process
POOL_MIN_WORDS = 2_000_000


def expected_words(corpus: Corpus) -> int:
    """A cheap upper estimate of the words `corpus` gives: its word cap, else from its files' sizes."""
    total = 0
    for stage in corpus.files:
        for files in stage:
            for path, _ in files:
                size = os.path.getsize(path)
                total += size * 4 // 6 if str(path).endswith(".gz") else size // 6
    return total if corpus.max_words is None else min(total, corpus.max_words)


def default_workers(corpus: Corpus | None = None) -> int:
    """$BIOABLATE_SHARD_WORKERS, else every usable core, or 1 below POOL_MIN_WORDS words."""
    if os.environ.get("BIOABLATE_SHARD_WORKERS"):
        return int(os.environ["BIOABLATE_SHARD_WORKERS"])
    if corpus is not None and expected_words(corpus) < POOL_MIN_WORDS:
        return 1
    return len(os.sched_getaffinity(0))


DOCS_PER_BATCH = 256


def build_shards(corpus: Corpus, vocab_path: Path, lowercase: bool, seq_len: int, pairs: str, seed: int,
                 out_dir: Path, *, workers: int | None = None, docs_per_batch: int = DOCS_PER_BATCH,
                 progress: Callable[[dict], None] | None = None, packing: bool = False) -> Shards:
    """Tokenize `corpus` with `vocab_path` (`lowercase`) and pack it into `seq_len` rows with `pairs`, seeded
    by `seed`, in ``<out_dir>.tmp``, resumed there after a kill, renamed when done. The result does not
    depend on `workers`; `progress` gets the state after each batch of `docs_per_batch` documents."""
    out_dir = Path(out_dir)
    if (found := open_shards(out_dir)) is not None:
        return found
    if pairs not in PAIR_MODES:
        raise ConfigError(f"pairs '{pairs}': expected one of {', '.join(PAIR_MODES)}")
    if packing and pairs != "none":
        raise ConfigError(f"packing sequences into rows needs pairs 'none' (got '{pairs}'): a sentence-pair "
                          "task reads one [CLS] per row")
    # one builder per output folder: another process building it is waited for, then its shards are read
    with claim(out_dir.with_name(out_dir.name + ".lock"), what=f"shard build {out_dir}",
               on_wait=lambda holder: log.warning("waiting for the shard build %s held by %s", out_dir, holder)):
        if (found := open_shards(out_dir)) is not None:
            return found
        return _build_shards(corpus, vocab_path, lowercase, seq_len, pairs, seed, out_dir, workers=workers,
                             docs_per_batch=docs_per_batch, progress=progress, packing=packing)


def _build_shards(corpus: Corpus, vocab_path: Path, lowercase: bool, seq_len: int, pairs: str, seed: int,
                  out_dir: Path, *, workers: int | None, docs_per_batch: int,
                  progress: Callable[[dict], None] | None, packing: bool = False) -> Shards:
    vocab_size = len(read_vocab(Path(vocab_path)))
    packer_args = (Path(vocab_path), lowercase, seq_len, pairs, seed, packing)
    key = {"corpus": corpus.identity(), "vocab": file_hash(vocab_path), "lowercase": lowercase,
           "seq_len": seq_len, "pairs": pairs, "seed": seed, "docs_per_batch": docs_per_batch,
           "code": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(), **({"packing": True} if packing else {})}
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    names = array_names(packing)
    writer = ShardWriter(tmp, key, seq_len, len(corpus.specs), names)
    workers = workers or default_workers(corpus)
    try:
        done = writer.state["batches"]
        with _worker_pool(workers, packer_args) as pool:
            batches = _document_batches(corpus, docs_per_batch, pool, ahead=max(2, workers // 2))
            todo = (batch for batch in batches if batch[0] >= done)
            for arrays in _packed(todo, pool, workers, packer_args):
                writer.append(arrays)
                if progress is not None:
                    progress(dict(writer.state))
    except BaseException:
        writer.close()
        raise
    writer.finish()
    state = writer.state
    meta = {"sequences": state["rows"], "seq_len": seq_len, "pairs": pairs, "tokens": state["tokens"],
            "stage_sizes": state["stage_rows"], "corpus": corpus.name, "documents": corpus.stats.documents,
            "words": corpus.stats.words, "vocab_size": vocab_size,
            **({"packed": True, "segments": state["segments"]} if packing else {})}
    # checked by open_shards; a file of its own: meta.json stays the same bytes for the same shards
    (tmp / MANIFEST).write_text(json.dumps(manifest_of(tmp, [f"{name}.npy" for name in names]), indent=1))
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    (tmp / "index.jsonl").unlink()
    (tmp / "build.json").unlink()
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return load_shards(out_dir)


class BatchPlan:
    """Global micro-batch number -> sample indices, independent of process state (see module doc)."""

    def __init__(self, stage_sizes: list[int], batch_size: int, total_micro_batches: int, seed: int):
        self.sizes, self.batch_size, self.seed = stage_sizes, batch_size, seed
        self.offsets = np.cumsum([0, *stage_sizes])[:-1]
        total_samples = total_micro_batches * batch_size
        weights = np.array(stage_sizes, dtype=float) / max(1, sum(stage_sizes))
        # samples given to each stage, in order; the last stage takes the remainder
        counts = np.floor(weights * total_samples).astype(int)
        counts[-1] = total_samples - counts[:-1].sum()
        self.stage_ends = np.cumsum(counts)
        self._perms: dict[tuple[int, int], np.ndarray] = {}

    def _perm(self, stage: int, epoch: int) -> np.ndarray:
        key = (stage, epoch)
        if key not in self._perms:
            self._perms[key] = np.random.default_rng([self.seed, stage, epoch]).permutation(self.sizes[stage])
            if len(self._perms) > 8:
                self._perms.pop(next(iter(self._perms)))
        return self._perms[key]

    def indices(self, micro_batch: int) -> np.ndarray:
        out = np.empty(self.batch_size, dtype=np.int64)
        for i, k in enumerate(range(micro_batch * self.batch_size, (micro_batch + 1) * self.batch_size)):
            stage = int(np.searchsorted(self.stage_ends, k, side="right"))
            stage = min(stage, len(self.sizes) - 1)
            local = k - (self.stage_ends[stage - 1] if stage > 0 else 0)
            epoch, pos = divmod(int(local), self.sizes[stage])
            out[i] = self.offsets[stage] + self._perm(stage, epoch)[pos]
        return out

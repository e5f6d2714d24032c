"""Tokenized, packed, memory-mapped pretraining sequences, and the deterministic batch plan over them.

`build_shards` tokenizes a corpus once (the Rust `tokenizers` WordPiece, batched) and packs each
document's sentences into sequences of exactly `seq_len` slots:

- ``pairs="none"``: ``[CLS] sentences ... [SEP]``, as many whole sentences of one document as fit;
- ``pairs="nsp"``: ``[CLS] A [SEP] B [SEP]``; B follows A in the document, or (50%) comes from another
  random document (label 1), as in BERT's create_pretraining_data;
- ``pairs="sop"``: the same two consecutive segments, swapped in 50% of sequences (label 1), ALBERT's
  sentence-order prediction.

The arrays (``input_ids`` int32, ``token_type_ids``/``word_start`` uint8 [N, seq_len], ``lengths``
int32, ``pair_labels`` int8, ``stages`` int8 [N]) are .npy files under
``<work>/cache/shards/<fingerprint>/``, opened with mmap; ``word_start`` marks tokens that begin a word
(every token not starting with '##'), what whole-word masking needs. The fingerprint covers the corpus
files, the vocabulary, every setting and this code, so a change rebuilds and a repeat reuses.

`BatchPlan` maps a global micro-batch number to sample indices: each corpus stage (one, or several for
``general>pubmed``) is walked in seeded permutations, a fresh one per pass, stages in order, with steps
split over stages in proportion to their sizes. Nothing depends on process state, which is what makes a
resumed run see exactly the data (and, with seeded masks, the masks) of an uninterrupted one.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from datamodules.pretrain.corpora import Corpus
from datamodules.pretrain.vocab import fast_tokenizer, read_vocab

PAIR_MODES = ("none", "nsp", "sop")
ARRAYS = ("input_ids", "token_type_ids", "word_start", "lengths", "pair_labels", "stages")


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


def load_shards(path: Path) -> Shards:
    arrays = {name: np.load(path / f"{name}.npy", mmap_mode="r") for name in ARRAYS}
    return Shards(path, meta=json.loads((path / "meta.json").read_text()), **arrays)


def _tokenize(corpus: Corpus, vocab_path: Path, lowercase: bool) -> list[list[list[np.ndarray]]]:
    """stage -> document -> sentence token ids (int32)."""
    tokenizer = fast_tokenizer(vocab_path, lowercase)
    flat = [s for stage in corpus.stages for doc in stage for s in doc]
    encodings = tokenizer.encode_batch(flat, add_special_tokens=False)
    ids = iter(np.asarray(e.ids, dtype=np.int32) for e in encodings)
    return [[[next(ids) for _ in doc] for doc in stage] for stage in corpus.stages]


def _pack_plain(doc: list[np.ndarray], body: int) -> list[tuple[list[np.ndarray], list[np.ndarray], int]]:
    out, chunk, n = [], [], 0
    for sentence in doc:
        for start in range(0, max(len(sentence), 1), body):  # a sentence longer than a sequence is cut
            piece = sentence[start:start + body]
            if n + len(piece) > body and chunk:
                out.append((chunk, [], 0))
                chunk, n = [], 0
            chunk.append(piece)
            n += len(piece)
    if chunk and n:
        out.append((chunk, [], 0))
    return out


def _pack_pairs(stage: list[list[np.ndarray]], d: int, body: int, mode: str, rng: random.Random):
    """BERT's create_instances_from_document: fill a chunk of sentences, split it into A and B."""
    doc = stage[d]
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
            if mode == "nsp" and len(stage) > 1 and rng.random() < 0.5:
                other = rng.choice([j for j in range(len(stage)) if j != d]) if len(stage) < 64 else d
                while other == d:
                    other = rng.randrange(len(stage))
                start = rng.randrange(max(1, len(stage[other])))
                b = stage[other][start:start + len(b) + 1] or [np.zeros(0, np.int32)]
                label = 1
            elif mode == "sop" and rng.random() < 0.5:
                a, b, label = b, a, 1
            out.append((a, b, label))
            chunk, n = [], 0
    return out


def build_shards(corpus: Corpus, vocab_path: Path, lowercase: bool, seq_len: int, pairs: str, seed: int,
                 out_dir: Path) -> Shards:
    """Tokenize and pack `corpus` into `out_dir` (written to a temporary folder, then renamed)."""
    if (out_dir / "meta.json").is_file():
        return load_shards(out_dir)
    vocab = read_vocab(Path(vocab_path))
    index = {t: i for i, t in enumerate(vocab)}
    cls_id, sep_id, pad_id = index["[CLS]"], index["[SEP]"], index["[PAD]"]
    continuation = np.array([t.startswith("##") for t in vocab], dtype=bool)
    rng = random.Random(seed)
    tokenized = _tokenize(corpus, vocab_path, lowercase)

    rows_ids, rows_types, labels, stages = [], [], [], []
    for s, stage in enumerate(tokenized):
        for d, doc in enumerate(stage):
            if pairs == "none":
                packed = _pack_plain(doc, seq_len - 2)
            else:
                packed = _pack_pairs(stage, d, seq_len - 3, pairs, rng)
            for a, b, label in packed:
                a_ids = np.concatenate(a) if a else np.zeros(0, np.int32)
                if pairs == "none":
                    ids = np.concatenate([[cls_id], a_ids, [sep_id]])
                    types = np.zeros(len(ids), np.uint8)
                else:
                    b_ids = np.concatenate(b) if b else np.zeros(0, np.int32)
                    while len(a_ids) + len(b_ids) > seq_len - 3:  # truncate the longer segment
                        if len(a_ids) > len(b_ids):
                            a_ids = a_ids[:-1]
                        else:
                            b_ids = b_ids[:-1]
                    ids = np.concatenate([[cls_id], a_ids, [sep_id], b_ids, [sep_id]])
                    types = np.concatenate([np.zeros(len(a_ids) + 2, np.uint8), np.ones(len(b_ids) + 1, np.uint8)])
                rows_ids.append(ids.astype(np.int32))
                rows_types.append(types)
                labels.append(label)
                stages.append(s)

    n = len(rows_ids)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    input_ids = np.lib.format.open_memmap(tmp / "input_ids.npy", "w+", np.int32, (n, seq_len))
    token_types = np.lib.format.open_memmap(tmp / "token_type_ids.npy", "w+", np.uint8, (n, seq_len))
    input_ids[:] = pad_id
    token_types[:] = 0
    lengths = np.array([len(r) for r in rows_ids], dtype=np.int32)
    for i, (ids, types) in enumerate(zip(rows_ids, rows_types)):
        input_ids[i, :len(ids)] = ids
        token_types[i, :len(types)] = types
    word_start = ~continuation[input_ids]
    np.save(tmp / "word_start.npy", word_start.astype(np.uint8))
    np.save(tmp / "lengths.npy", lengths)
    np.save(tmp / "pair_labels.npy", np.array(labels, dtype=np.int8))
    np.save(tmp / "stages.npy", np.array(stages, dtype=np.int8))
    input_ids.flush()
    token_types.flush()
    del input_ids, token_types
    stage_sizes = [int(np.sum(np.array(stages) == s)) for s in range(len(tokenized))]
    meta = {"sequences": n, "seq_len": seq_len, "pairs": pairs, "tokens": int(lengths.sum()),
            "stage_sizes": stage_sizes, "corpus": corpus.name, "documents": corpus.stats.documents,
            "words": corpus.stats.words, "vocab_size": len(vocab)}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
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

"""Shard-building throughput and memory at growing corpus sizes, against bare `tokenizers` as the ceiling.

    python -m benchmarks.shard_throughput --data-dir ../shared/data                 # 1x, 10x, 100x (~10 min here)
    python -m benchmarks.shard_throughput --data-dir ../shared/data --sizes 1,3      # a quick look

The corpus at 1x is the staged PubMed text (the `pubmed` corpus, every document, de-duplicated). Larger
sizes add documents that de-duplication keeps: copy j of document i is its sentences rotated by j plus
one sentence drawn from another document, so the text stays PubMed-like and no two documents are
equal. Each size is written (one document a line, `lines` format, with a corpus YAML) to a temporary
folder, never into the repository, and removed afterwards.

Per size, in one run:

- **build**: `build_shards` (the `pretrain` path: stream, filter, de-duplicate, sentence-split, tokenize
  and pack in a process pool with one worker a core, append to the .npy arrays), in a child process
  whose process tree (the child and its pool workers) is sampled every 50 ms for its summed RSS;
- **ceiling**: bare `tokenizers` `encode_batch` (Rust, all cores) on the same documents, timed just
  before and just after the build (at most the first `--ceiling-words` words of that size), so that a
  change in the machine's load during the build hits both alike.

Reported: wall time, text tokens/s (the packed tokens minus [CLS]/[SEP]), per core, the ceiling's
tokens/s and our share of it, and the peak RSS of the build's process tree. Targets: peak RSS at the
largest size within 1.5x of that at 10x; throughput at least 60% of the ceiling.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import tempfile
import threading
import time
from pathlib import Path

import psutil

from benchmarks.common import COUNT, SEQUENCE

VOCAB = "vocab/bert-base-uncased/vocab.txt"
DOCS_PER_FILE = 20000


def base_documents(data_dir: Path) -> list[list[str]]:
    """The staged PubMed text, as documents of sentences (every document, exact duplicates dropped)."""
    from datamodules.pretrain.corpora import load_corpus

    return [sentences for _, _, sentences in load_corpus("pubmed", data_dir, min_words=0).documents()]


def write_corpus(docs: list[list[str]], scale: int, folder: Path) -> tuple[Path, int]:
    """`scale` x the documents as `lines` files under `folder`, with a corpus YAML; returns it and the words."""
    folder.mkdir(parents=True)
    rng, words, n, out = random.Random(0), 0, 0, None
    for copy in range(scale):
        for i, doc in enumerate(docs):
            if n % DOCS_PER_FILE == 0:
                if out:
                    out.close()
                out = open(folder / f"part-{n // DOCS_PER_FILE:05d}.txt", "w", encoding="utf-8")
            if copy:
                k = copy % len(doc)
                other = docs[rng.randrange(len(docs))]
                doc = doc[k:] + doc[:k] + [other[rng.randrange(len(other))]]
            line = " ".join(doc)
            out.write(line + "\n")
            words += len(line.split())
            n += 1
    out.close()
    yaml = folder / "bench.yaml"
    yaml.write_text("name: bench\nparts:\n  - {files: ['part-*.txt'], format: lines}\n")
    return yaml, words


def _build(yaml: str, data_dir: str, out: str, workers: int, seq_len: int, result: str) -> None:
    from datamodules.pretrain.corpora import load_corpus
    from datamodules.pretrain.shards import build_shards

    start = time.perf_counter()
    shards = build_shards(load_corpus(yaml, Path(data_dir)), Path(data_dir) / VOCAB, True, seq_len, "none", 0,
                          Path(out), workers=workers)
    Path(result).write_text(json.dumps({"seconds": time.perf_counter() - start, **shards.meta}))


def build_in_child(yaml: Path, data_dir: Path, out: Path, workers: int, seq_len: int) -> dict:
    """Run the build in a child process and return its meta, seconds and the peak RSS of its tree."""
    result = out.with_suffix(".json")
    child = multiprocessing.get_context("spawn").Process(
        target=_build, args=(str(yaml), str(data_dir), str(out), workers, seq_len, str(result)))
    peak, stop = [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            try:
                proc = psutil.Process(child.pid)
                tree = [proc, *proc.children(recursive=True)]
                peak[0] = max(peak[0], sum(p.memory_info().rss for p in tree if p.is_running()))
            except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
                pass
            time.sleep(0.05)

    child.start()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    child.join()
    stop.set()
    sampler.join()
    if child.exitcode != 0:
        raise SystemExit(f"the build failed (exit {child.exitcode})")
    return {**json.loads(result.read_text()), "peak_rss": peak[0]}


def ceiling(files: list[Path], data_dir: Path, max_words: int) -> tuple[float, int]:
    """Tokens/s of bare `encode_batch` (all cores) on the first `max_words` words of the files."""
    from tokenizers import BertWordPieceTokenizer

    tokenizer = BertWordPieceTokenizer(str(data_dir / VOCAB), lowercase=True)
    lines, words = [], 0
    for path in files:
        for line in open(path, encoding="utf-8"):
            lines.append(line)
            words += len(line.split())
            if words >= max_words:
                break
        if words >= max_words:
            break
    start = time.perf_counter()
    tokens = 0
    for i in range(0, len(lines), 4096):
        tokens += sum(len(e) for e in tokenizer.encode_batch(lines[i:i + 4096], add_special_tokens=False))
    return tokens / (time.perf_counter() - start), tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("BIOABLATE_DATA", "../shared/data")))
    parser.add_argument("--sizes", default="1,10,100", help="multiples of the staged PubMed text")
    parser.add_argument("--seq-len", type=SEQUENCE, default=128)
    parser.add_argument("--ceiling-words", type=COUNT, default=4_000_000)
    parser.add_argument("--tmp", type=Path, default=None, help="where the corpora are written (default: $TMPDIR)")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    docs = base_documents(args.data_dir)
    print(f"machine: {os.cpu_count()} CPUs ({cores} usable), load average {os.getloadavg()[0]:.1f}; "
          f"1x = {len(docs)} documents")
    rows = []
    root = Path(tempfile.mkdtemp(prefix="shard-bench-", dir=args.tmp))
    try:
        for scale in (int(s) for s in args.sizes.split(",")):
            folder = root / f"x{scale}"
            yaml, words = write_corpus(docs, scale, folder)
            files = sorted(folder.glob("part-*.txt"))
            before, _ = ceiling(files, args.data_dir, args.ceiling_words)
            built = build_in_child(yaml, args.data_dir, folder / "shards", cores, args.seq_len)
            after, _ = ceiling(files, args.data_dir, args.ceiling_words)
            text_tokens = built["tokens"] - 2 * built["sequences"]  # without [CLS] and [SEP]
            rate, top = text_tokens / built["seconds"], (before + after) / 2
            row = {"scale": scale, "words": words, "documents": built["documents"], "seconds": built["seconds"],
                   "tokens": text_tokens, "tokens_per_s": rate, "per_core": rate / cores, "ceiling": top,
                   "share": rate / top, "peak_rss_mb": built["peak_rss"] / 2**20,
                   "shards_mb": sum(p.stat().st_size for p in (folder / "shards").iterdir()) / 2**20,
                   "load": os.getloadavg()[0]}
            rows.append(row)
            print(f"{scale:>4}x {words / 1e6:7.1f}M words {row['documents']:>9} docs  {row['seconds']:7.1f} s  "
                  f"{rate:9.0f} tok/s  {row['per_core']:8.0f}/core  ceiling {top:9.0f} tok/s  "
                  f"{100 * row['share']:5.1f}%  peak RSS {row['peak_rss_mb']:7.0f} MB  "
                  f"shards {row['shards_mb']:6.0f} MB"
                  f"  load {row['load']:.1f}", flush=True)
            shutil.rmtree(folder)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    by_scale = {r["scale"]: r for r in rows}
    if 10 in by_scale and max(by_scale) > 10:
        top = by_scale[max(by_scale)]
        ratio = top["peak_rss_mb"] / by_scale[10]["peak_rss_mb"]
        print(f"peak RSS {max(by_scale)}x / 10x = {ratio:.2f} (target <= 1.5)")
    shares = ", ".join(f"{r['scale']}x {100 * r['share']:.0f}%" for r in rows)
    print(f"throughput / ceiling: {shares} (target >= 60%)")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()

"""Fill of pretraining rows: the share of a row's positions that hold tokens, one-sequence rows against packed rows.

    python -m benchmarks.packing_fill --corpora pubmed pmc general --seq-len 128 512 --json outputs/fill.json

Each staged corpus goes through the `pretrain` path's own reading and packing (`datamodules.pretrain.shards`:
the corpus as a run loads it at the schema's defaults -- documents under 128 words dropped, duplicates and
evaluation PMIDs removed -- batches of `DOCS_PER_BATCH` documents, WordPiece with the bert-base-uncased
vocabulary, pairs ``none``). Every batch is packed twice: one sequence a row (whole sentences, a
document's last sequence padded to the row) and packed (`pretrain.packing`: a document's text run on in
full sequences, its last one packed with others, first fit in decreasing length). Reported per corpus and
row length: the rows, the tokens ([CLS] and [SEP] included) and the fill, tokens / (rows x row length), of
each layout; a step at a fixed batch of rows gains the ratio of the fills in real tokens.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

VOCAB = "vocab/bert-base-uncased/vocab.txt"


def fill(corpus_name: str, data_dir: Path, seq_len: int, max_words: int | None = None) -> dict:
    from datamodules.pretrain.corpora import evaluation_pmids, load_corpus
    from datamodules.pretrain.shards import DOCS_PER_BATCH, Packer, _document_batches

    corpus = load_corpus(corpus_name, data_dir, max_words=max_words, min_words=128, dedup=True,
                         exclude_pmids=evaluation_pmids(data_dir), seed=0)
    one, packed = Packer(data_dir / VOCAB, True, seq_len, "none", 0), Packer(data_dir / VOCAB, True, seq_len, "none", 0,
                                                                             packing=True)
    rows = packed_rows = tokens = packed_tokens = 0
    start = time.perf_counter()
    for batch in _document_batches(corpus, DOCS_PER_BATCH, None, ahead=2):
        lengths, packed_lengths = one(batch)["lengths"], packed(batch)["lengths"]
        rows, tokens = rows + len(lengths), tokens + int(lengths.sum())
        packed_rows, packed_tokens = packed_rows + len(packed_lengths), packed_tokens + int(packed_lengths.sum())
    return {"corpus": corpus_name, "seq_len": seq_len, "documents": corpus.stats.documents,
            "words": corpus.stats.words, "tokens": tokens, "rows": rows, "fill": tokens / (rows * seq_len),
            "packed_tokens": packed_tokens, "packed_rows": packed_rows,
            "packed_fill": packed_tokens / (packed_rows * seq_len), "max_words": max_words,
            "seconds": time.perf_counter() - start}


def report(results: list[dict], machine: str) -> str:
    lines = [f"row fill, one sequence a row vs packed ({machine})",
             "| corpus | row length | documents | rows | tokens | fill | packed rows | packed tokens | packed fill |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['corpus']} | {r['seq_len']} | {r['documents']:,} | {r['rows']:,} | {r['tokens']:,} | "
                     f"{r['fill']:.3f} | {r['packed_rows']:,} | {r['packed_tokens']:,} | {r['packed_fill']:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from ablations.places import resolve_data_dir
    from benchmarks.common import machine

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="+", default=["pubmed", "pmc", "general"])
    parser.add_argument("--seq-len", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--max-words", type=int, help="cap each corpus at this many words (pretrain.max_words)")
    parser.add_argument("--data-dir", type=Path, help="staged data (default: $BIOABLATE_DATA)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    data_dir = resolve_data_dir(str(args.data_dir) if args.data_dir else None)
    results = []
    for name in args.corpora:
        for seq_len in args.seq_len:
            results.append(fill(name, data_dir, seq_len, args.max_words))
            print(report(results[-1:], machine()).splitlines()[-1], flush=True)  # as each one ends
    print(report(results, machine()))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

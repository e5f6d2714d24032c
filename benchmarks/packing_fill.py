"""Fill of pretraining rows: the share of a row's positions that hold tokens, one-sequence rows against packed rows.

    python -m benchmarks.packing_fill --corpora pubmed pmc general --seq-len 128 512 --json outputs/fill.json

Each staged corpus goes through the `pretrain` path's own reading and packing (`datamodules.pretrain.shards`:
the corpus as a run loads it at the schema's defaults -- documents under 128 words dropped, duplicates and
evaluation PMIDs removed -- batches of `DOCS_PER_BATCH` documents, WordPiece with the bert-base-uncased
vocabulary, pairs ``none``). Every batch is packed twice: as today (`Packer`, one sequence a row, a
document's last sequence padded to the row) and packed (`pretrain.packing`: the same sequences, first fit in
decreasing length, several to a row). Reported per corpus and row length: the sequences, rows and tokens,
and the fill, tokens / (rows x row length), of each layout; the packed one's rows are fewer by the ratio of
the fills, which is what a step at a fixed batch of rows gains in real tokens.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

VOCAB = "vocab/bert-base-uncased/vocab.txt"


def fill(corpus_name: str, data_dir: Path, seq_len: int, max_words: int | None = None) -> dict:
    from datamodules.pretrain.corpora import evaluation_pmids, load_corpus
    from datamodules.pretrain.shards import DOCS_PER_BATCH, Packer, _document_batches, pack_rows

    corpus = load_corpus(corpus_name, data_dir, max_words=max_words, min_words=128, dedup=True,
                         exclude_pmids=evaluation_pmids(data_dir), seed=0)
    one, packed = Packer(data_dir / VOCAB, True, seq_len, "none", 0), Packer(data_dir / VOCAB, True, seq_len, "none", 0,
                                                                             packing=True)
    sequences = rows = packed_rows = tokens = 0
    start = time.perf_counter()
    for batch in _document_batches(corpus, DOCS_PER_BATCH, None, ahead=2):
        arrays = one(batch)
        lengths = [int(n) for n in arrays["lengths"]]
        sequences, rows, tokens = sequences + len(lengths), rows + len(lengths), tokens + sum(lengths)
        packed_rows += len(pack_rows(lengths, seq_len))
    # the packed Packer on the last batch: the rows counted above are the ones it writes
    assert len(packed(batch)["lengths"]) == len(pack_rows(lengths, seq_len))
    return {"corpus": corpus_name, "seq_len": seq_len, "documents": corpus.stats.documents,
            "words": corpus.stats.words, "sequences": sequences, "tokens": tokens, "rows": rows,
            "packed_rows": packed_rows, "fill": tokens / (rows * seq_len),
            "packed_fill": tokens / (packed_rows * seq_len), "max_words": max_words,
            "seconds": time.perf_counter() - start}


def report(results: list[dict], machine: str) -> str:
    lines = [f"row fill, one sequence a row vs packed ({machine})",
             "| corpus | row length | documents | sequences | tokens | rows | fill | packed rows | packed fill |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['corpus']} | {r['seq_len']} | {r['documents']:,} | {r['sequences']:,} | {r['tokens']:,} | "
                     f"{r['rows']:,} | {r['fill']:.3f} | {r['packed_rows']:,} | {r['packed_fill']:.3f} |")
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

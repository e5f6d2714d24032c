"""Entity F1: ours (datamodules.metrics.entity_f1, over decoded spans) against seqeval's f1_score (over tag
sequences), side by side in one process on a real staged NER file with a corrupted copy as predictions
(the corruption of tests/datamodules/test_metrics.py, which checks the two agree to 1e-9).

    BIOABLATE_DATA=../shared/data python -m benchmarks.entity_f1_speed [--file BC5CDR-disease-IOB/devel.tsv]

Why ours stays (docs/data.md): an epoch's dev scoring already holds spans (every tagging scheme -- bio,
bioul, io -- and the CRF decode to spans, `datamodules.tagging`), so seqeval would need them turned back
into BIO strings first; this measures both on the same predictions, seqeval given its tags for free.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import timeit
from pathlib import Path

from benchmarks.common import COUNT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", default="BC5CDR-disease-IOB/devel.tsv")
    parser.add_argument("--repeat", type=COUNT, default=5)
    args = parser.parse_args()
    from seqeval.metrics import f1_score

    from datamodules.instances import iob_to_spans
    from datamodules.metrics import entity_f1
    from datamodules.textfiles import conll_blocks
    from tests.datamodules.test_metrics import _corrupt

    path = Path(os.environ["BIOABLATE_DATA"]) / args.file
    gold = [[line.split("\t")[1] for _, line in block] for block in conll_blocks(path)]
    pred = _corrupt(gold, random.Random(0))
    gold_spans, pred_spans = [iob_to_spans(t) for t in gold], [iob_to_spans(t) for t in pred]
    ours = min(timeit.repeat(lambda: entity_f1(gold_spans, pred_spans), number=1, repeat=args.repeat))
    theirs = min(timeit.repeat(lambda: f1_score(gold, pred), number=1, repeat=args.repeat))
    host = subprocess.run("lscpu | sed -n 's/^Model name: *//p'", shell=True, capture_output=True,
                          text=True).stdout.strip()
    print(f"{args.file}: {len(gold)} sentences; ours {1000 * ours:.1f} ms, seqeval {1000 * theirs:.1f} ms "
          f"(seqeval / ours = {theirs / ours:.1f}); best of {args.repeat}; host: {host}; "
          f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

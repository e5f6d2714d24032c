"""The `bioablate` commands on a fine-tuning run's model and predictions: their parsers (`export`,
`predict`, `predictions`; parser.py adds them) and `predictions`, a tagging run's test predictions as a
CoNLL file (serve.py runs `export` and `predict`).
"""

from __future__ import annotations

import argparse
import sys

from ablations import api
from ablations.cli.help import add_common, add_datasets, add_store_options, examples


def export_command(sub) -> None:
    ex = sub.add_parser("export", help="write a finished fine-tuning run's best model as a Hugging Face folder",
                        **examples("bioablate export 3f2a9c0d1e2b4a5f --to models/bc5-chem-tagger"))
    ex.add_argument("run", metavar="RUN", help="the run's MLflow run id or fingerprint")
    ex.add_argument("--to", required=True, metavar="DIR", help="folder to write (new, empty, or an earlier export)")
    add_datasets(ex, ": the model gets its definition where it was stored without it")
    add_store_options(ex, "where the run went")


def predict_command(sub) -> None:
    pr = sub.add_parser("predict", help="tag or classify new text with an exported model (JSONL out)",
                        **examples("bioablate predict --model models/bc5-chem-tagger "
                                   "--input sentences.txt --output tags.jsonl"))
    pr.add_argument("--model", required=True, metavar="DIR", help="a folder written by `bioablate export`")
    pr.add_argument("--task", help="the task it was fine-tuned on, e.g. bc5-chem (default: the one its "
                                   "bioablate.json names; given, it must be that one)")
    pr.add_argument("--input", required=True, metavar="FILE",
                    help="one text per line, or JSONL with the task's fields (see ablations/run/predict.py)")
    pr.add_argument("--output", metavar="FILE", help="write JSONL here (default: stdout)")
    add_datasets(pr, "; only for a model exported without its dataset's definition")


def predictions_command(sub) -> None:
    ps = sub.add_parser("predictions", help="a finished tagging run's test predictions as a CoNLL file "
                                            "(token gold pred, IOB2), for conlleval",
                        **examples("bioablate predictions 3f2a9c0d1e2b4a5f --format conll --output test.conll",
                                   "bioablate predictions 3f2a9c0d1e2b4a5f --datasets my-ner.yaml"))
    ps.add_argument("run", metavar="RUN", help="the run's MLflow run id or fingerprint (as `export` takes)")
    ps.add_argument("--format", default="conll", help="conll (default): a `token gold pred` line per word, a "
                                                      "blank line between sentences, the test split's order")
    ps.add_argument("--output", metavar="FILE", help="write it here (default: stdout)")
    add_datasets(ps, ": the run's dataset, for a run on one")
    add_store_options(ps, "where the run went")
    add_common(ps)


def cmd_predictions(args: argparse.Namespace) -> int:
    written = api.predictions(args.run, args.format, args.output, args.work_dir, args.tracking_uri, args.data_dir,
                              args.datasets or ())
    print(f"bioablate: {written.line()}", file=sys.stderr)  # stderr: stdout may be the file itself
    return 0

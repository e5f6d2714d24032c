"""Where a tagging scheme's lead comes from: the NER runs of a table (Table 13's BIO / BIOUL / IO), re-scored
from their own logged test predictions (`test_predictions.jsonl`).

For each finished run it prints:
- `logged`: the test score the run logged; `ours`: entity F1 recomputed from its predictions (they agree, or
  the predictions are not what was scored);
- `seqeval`: seqeval's conlleval-compatible entity F1 on the same predictions written as BIO tags (an
  independent scorer);
- `as IO`: the run's predicted mentions with every pair of touching mentions of one type merged, as an IO
  tagger would output them, scored against the original gold mentions;
- `splits`: gold mentions the run predicted as two or more touching mentions of the gold type that together
  cover it exactly (what a BIO / BIOUL model gets wrong and an IO model cannot);
- `gold merges`: touching gold mentions of one type (what IO cannot represent: its ceiling);
- with `--decoders`: the run's exported model tags the test sentences again, and its raw tags are decoded
  by our scheme's decoder and by seqeval's conlleval-compatible chunker (BIOUL read as IOBES: L = E,
  U = S); `decoders differ` counts sentences where the two disagree, `invalid` those whose tags needed a
  repair, and `seqeval dec.` is entity F1 with seqeval's decoding.

If a BIO run's `as IO` score reaches the IO run's score, IO's lead is entirely BIO's split mentions: a
property of the model's boundary decisions, not of the decoding or scoring code.

    python scripts/tagging_scheme_check.py --experiment table13_tagging --profile mini --work-dir outputs
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from datamodules.instances import Span
from datamodules.metrics import entity_f1
from datamodules.tagging import io_merges


def merge_touching(spans: list[Span]) -> list[Span]:
    """IO's view of a prediction: touching mentions of one type become one."""
    merged: list[Span] = []
    for span in sorted(spans):
        if merged and merged[-1].end == span.start and merged[-1].label == span.label:
            merged[-1] = Span(merged[-1].start, span.end, span.label)
        else:
            merged.append(span)
    return merged


def split_mentions(gold: list[Span], predicted: list[Span]) -> int:
    """Gold mentions predicted as >= 2 touching mentions of its type that cover it exactly."""
    inside = {g: [p for p in predicted if g.start <= p.start and p.end <= g.end and p.label == g.label]
              for g in gold}
    return sum(1 for g, parts in inside.items()
               if len(parts) >= 2 and merge_touching(parts) == [g])


def bio_tags(spans: list[Span], length: int) -> list[str]:
    tags = ["O"] * length
    for span in spans:
        for i in range(span.start, span.end):
            tags[i] = f"{'B' if i == span.start else 'I'}-{span.label}"
    return tags


def rescore(records: list[dict]) -> dict[str, float]:
    from seqeval.metrics import f1_score  # the conlleval-compatible default mode

    gold = [[Span(*s) for s in r["gold"]] for r in records]
    predicted = [[Span(*s) for s in r["prediction"]] for r in records]
    lengths = [max([s.end for s in g + p], default=0) for g, p in zip(gold, predicted)]
    return {
        "ours": entity_f1(gold, predicted)["score"],
        "seqeval": f1_score([bio_tags(g, n) for g, n in zip(gold, lengths)],
                            [bio_tags(p, n) for p, n in zip(predicted, lengths)]),
        "as IO": entity_f1(gold, [merge_touching(p) for p in predicted])["score"],
        "splits": float(sum(split_mentions(g, p) for g, p in zip(gold, predicted))),
        "gold merges": float(sum(io_merges(g) for g in gold)),
        "gold mentions": float(sum(len(g) for g in gold)),
    }


def raw_tags(model_dir: Path, sentences: list[tuple[str, ...]]) -> list[list[str]]:
    """The exported token classifier's tag for each word (its first sub-token), as the run predicted them."""
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    info = json.loads((model_dir / "bioablate.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForTokenClassification.from_pretrained(model_dir).eval()
    out = []
    with torch.inference_mode():
        for start in range(0, len(sentences), 64):
            batch = [list(s) for s in sentences[start:start + 64]]
            enc = tokenizer(batch, is_split_into_words=True, truncation=True, max_length=info["max_length"],
                            padding=True, return_tensors="pt")
            ids = model(**enc).logits.argmax(-1)
            for i, words in enumerate(batch):
                tags, seen = ["O"] * len(words), set()
                for position, word in enumerate(enc.word_ids(i)):
                    if word is not None and word not in seen:
                        seen.add(word)
                        tags[word] = model.config.id2label[int(ids[i, position])]
                out.append(tags)
    return out


def decoder_check(scheme_name: str, gold: list[tuple[Span, ...]], tags: list[list[str]]) -> dict[str, float]:
    from seqeval.metrics.sequence_labeling import get_entities

    from datamodules.tagging import get_scheme

    scheme = get_scheme(scheme_name)
    iobes = {"L": "E", "U": "S"}
    ours = [list(scheme.decode(t)) for t in tags]
    theirs = [[Span(start, end + 1, label) for label, start, end in
               get_entities([iobes.get(t[0], t[0]) + t[1:] for t in sentence])] for sentence in tags]
    return {"decoders differ": float(sum(sorted(a) != sorted(b) for a, b in zip(ours, theirs))),
            "invalid": float(sum(scheme.encode(spans, len(t)) != t for spans, t in zip(ours, tags))),
            "ours dec.": entity_f1(gold, ours)["score"], "seqeval dec.": entity_f1(gold, theirs)["score"]}


def main() -> None:
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    import mlflow

    from ablations import api
    from ablations.experiment.plan import collect
    from ablations.results import FINISHED

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="table13_tagging")
    parser.add_argument("--profile", default="mini")
    parser.add_argument("--work-dir", default="outputs")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--decoders", action="store_true",
                        help="also re-tag the test sentences with each run's exported model and compare decoders")
    args = parser.parse_args()
    experiment = api.experiment(args.experiment, profile=args.profile, work_dir=args.work_dir)
    tracking_uri = experiment.store()[1]
    rows = []
    for run in collect(experiment, tracking_uri):
        if run.status != FINISHED:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            path = mlflow.artifacts.download_artifacts(run_id=run.run_id, artifact_path="test_predictions.jsonl",
                                                       dst_path=tmp, tracking_uri=tracking_uri)
            records = [json.loads(line) for line in Path(path).read_text().splitlines()]
        row = {"task": run.task, "row": run.row, "column": run.column, "seed": run.seed, "logged": run.value,
               **rescore(records)}
        if args.decoders:
            from ablations.places import resolve_data_dir
            from datamodules.registry import get_dataset

            model_dir = experiment.store()[0] / "runs" / run.fingerprint / "model"
            test = {x.id: x for x in
                    get_dataset(run.task).read(resolve_data_dir(experiment.shared_config().data_dir))["test"]}
            instances = [test[r["id"]] for r in records]
            scheme = json.loads((model_dir / "bioablate.json").read_text())["tagging"]
            row.update(decoder_check(scheme, [x.spans for x in instances],
                                     raw_tags(model_dir, [x.tokens for x in instances])))
        rows.append(row)
    print(f"{'task':12} {'scheme':8} {'seed':>4} {'logged':>7} {'ours':>7} {'seqeval':>7} {'as IO':>7} "
          f"{'splits':>6} {'gold merges':>11}")
    for r in rows:
        scheme = r["column"] if r["task"] == r["row"] else r["row"]
        print(f"{r['task']:12} {scheme:8} {r['seed']:>4} {100 * r['logged']:7.2f} {100 * r['ours']:7.2f} "
              f"{100 * r['seqeval']:7.2f} {100 * r['as IO']:7.2f} {r['splits']:6.0f} {r['gold merges']:11.0f}")
        if args.decoders:
            print(f"{'':33} decoders differ {r['decoders differ']:.0f}, invalid {r['invalid']:.0f}, "
                  f"entity F1 ours {100 * r['ours dec.']:.2f} / seqeval {100 * r['seqeval dec.']:.2f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

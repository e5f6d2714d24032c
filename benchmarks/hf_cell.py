"""One cell of a table the way a researcher runs it with Hugging Face: a `Trainer` script, one process per
cell (as a shell loop over `run_ner.py` / `run_glue.py`), in the `hf-strong` configuration.

    python -m benchmarks.hf_cell --task bc5-chem --seed 1 --profile mini --out cell.json \
        finetune.max_train_examples=800 finetune.epochs=2 ...

The cell's settings are the fine-tuning config `bioablate` would resolve for the same profile and
overrides (`ablations.api.config`): the same examples (the same seeded caps, the same task encoding, read
and tokenized afresh in this process, as a script does), model shape, seed, epochs, learning rate and
warm-up, weight decay, batch sizes and maximum length. The Trainer:

- `hf-strong` (benchmarks/finetune_throughput.py): SDPA attention, dynamic padding
  (`DataCollatorForTokenClassification` / `DataCollatorWithPadding`), `group_by_length`, fused AdamW,
  bf16 where the CPU computes it natively (`--precision auto`), else fp32;
- dev evaluated every epoch (`eval_strategy="epoch"`), a checkpoint per epoch, the best dev epoch's
  weights loaded at the end (`load_best_model_at_end`, `metric_for_best_model` = the task's score), then
  test predicted with them, as our runs do; scores computed with the task's own metric (the same scoring
  code as ours, `FinetuneDataModule.score`); no experiment tracker (`report_to=[]`).

Writes wall seconds per phase (process start and imports, data, model, train (with dev evaluation and
checkpoints), test) and the dev/test scores to `--out`.
"""

from __future__ import annotations

import argparse  # noqa: E402 -- the imports are part of what the cell's wall time measures
import json  # noqa: E402
import tempfile  # noqa: E402
import time
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import psutil  # noqa: E402
import torch  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--profile", default="mini")
    parser.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--output-dir", type=Path, help="checkpoints (default: a temporary folder)")
    parser.add_argument("overrides", nargs="*", help="config overrides, key=value (as `bioablate finetune`)")
    args = parser.parse_args(argv)
    out = {"task": args.task, "seed": args.seed, "seconds": {}}
    seconds = out["seconds"]
    # the process's start and the imports up to here, the same way a run's timing profile counts them
    seconds["process_start_imports"] = time.time() - psutil.Process().create_time()
    with tempfile.TemporaryDirectory() as tmp:
        _cell(args, Path(args.output_dir or tmp), out)
    seconds["wall"] = time.time() - psutil.Process().create_time()
    args.out.write_text(json.dumps(out, indent=1))
    return 0


def _cell(args: argparse.Namespace, output_dir: Path, out: dict) -> None:
    imports = time.perf_counter()
    import logging
    import warnings

    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        BertForTokenClassification,
        DataCollatorForTokenClassification,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
    )

    from ablations import api
    from ablations.places import resolve_data_dir
    from benchmarks.common import bf16_native
    from benchmarks.finetune_throughput import hf_examples
    from datamodules.finetune_data import FinetuneDataModule, FinetuneDataOptions
    from datamodules.registry import get_dataset
    from lightning_modules.models import load_encoder

    warnings.filterwarnings("ignore")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    seconds = out["seconds"]
    seconds["process_start_imports"] += time.perf_counter() - imports  # a script imports at its top
    start = time.perf_counter()
    cfg = api.config(args.profile, [*args.overrides, f"seed={args.seed}"], task=args.task)
    ft, spec, data_dir = cfg.finetune, get_dataset(args.task), resolve_data_dir(cfg.data_dir)
    torch.manual_seed(args.seed)
    encoder, tokenizer = load_encoder(cfg.model, data_dir, ft.dropout)  # the tokenizer, and the shape below
    seconds["model_load"] = time.perf_counter() - start
    start = time.perf_counter()
    options = FinetuneDataOptions(max_length=ft.max_length or min(spec.max_length, 512), batch_size=ft.batch_size,
                                  eval_batch_size=ft.eval_batch_size, max_train_examples=ft.max_train_examples,
                                  max_eval_examples=ft.max_eval_examples, seed=args.seed)
    dm = FinetuneDataModule(spec, data_dir, tokenizer, options, cache_dir=None)  # read and tokenized afresh
    dm.setup()
    splits = {split: hf_examples(dm, None, split) for split in ("train", "dev", "test")}
    seconds["tokenization"] = time.perf_counter() - start

    start = time.perf_counter()
    token_task = dm.encoder.position_labels  # a tag per position
    c = encoder.config
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=c.hidden_size, num_hidden_layers=c.num_hidden_layers,
                        num_attention_heads=c.num_attention_heads, intermediate_size=c.intermediate_size,
                        max_position_embeddings=c.max_position_embeddings, pad_token_id=c.pad_token_id,
                        hidden_dropout_prob=ft.dropout, attention_probs_dropout_prob=ft.dropout,
                        num_labels=dm.encoder.num_labels)
    model_cls = BertForTokenClassification if token_task else BertForSequenceClassification
    model = model_cls._from_config(config, attn_implementation="sdpa")
    del encoder
    seconds["model_load"] += time.perf_counter() - start
    bf16 = args.precision == "bf16" or (args.precision == "auto" and bf16_native("cpu"))

    def score(split: str):
        def compute(prediction) -> dict[str, float]:
            logits, labels = prediction.predictions, prediction.label_ids
            # with group_by_length the Trainer evaluates in a length-grouped order too (a seeded sampler):
            # the example each prediction row belongs to
            order = list(trainer._get_eval_sampler(splits[split]))
            if token_task:  # the tag of every labelled position (the first sub-token of each word), in order
                ids = logits.argmax(-1)
                raw = {order[i]: ids[i][labels[i] != -100].tolist() for i in range(len(ids))}
            else:
                raw = {order[i]: label for i, label in enumerate(np.asarray(logits).argmax(-1).tolist())}
            metrics, _ = dm.score(split, raw)
            return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
        return compute

    steps_per_epoch = -(-len(splits["train"]) // ft.batch_size)
    training = TrainingArguments(
        output_dir=str(output_dir), seed=args.seed, num_train_epochs=ft.epochs, learning_rate=ft.lr,
        weight_decay=ft.weight_decay, warmup_steps=int(ft.warmup_ratio * steps_per_epoch * ft.epochs),
        per_device_train_batch_size=ft.batch_size, per_device_eval_batch_size=ft.eval_batch_size,
        eval_strategy="epoch", save_strategy="epoch", save_total_limit=1, load_best_model_at_end=True,
        metric_for_best_model="score", greater_is_better=True, report_to=[], use_cpu=True,
        bf16=bf16, train_sampling_strategy="group_by_length", optim="adamw_torch_fused",
        logging_strategy="epoch", disable_tqdm=True, remove_unused_columns=False, dataloader_num_workers=0)
    collator = DataCollatorForTokenClassification(tokenizer) if token_task else DataCollatorWithPadding(tokenizer)
    trainer = Trainer(model=model, args=training, train_dataset=splits["train"], eval_dataset=splits["dev"],
                      data_collator=collator, processing_class=tokenizer, compute_metrics=score("dev"))
    start = time.perf_counter()
    trainer.train()
    seconds["train_with_dev_eval_and_checkpoints"] = time.perf_counter() - start
    out["dev"] = max((entry for entry in trainer.state.log_history if "eval_score" in entry),
                     key=lambda entry: entry["eval_score"])["eval_score"]
    start = time.perf_counter()
    trainer.compute_metrics = score("test")
    out["test"] = trainer.predict(splits["test"]).metrics["test_score"]
    seconds["test"] = time.perf_counter() - start
    out["precision"] = "bf16" if bf16 else "fp32"
    out["train_examples"] = len(splits["train"])


if __name__ == "__main__":
    raise SystemExit(main())

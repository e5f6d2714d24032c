"""`bioablate predict`: tag or classify new text with a fine-tuned model folder (`bioablate export`).

The input is encoded by the task's own encoder (`datamodules.encoders`, with the tagging scheme,
sub-token labelling, relation transform and max_length the model was trained with, from its
`bioablate.json`, which also names the task: `--task` is only checked against it), batched as evaluation
batches are, run through the model, and decoded as the test set was; so a model predicts here exactly what
its run's `test_predictions.jsonl` says for the same examples.

Input, one example per line:
- plain text: NER/PICO and document classification take the text (split into words on spaces and
  punctuation for tagging); similarity and QA take two texts separated by a tab (extractive QA: the
  question, a tab, the context); relation extraction needs JSONL (the entities' offsets).
- JSONL (`.jsonl`, or lines starting with `{`): the task's fields (`datamodules.instances`): `text` and/or
  `tokens` for tagging (both: the tokens must occur in the text in order; tokens alone: the text is
  them joined by spaces); `text`, `head` and `tail` ({start, end, type}: character offsets) for relation
  extraction; `text` for classification; `text_a` and `text_b` for pairs; `question` and `context`
  for extractive QA (`question_id` optional); `id` optional everywhere.
Output: JSONL, one line per example: `id` and `prediction` in the form of the run's test predictions, and
- tagging: `text`, `entities` as a Hugging Face token-classification pipeline with
  `aggregation_strategy="simple"` gives them (`entity_group`, `score`: the mean probability of the
  predicted tags over the mention's tagged positions, `word`, and `start` / `end`: character offsets into
  `text`, so `text[start:end] == word`), plus `tokens`, the words the `prediction` spans index;
- classification: `probabilities`, each class's (softmax); multi-label: each label's (sigmoid);
- similarity (regression): the number alone;
- extractive QA: `prediction`, the context's n-best answers over all its windows, [text, probability]
  each (all 20 candidates, as the run's test predictions keep them); and `answers`, the five best as
  Hugging Face's question-answering pipeline gives them (`answer`, `score`: its probability, and `start` /
  `end`: character offsets into `context`, so `context[start:end] == answer`), each widened to whole
  words where the model's span starts or ends inside one ("oquine" of "Chloroquine" -> "Chloroquine";
  words as the model's tokenizer splits them, `datamodules.qa_spans.whole_word_answers`).
"""

from __future__ import annotations

import copy
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from safetensors.torch import load_file
from torch import nn
from transformers import AutoConfig, AutoModel, AutoTokenizer
from transformers.utils import logging as hf_logging

from ablations.run.export import HEAD_FILE, META_FILE, TRANSFORMERS, export_mapping, label_names
from ablations.run.exported_dataset import model_dataset, register_datasets
from ablations.run.predict_inputs import Example, check_input_file, read_inputs
from bioablate_core.errors import ConfigError
from bioablate_core.files import write_text_atomic
from datamodules.batch_samplers import SortedBatchSampler
from datamodules.encoders import Features, TaggingEncoder, TaskEncoder
from datamodules.finetune_data import EncodedSplit
from datamodules.instances import (
    Instance,
    Span,
    TaggingInstance,
)
from datamodules.qa_spans import whole_word_answers, word_bounds
from datamodules.task_kinds import TASK_KINDS, make_encoder
from datamodules.word_windows import tagging_windows
from lightning_modules.finetune_spec import FinetuneSpec

UNCUT = 1 << 30  # a max_length no input reaches: its whole length, to say what was cut


@dataclass
class ExportedModel:
    """A fine-tuned model folder, loaded: the network, its task encoder, and the head that turns logits
    into predictions (in the `transformers` format only its decision rule is used: the logits come from
    the transformers class)."""

    path: Path
    meta: dict[str, Any]
    network: nn.Module  # the transformers task model, or (format `bioablate`) the bare encoder
    head: nn.Module
    task_encoder: TaskEncoder

    def logits(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
        if self.meta["format"] == TRANSFORMERS:
            return self.network(**inputs).logits.float()
        return self.head(self.network(**inputs).last_hidden_state, batch)


def load_model(path: Path | str, task: str | None = None) -> ExportedModel:
    """Load an exported fine-tuned model folder; `task`, if given, must be the one it was trained on."""
    path = Path(path).expanduser()
    if not (path / META_FILE).is_file():
        raise ConfigError(f"--model {path}: no {META_FILE}; pass a folder written by `bioablate export`")
    meta = json.loads((path / META_FILE).read_text())
    if task is not None and task != meta["task"]:
        raise ConfigError(f"--task {task}: the model in {path} was fine-tuned on '{meta['task']}'; "
                          f"pass --task {meta['task']}")
    spec = model_dataset(meta, str(path))
    tokenizer = AutoTokenizer.from_pretrained(path)
    choices = FinetuneSpec.from_metadata(meta)
    task_encoder = make_encoder(spec, tokenizer, meta["max_length"], choices.encoding)
    if label_names(task_encoder) != meta["labels"]:
        raise ConfigError(f"--model {path}: its labels ({', '.join(meta['labels'])}) are not those of "
                          f"dataset '{spec.name}' as registered now; use the bioablate version that made it")
    config = AutoConfig.from_pretrained(path)
    head = choices.head.build(task_encoder, config.hidden_size)
    if meta["format"] == TRANSFORMERS:  # the class its head spec exports as (ablations.run.export)
        network = export_mapping(choices, task_encoder.output_kind, config.model_type).auto_class.from_pretrained(path)
    else:
        # as lightning_modules.models.load_encoder: the heads read hidden states, no pooler was trained
        no_pooler = {"add_pooling_layer": False} if config.model_type in ("bert", "albert") else {}
        network = AutoModel.from_pretrained(path, **no_pooler)
        head.load_state_dict(load_file(str(path / HEAD_FILE)))
    return ExportedModel(path, meta, network.eval(), head.eval(), task_encoder)


def _run(model: ExportedModel, instances: list[Instance], batch_size: int | None = None
         ) -> list[tuple[Features, Any, Any]]:
    """(bookkeeping, raw prediction, probabilities) of each instance, in input order: tagging gives a tag
    id and a row of tag probabilities per tagged position; classification the class (or labels) and
    their probabilities; regression the number and None."""
    encoder = model.task_encoder
    split = EncodedSplit.from_features(encoder.encode(instances), encoder.position_labels)
    raw: dict[int, tuple[Any, Any]] = {}
    # the evaluation batches of training (same size, same length order): the same padding, the same numbers
    sampler = SortedBatchSampler(split.lengths, batch_size or model.meta["eval_batch_size"])
    with torch.inference_mode():
        for indices in sampler:
            batch = split.batch(indices, encoder.tokenizer.pad_token_id)
            logits = model.logits(batch)
            values, counts = encoder.gather(batch, model.head.predict(logits, batch))
            probabilities = model.head.probabilities(logits, batch)
            probs = [None] * len(indices) if probabilities is None else \
                encoder.unpack(*encoder.gather(batch, probabilities))
            raw.update(zip(batch["index"].tolist(), zip(encoder.unpack(values, counts), probs)))
    return [(split.example(i), *raw[i]) for i in range(len(split))]


def predict(model: ExportedModel, instances: list[Instance], batch_size: int | None = None) -> list[Any]:
    """Instance-level predictions (as `TaskEncoder.decode_split` gives them), in input order."""
    rows = _run(model, instances, batch_size)
    return model.task_encoder.decode_split(instances, [feature for feature, _, _ in rows], [raw for _, raw, _ in rows])


def _entities(encoder: TaggingEncoder, example: Example, feature: Features, tags: list[int],
              probs: list[list[float]]) -> list[dict[str, Any]]:
    """The mentions of one example as the Hugging Face pipeline reports them (module docstring). The
    spans are decoded as `TaggingEncoder.decode` does, on the tagged positions, so that each one's
    score is read where its tags were."""
    words = feature["_unit_words"]
    out = []
    for span in encoder.scheme.decode([encoder.tags[t] for t in tags]):
        start, end = example.words[words[span.start]][0], example.words[words[span.end - 1]][1]
        score = sum(probs[u][tags[u]] for u in range(span.start, span.end)) / (span.end - span.start)
        out.append({"entity_group": span.label, "score": score, "word": example.text[start:end],
                    "start": start, "end": end})
    return out


def predict_records(model: ExportedModel, examples: list[Example], batch_size: int | None = None
                    ) -> list[dict[str, Any]]:
    """What `bioablate predict` writes for each example (module docstring), in input order: the task
    kind's records (this module's part of each kind, at its end)."""
    return TASK_KINDS.part(model.task_encoder.output_kind, "predict")(model, examples, batch_size)


def _tagging_records(model: ExportedModel, examples: list[Example], batch_size: int | None) -> list[dict[str, Any]]:
    """An input longer than the model's window is tagged window by window (`tagging_windows`), all of it:
    its entities and word spans put back together, offsets into its whole text."""
    encoder = model.task_encoder
    parts: list[tuple[int, int, Example]] = []  # (input, first word, the window as an example of its own)
    for index, example in enumerate(examples):
        tokens = example.instance.tokens
        for start, end in tagging_windows(encoder, tokens):
            window = TaggingInstance(example.instance.id, tokens[start:end], ())
            parts.append((index, start, Example(window, example.text, example.words[start:end])))
    records = [{"id": e.instance.id, "text": e.text, "entities": [], "prediction": [],
                "tokens": list(e.instance.tokens)}
               for e in examples]
    for (index, start, part), (feature, raw, probs) in zip(parts, _run(model, [p.instance for _, _, p in parts],
                                                                       batch_size)):
        record = records[index]
        record["entities"] += _entities(encoder, part, feature, raw, probs)
        record["prediction"] += encoder.to_json(Span(s.start + start, s.end + start, s.label)
                                                for s in encoder.decode(feature, raw))
    return records


def _answer_records(model: ExportedModel, examples: list[Example], batch_size: int | None) -> list[dict[str, Any]]:
    """Several windows per example: decoded together, as the test set was."""
    encoder, instances = model.task_encoder, [e.instance for e in examples]
    return [{"id": x.id, "prediction": encoder.to_json(p),
             "answers": whole_word_answers(p, x.context, word_bounds(encoder.tokenizer, x.context), encoder.top_k)}
            for x, p in zip(instances, predict(model, instances, batch_size))]


def _sequence_records(model: ExportedModel, examples: list[Example], batch_size: int | None) -> list[dict[str, Any]]:
    """The prediction, and each class's or label's probability where the head gives them. One output per
    input reads one window, as fine-tuning did: the inputs cut to it are said (`_say_cut`)."""
    encoder = model.task_encoder
    rows = _run(model, [e.instance for e in examples], batch_size)
    _say_cut(model, examples)
    return [{"id": example.instance.id, "prediction": encoder.to_json(encoder.decode(feature, raw))}
            | ({} if probs is None else {"probabilities": dict(zip(encoder.labels, probs))})
            for example, (feature, raw, probs) in zip(examples, rows)]


def _say_cut(model: ExportedModel, examples: list[Example]) -> None:
    """One line on stderr naming the inputs longer than the model's `max_length` (those encoded to the
    whole window and longer without the cut), whose prediction reads only their first tokens."""
    encoder = model.task_encoder
    encoded = encoder.encode([e.instance for e in examples])  # the model inputs (the rows keep bookkeeping only)
    full = [i for i, feature in enumerate(encoded) if len(feature["input_ids"]) >= encoder.max_length]
    if not full:
        return
    whole = copy.copy(encoder)
    whole.max_length = UNCUT
    lengths = [len(f["input_ids"]) for f in whole.encode([examples[i].instance for i in full])]
    cut = [(examples[i].instance.id, n) for i, n in zip(full, lengths) if n > encoder.max_length]
    if cut:
        shown = ", ".join(f"{rid} ({n:,} tokens)" for rid, n in cut[:5]) + (", ..." if len(cut) > 5 else "")
        print(f"bioablate: {len(cut)} of {len(examples)} inputs are longer than the {encoder.max_length} tokens "
              f"the model reads (its max_length) and were cut to them: {shown}; their predictions read only "
              "their beginning", file=sys.stderr)


def predict_file(model_dir: Path, task: str | None, input_path: Path, output: Path | None,
                 datasets: Sequence[str | Path] = ()) -> int:
    """`bioablate predict`: predictions for every example of `input_path`, as JSONL to `output` (else
    stdout); returns how many. `task` None: the one the folder's bioablate.json names; `datasets`: user
    dataset YAMLs to register first (a model exported before models carried their dataset's definition)."""
    hf_logging.disable_progress_bar()  # stderr is for errors and the summary line
    if output is not None and Path(output).is_dir():  # before the model is loaded and every example predicted
        raise ConfigError(f"--output {output} is a folder; name the JSONL file to write, e.g. "
                          f"{Path(output) / 'predictions.jsonl'}")
    if output is not None and Path(input_path).exists() and Path(output).exists() and \
            Path(output).samefile(input_path):  # it would replace the user's text by its predictions
        raise ConfigError(f"--output {output} is the --input file; name another file for the predictions, "
                          f"e.g. {Path(output).with_suffix('.predictions.jsonl')}")
    check_input_file(Path(input_path))  # before the model is loaded
    register_datasets(datasets)
    model = load_model(model_dir, task)
    records = predict_records(model, read_inputs(input_path, model.task_encoder.spec))
    lines = "".join(json.dumps(record) + "\n" for record in records)
    if output is None:
        sys.stdout.write(lines)
    else:
        try:
            write_text_atomic(Path(output), lines)
        except OSError as error:
            raise ConfigError(f"--output {output}: cannot write it ({error.strerror or error})") from None
        print(f"{len(records)} predictions -> {output}", file=sys.stderr)
    return len(records)


# ------------------------------------------------------------------ this layer's part of each task kind
# (datamodules/task_kinds.py): (model, examples, batch size) -> what `bioablate predict` writes per example

TASK_KINDS.attach("token", predict=_tagging_records)
TASK_KINDS.attach("span", predict=_answer_records)
TASK_KINDS.attach("classification", predict=_sequence_records)
TASK_KINDS.attach("multilabel", predict=_sequence_records)
TASK_KINDS.attach("regression", predict=_sequence_records)
TASK_KINDS.attach("ranking", predict=_sequence_records)

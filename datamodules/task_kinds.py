"""The task kinds: what a fine-tuned model predicts per example, one `TASK_KINDS` entry each.

    token           a tag per tagged position (NER, PICO)
    span            an answer's start and end position in a context (extractive QA)
    classification  one of the dataset's classes (relation extraction, document classification, yes/no QA)
    multilabel      any subset of the dataset's labels (HoC)
    regression      one number (sentence similarity)
    ranking         trained as two classes; predicts the relevant class's probability, which a ranking
                    metric orders (Bio-ELECTRA's answer re-ranking)

A kind owns every part that differs between kinds, each in its layer: here its encoder, window rules and
`one_class`; `head` (lightning_modules/heads.py), `export` (ablations/run/export.py), `card`
(ablations/run/cards.py) and `predict` (ablations/run/predict.py) above. One entry holds them all, so a new
kind is one `register` call and a kind missing a part fails tests/test_conformance.py. The data layer cannot
import upward, so built-in kinds get their upper parts from the module that uses them (`attach`).

A dataset's kind comes from its `task_type` (datamodules/task_types.py): `kind_name` makes classification
`multilabel` or `ranking` where the dataset says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from transformers import PreTrainedTokenizerBase

from bioablate_core.errors import ConfigError
from bioablate_core.registry import Registry
from datamodules.encoders import EncodingSpec, SequenceEncoder, SequenceLabels, TaggingEncoder
from datamodules.instances import Instance, TextInstance
from datamodules.qa_spans import ExtractiveQAEncoder
from datamodules.spec import DatasetSpec
from datamodules.task_encoder import RANKING_METRICS, TaskEncoder
from datamodules.task_types import TASK_TYPES

# (dataset, tokenizer, max_length, encoding choices with the windows resolved, the kind's name) -> encoder
EncoderFactory = Callable[[DatasetSpec, PreTrainedTokenizerBase, int, EncodingSpec, str], TaskEncoder]


@dataclass(frozen=True)
class TaskKind:
    """One task kind (module docstring); `head`, `export`, `card` and `predict` are the upper layers'."""

    encoder: EncoderFactory
    # (encoding choices, max_length) -> the choices with window defaults resolved, or a ConfigError; None: no rule
    windows: Callable[[EncodingSpec, int], EncodingSpec] | None = None
    one_class: bool = False  # a prediction is one class of the dataset's labels
    head: Any = None  # lightning_modules.heads: (HeadSpec, encoder, hidden size, class weights) -> head module
    export: Any = None  # ablations.run.export.ExportPart
    card: Any = None  # ablations.run.cards.CardPart
    predict: Any = None  # ablations.run.predict: (model, examples, batch size) -> one record per example


class TaskKinds(Registry[TaskKind]):
    def attach(self, name: str, **parts: Any) -> None:
        """Give built-in kind `name` the parts of the layer calling this (module docstring)."""
        self.register(name, replace(self.get(name), **parts), replace=True)

    def part(self, name: str, layer: str) -> Any:
        """Kind `name`'s part of `layer` ("head", "export", "card", "predict")."""
        value = getattr(self.get(name), layer)
        if value is None:
            raise LookupError(f"task kind '{name}' has no {layer} part")
        return value


TASK_KINDS = TaskKinds("task kind")


def kind_name(spec: DatasetSpec) -> str:
    """The task kind of dataset `spec` (module docstring)."""
    kind = TASK_TYPES.of(spec.task_type).kind
    if kind != "classification":
        return kind
    if spec.metric in RANKING_METRICS:
        return "ranking"
    return "multilabel" if spec.multi_label else "classification"


def kind_of(spec: DatasetSpec) -> TaskKind:
    return TASK_KINDS.get(kind_name(spec))


def resolve_windows(spec: DatasetSpec, encoding: EncodingSpec, max_length: int) -> EncodingSpec:
    """`encoding` with `spec`'s kind's window rules applied at `max_length` (unchanged for a kind without)."""
    windows = kind_of(spec).windows
    return encoding if windows is None else windows(encoding, max_length)


def make_encoder(spec: DatasetSpec, tokenizer: PreTrainedTokenizerBase, max_length: int,
                 encoding: EncodingSpec = EncodingSpec()) -> TaskEncoder:
    """The task encoder of dataset `spec` for `tokenizer` and `max_length`, with `encoding`'s windows resolved."""
    name = kind_name(spec)
    return TASK_KINDS.get(name).encoder(spec, tokenizer, max_length, resolve_windows(spec, encoding, max_length),
                                        name)


# -------------------------------------------------------------------------------------------- token

def _tagging_encoder(spec, tokenizer, max_length, encoding, name) -> TaskEncoder:
    return TaggingEncoder(spec, tokenizer, max_length, name, encoding.tagging, encoding.subtoken_labels)


TASK_KINDS.register("token", TaskKind(_tagging_encoder))


# --------------------------------------------------------------------------------------------- span

def qa_question_tokens(max_length: int) -> int:
    """The most question tokens a window keeps: a quarter of it, at most BioBERT's max_query_length (64)."""
    return min(64, max_length // 4)


def _qa_windows(encoding: EncodingSpec, max_length: int) -> EncodingSpec:
    """Extractive QA's windows: the stride defaults to a third of the window (BioBERT's 128 of 384), and
    must leave room for new context beside the question."""
    stride = encoding.qa_stride if encoding.qa_stride is not None else max_length // 3
    question = qa_question_tokens(max_length)
    if stride + question + 3 >= max_length:
        raise ConfigError(f"finetune.qa_stride = {stride}: windows of {max_length} tokens (finetune.max_length) "
                          f"hold a question of up to {question} tokens and 3 special tokens, so a stride of "
                          f"{stride} leaves no new context; set finetune.qa_stride below "
                          f"{max_length - question - 3} (or null: a third of the window)")
    if encoding.max_answer_length < 1:
        raise ConfigError(f"finetune.max_answer_length = {encoding.max_answer_length}: an answer has at "
                          "least one token; set it to 1 or more (BioBERT: 30)")
    return replace(encoding, qa_stride=stride)


def _span_encoder(spec, tokenizer, max_length, encoding, name) -> TaskEncoder:
    return ExtractiveQAEncoder(spec, tokenizer, max_length, name, stride=encoding.qa_stride,
                               max_question_tokens=qa_question_tokens(max_length),
                               max_answer_length=encoding.max_answer_length, merge=encoding.qa_merge)


TASK_KINDS.register("span", TaskKind(_span_encoder, windows=_qa_windows))


# ----------------------------------------------------------------- one output per example (sequence)

def _sequence_encoder(rule: SequenceLabels, check: Callable[[DatasetSpec], None] | None = None) -> EncoderFactory:
    def build(spec, tokenizer, max_length, encoding, name) -> TaskEncoder:
        if check is not None:
            check(spec)
        return SequenceEncoder(spec, tokenizer, max_length, name, rule, encoding.re_input)
    return build


def _one_label(instance: Instance) -> Any:
    """A single-label instance's class (documents carry a tuple of labels, even single-label ones)."""
    return instance.labels[0] if isinstance(instance, TextInstance) else instance.label


def _labels(spec: DatasetSpec) -> list[str]:
    return list(spec.labels)


CLASSES = SequenceLabels(width=len, names=_labels, gold=_one_label, target=lambda gold, ids: ids[gold],
                         decode=lambda raw, labels: labels[raw])
LABELS = SequenceLabels(width=len, names=_labels, gold=lambda x: tuple(x.labels),
                        target=lambda gold, ids: [1.0 if label in gold else 0.0 for label in ids],
                        decode=lambda raw, labels: tuple(label for label, on in zip(labels, raw) if on))
NUMBER = SequenceLabels(width=lambda labels: 1, names=lambda spec: [spec.name], gold=lambda x: float(x.label),
                        target=lambda gold, ids: gold, decode=lambda raw, labels: raw)
# the probability of the relevant label: the candidate's score
RELEVANCE = replace(CLASSES, decode=lambda raw, labels: float(raw))


def _check_ranking(spec: DatasetSpec) -> None:
    positive = spec.metric_args.get("positive")
    if len(spec.labels) != 2 or spec.labels[-1] != positive:
        raise ValueError(f"dataset {spec.name}: a ranking task has two labels, the relevant one "
                         f"(metric_args positive={positive!r}) last; got {list(spec.labels)}")


TASK_KINDS.register("classification", TaskKind(_sequence_encoder(CLASSES), one_class=True))
TASK_KINDS.register("multilabel", TaskKind(_sequence_encoder(LABELS)))
TASK_KINDS.register("regression", TaskKind(_sequence_encoder(NUMBER)))
TASK_KINDS.register("ranking", TaskKind(_sequence_encoder(RELEVANCE, _check_ranking)))

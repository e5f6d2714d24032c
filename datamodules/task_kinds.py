"""The task kinds: what a fine-tuned model predicts per example, one `TASK_KINDS` entry each.

    token           a tag per tagged position (NER, PICO)
    span            an answer's start and end position in a context (extractive QA)
    classification  one of the dataset's classes (relation extraction, document classification, yes/no QA)
    multilabel      any subset of the dataset's labels (HoC)
    regression      one number (sentence similarity)
    ranking         trained as two classes; predicts the relevant class's probability, which a ranking
                    metric orders (Bio-ELECTRA's answer re-ranking)

A kind owns everything that differs between them, each part in the layer it belongs to:

- here, in the data layer: its encoder factory with its label handling (`encoder`), its window and length
  rules (`windows`: extractive QA's stride default and check, run when the config is checked, before any
  run starts), and whether a prediction is one class of the labels (`one_class`: a confusion matrix shows it);
- `head` (lightning_modules/heads.py): the head module for an encoder, and so the loss and decision rule;
- `export` (ablations/run/export.py): the transformers class and problem type it exports as, from the spec;
- `card` (ablations/run/cards.py): the Hub pipeline tag and how its card says inputs are built;
- `predict` (ablations/run/predict.py): what `bioablate predict` writes for each example.

Why one registry, here, with the upper layers' parts as fields of the entry: a kind is then one entry, so
adding one is one `register` call (tests/test_conformance.py registers a new kind in a test module and
trains, exports and predicts with it), and one list of names is what every layer and the conformance tests
walk: a kind missing a part fails a test there, not at a user's first export. Registries per layer keyed by
kind name would make a new kind one entry per layer, with nothing to say which entries belong together or
that one is missing. The data layer cannot import the layers above it (tests/bioablate_core/test_layering.py), so a
built-in kind's upper parts are added by the module that uses them (`attach`, in a block at the end of
heads.py, export.py, cards.py and predict.py) and read only there, where that module has run; a kind
registered elsewhere gives all of its parts at once.

Which kind a dataset is: its `task_type` names one of the task types (datamodules/task_types.py), whose
entry names its kind (a classification task is `multilabel` where the dataset is multi-label and `ranking`
where its metric ranks: `kind_name`), or names a kind directly (a kind registered with no task type of its
own). What differs between task types of one kind (relation extraction's entities, QA's truncation) is
their entry's, not a kind's. Which fine-tuning choices apply is said per task type where each choice is
declared (bioablate_core.choices).
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
    """One task kind (module docstring). The data layer's parts are given when it is registered; `head`,
    `export`, `card` and `predict` are the upper layers' (each documents its own part's shape)."""

    encoder: EncoderFactory
    # (encoding choices, the run's max_length) -> the choices with the kind's window defaults resolved, or a
    # one-line ConfigError naming the key to change; None: the kind has no window rule
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
        """Kind `name`'s part of `layer` ("head", "export", "card", "predict"); a kind registered without
        it is a programming error, which the conformance tests catch."""
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
    """The task encoder of dataset `spec`: its kind's, with the kind's window rules applied."""
    name = kind_name(spec)
    return TASK_KINDS.get(name).encoder(spec, tokenizer, max_length, resolve_windows(spec, encoding, max_length),
                                        name)


# -------------------------------------------------------------------------------------------- token

def _tagging_encoder(spec, tokenizer, max_length, encoding, name) -> TaskEncoder:
    return TaggingEncoder(spec, tokenizer, max_length, name, encoding.tagging, encoding.subtoken_labels)


TASK_KINDS.register("token", TaskKind(_tagging_encoder))


# --------------------------------------------------------------------------------------------- span

def qa_question_tokens(max_length: int) -> int:
    """The most question tokens a window keeps: a quarter of it, at most BioBERT's max_query_length (64,
    from windows of 256 up), so that a micro window of 64 still holds context."""
    return min(64, max_length // 4)


def _qa_windows(encoding: EncodingSpec, max_length: int) -> EncodingSpec:
    """Extractive QA's windows: the stride defaults to a third of the window (BioBERT's 128 of 384), and
    what two windows share must leave room for new context beside the question and 3 special tokens."""
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

"""Task encoders: BLURB instances -> model features, and model predictions -> instance-level outputs.

One encoder per problem formulation of the paper's Table 4:

- `TaggingEncoder`   NER / PICO, token classification. Words are tokenized into sub-tokens; the tag of a
                     word sits on its first sub-token, and the prediction of that sub-token is the word's
                     prediction. Tags are decoded back to spans before scoring, so every scheme is scored
                     on the same entity-level footing.
- `SequenceEncoder`  everything scored on [CLS]: relation extraction (dummified sentence), document
                     classification (multi-label), sentence similarity (regression), QA
                     ("[CLS] Q [SEP] T [SEP]").

Encoders hold no model state; the LightningModule calls `collect` with its raw per-batch predictions and
`score` with the collected instance-level predictions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Sequence

import torch
from transformers import PreTrainedTokenizerBase

from datamodules.instances import (Instance, PairInstance, RelationInstance, Span, TaggingInstance,
                                   TextInstance, iob_to_spans)
from datamodules.registry import DatasetSpec
from datamodules.relation_inputs import dummify

IGNORE_INDEX = -100  # label of positions the loss skips (non-first sub-tokens, specials, padding)

Features = dict[str, Any]


class TaskEncoder(ABC):
    """The interface the datamodule and the LightningModule rely on."""

    head: str  # "token", "classification", "multilabel" or "regression": picks the model's head

    def __init__(self, spec: DatasetSpec, tokenizer: PreTrainedTokenizerBase, max_length: int):
        self.spec, self.tokenizer, self.max_length = spec, tokenizer, max_length

    @property
    @abstractmethod
    def num_labels(self) -> int:
        """Width of the model's output layer."""

    @abstractmethod
    def encode(self, instances: Sequence[Instance]) -> list[Features]:
        """Tokenize a split; each feature has input_ids, attention_mask, token_type_ids, labels."""

    @abstractmethod
    def collect(self, batch: dict[str, torch.Tensor], predictions: torch.Tensor) -> list[Any]:
        """One batch of raw predictions -> one plain-Python raw prediction per example, in batch order."""

    @abstractmethod
    def decode(self, feature: Features, raw: Any) -> Any:
        """A raw prediction -> the instance-level prediction that the metric scores."""

    @abstractmethod
    def gold(self, instance: Instance) -> Any:
        """The instance-level gold answer, in the same form as `decode`'s output."""

    def score(self, instances: Sequence[Instance], predictions: Sequence[Any]) -> dict[str, float]:
        from lightning_modules.metrics import METRICS  # metrics live with the models they score

        golds = [self.gold(x) for x in instances]
        return METRICS[self.spec.metric](golds, list(predictions), **self._metric_args(instances))

    def _metric_args(self, instances: Sequence[Instance]) -> dict[str, Any]:
        return dict(self.spec.metric_args)

    def to_json(self, prediction: Any) -> Any:
        """A prediction as JSON (for the test-predictions artifact)."""
        return prediction


class TaggingEncoder(TaskEncoder):
    """BIO tagging over the dataset's span types; the word's first sub-token carries its tag."""

    head = "token"

    def __init__(self, spec: DatasetSpec, tokenizer: PreTrainedTokenizerBase, max_length: int):
        super().__init__(spec, tokenizer, max_length)
        self.tags = ["O"] + [f"{p}-{label}" for label in spec.labels for p in "BI"]
        self.tag_ids = {t: i for i, t in enumerate(self.tags)}

    @property
    def num_labels(self) -> int:
        return len(self.tags)

    def encode_tags(self, instance: TaggingInstance) -> list[str]:
        tags = ["O"] * len(instance.tokens)
        for span in instance.spans:
            tags[span.start] = f"B-{span.label}"
            for i in range(span.start + 1, span.end):
                tags[i] = f"I-{span.label}"
        return tags

    def decode_tags(self, tags: Sequence[str]) -> tuple[Span, ...]:
        return iob_to_spans(tags)

    def encode(self, instances: Sequence[TaggingInstance]) -> list[Features]:
        enc = self.tokenizer([list(x.tokens) for x in instances], is_split_into_words=True,
                             truncation=True, max_length=self.max_length)
        features = []
        for i, instance in enumerate(instances):
            tag_ids = [self.tag_ids[t] for t in self.encode_tags(instance)]
            labels, starts, seen = [], [], set()
            for word in enc.word_ids(i):
                first = word is not None and word not in seen
                seen.add(word)
                labels.append(tag_ids[word] if first else IGNORE_INDEX)
                if first:
                    starts.append(word)
            features.append({"input_ids": enc["input_ids"][i], "attention_mask": enc["attention_mask"][i],
                             "token_type_ids": enc["token_type_ids"][i], "labels": labels,
                             "_word_ids": starts, "_length": len(instance.tokens)})
        return features

    def collect(self, batch, predictions):
        mask = batch["labels"] != IGNORE_INDEX
        return [predictions[row][mask[row]].tolist() for row in range(len(predictions))]

    def decode(self, feature: Features, raw: list[int]) -> tuple[Span, ...]:
        """Tag ids of the words' first sub-tokens -> spans over all words (truncated words get O)."""
        tags = ["O"] * feature["_length"]
        for word, tag_id in zip(feature["_word_ids"], raw):
            tags[word] = self.tags[tag_id]
        return self.decode_tags(tags)

    def gold(self, instance: TaggingInstance) -> tuple[Span, ...]:
        return instance.spans

    def _metric_args(self, instances):
        args = dict(self.spec.metric_args)
        if self.spec.metric == "pico_word_macro_f1":
            args["lengths"] = [len(x.tokens) for x in instances]
        return args

    def to_json(self, prediction):
        return [[s.start, s.end, s.label] for s in prediction]


class SequenceEncoder(TaskEncoder):
    """[CLS]-based prediction: relation extraction, document classification, similarity and QA."""

    def __init__(self, spec: DatasetSpec, tokenizer: PreTrainedTokenizerBase, max_length: int):
        super().__init__(spec, tokenizer, max_length)
        self.labels = list(spec.labels)
        self.label_ids = {label: i for i, label in enumerate(self.labels)}
        if spec.task_type == "similarity":
            self.head = "regression"
        elif spec.multi_label:
            self.head = "multilabel"
        else:
            self.head = "classification"

    @property
    def num_labels(self) -> int:
        return 1 if self.head == "regression" else len(self.labels)

    def texts(self, instance: Instance) -> tuple[str, str | None]:
        if isinstance(instance, RelationInstance):
            return dummify(instance), None
        if isinstance(instance, TextInstance):
            return instance.text, None
        if isinstance(instance, PairInstance):
            return instance.text_a, instance.text_b
        raise TypeError(f"{self.spec.name}: cannot encode {type(instance).__name__} as a sequence")

    def label(self, instance: Instance) -> Any:
        gold = self.gold(instance)
        if self.head == "regression":
            return gold
        if self.head == "multilabel":
            return [1.0 if label in gold else 0.0 for label in self.labels]
        return self.label_ids[gold]

    def encode(self, instances: Sequence[Instance]) -> list[Features]:
        pairs = [self.texts(x) for x in instances]
        first = [a for a, _ in pairs]
        second = [b for _, b in pairs] if pairs and pairs[0][1] is not None else None
        # QA keeps the whole question and truncates the reference text; pairs of sentences share the cut.
        truncation = "only_second" if second is not None and self.spec.task_type == "qa" else True
        enc = self.tokenizer(first, second, truncation=truncation, max_length=self.max_length)
        return [{"input_ids": enc["input_ids"][i], "attention_mask": enc["attention_mask"][i],
                 "token_type_ids": enc["token_type_ids"][i], "labels": self.label(x)}
                for i, x in enumerate(instances)]

    def collect(self, batch, predictions):
        return predictions.tolist()

    def decode(self, feature: Features, raw: Any) -> Any:
        if self.head == "classification":
            return self.labels[raw]
        if self.head == "multilabel":
            return tuple(label for label, on in zip(self.labels, raw) if on)
        return raw

    def gold(self, instance: Instance) -> Any:
        if isinstance(instance, TextInstance):  # documents carry a tuple of labels, even single-label ones
            return tuple(instance.labels) if self.head == "multilabel" else instance.labels[0]
        return float(instance.label) if self.head == "regression" else instance.label


def make_encoder(spec: DatasetSpec, tokenizer: PreTrainedTokenizerBase, max_length: int) -> TaskEncoder:
    if spec.task_type in ("ner", "pico"):
        return TaggingEncoder(spec, tokenizer, max_length)
    return SequenceEncoder(spec, tokenizer, max_length)

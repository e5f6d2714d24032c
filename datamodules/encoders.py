"""Task encoders: BLURB instances -> model features, and model predictions -> instance-level outputs.

One encoder per problem formulation of the paper's Table 4:

- `TaggingEncoder`: NER / PICO. Word spans are tagged by the scheme on each word's first sub-token or
  every sub-token, and decoded back to word spans before scoring, so every choice is scored alike.
- `SequenceEncoder`: everything scored on one vector: relation extraction, classification, similarity, QA.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Sequence

from transformers import PreTrainedTokenizerBase

from datamodules.instances import Instance, PairInstance, RelationInstance, Span, TaggingInstance
from datamodules.qa_merges import QA_MERGES
from datamodules.relation_inputs import MARKERS, RE_INPUTS, get_transform
from datamodules.spec import DatasetSpec
from datamodules.tagging import SCHEMES, SUBTOKEN_LABELS, get_scheme  # importers find them here too
from datamodules.task_encoder import Features, TaskEncoder  # importers find them here too
from datamodules.task_types import TASK_TYPES

# the label of positions a loss skips, for fine-tuning and pretraining alike
IGNORE_INDEX = -100



class TaggingEncoder(TaskEncoder):
    """Tags on the tagged positions; `subtoken_labels` picks which positions those are."""

    position_labels = True

    def __init__(self, spec: DatasetSpec, tokenizer: PreTrainedTokenizerBase, max_length: int,
                 output_kind: str, scheme: str = "bio", subtoken_labels: str = "first"):
        super().__init__(spec, tokenizer, max_length)
        self.output_kind = output_kind
        SUBTOKEN_LABELS.get(subtoken_labels)  # an unknown choice fails here
        self.scheme, self.subtoken_labels = get_scheme(scheme), subtoken_labels
        self.tags = self.scheme.tags(spec.labels)
        self.tag_ids = {t: i for i, t in enumerate(self.tags)}

    @property
    def num_labels(self) -> int:
        return len(self.tags)

    def label_names(self) -> list[str]:
        return list(self.tags)

    def units(self, word_ids: list[int | None]) -> tuple[list[int], list[int]]:
        """(token positions that carry a tag, the word of each): first sub-tokens, or all sub-tokens."""
        positions, words, seen = [], [], set()
        for position, word in enumerate(word_ids):
            if word is None or (self.subtoken_labels == "first" and word in seen):
                continue
            seen.add(word)
            positions.append(position)
            words.append(word)
        return positions, words

    @staticmethod
    def unit_spans(spans: Sequence[Span], unit_words: list[int]) -> list[Span]:
        """Word spans -> spans over units (a span cut off entirely by truncation disappears)."""
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for unit, word in enumerate(unit_words):
            first.setdefault(word, unit)
            last[word] = unit
        out = []
        for span in spans:
            present = [w for w in range(span.start, span.end) if w in first]
            if present:
                out.append(Span(first[present[0]], last[present[-1]] + 1, span.label))
        return out

    def encode(self, instances: Sequence[TaggingInstance]) -> list[Features]:
        enc = self.tokenizer([list(x.tokens) for x in instances], is_split_into_words=True,
                             truncation=True, max_length=self.max_length)
        features = []
        for i, instance in enumerate(instances):
            positions, unit_words = self.units(enc.word_ids(i))
            tags = self.scheme.encode(self.unit_spans(instance.spans, unit_words), len(unit_words))
            length = len(enc["input_ids"][i])
            labels, tag_mask = [IGNORE_INDEX] * length, [0] * length
            for position, tag in zip(positions, tags):
                labels[position], tag_mask[position] = self.tag_ids[tag], 1
            features.append({"input_ids": enc["input_ids"][i], "attention_mask": enc["attention_mask"][i],
                             "token_type_ids": enc["token_type_ids"][i], "labels": labels,
                             "tag_mask": tag_mask, "_unit_words": unit_words})
        return features

    def gather(self, batch, predictions):
        mask = batch["tag_mask"].bool()
        return predictions[mask], mask.sum(1)

    def unpack(self, values, counts):
        flat, out, start = values.tolist(), [], 0
        for count in counts.tolist():
            out.append(flat[start:start + count])
            start += count
        return out

    def decode(self, feature: Features, raw: list[int]) -> tuple[Span, ...]:
        """Tag ids of the tagged positions -> word spans (words cut off by truncation predict nothing)."""
        words = feature["_unit_words"]
        spans = self.scheme.decode([self.tags[t] for t in raw])
        return tuple(Span(words[s.start], words[s.end - 1] + 1, s.label) for s in spans)

    def gold(self, instance: TaggingInstance) -> tuple[Span, ...]:
        return instance.spans

    def _metric_args(self, instances):
        args = dict(self.spec.metric_args)
        if self.spec.metric == "pico_word_macro_f1":
            args["lengths"] = [len(x.tokens) for x in instances]
        return args

    def to_json(self, prediction):
        return [[s.start, s.end, s.label] for s in prediction]


@dataclass(frozen=True)
class SequenceLabels:
    """A sequence task kind's label handling (task_kinds.py registers one per kind)."""

    width: Callable[[list[str]], int]  # the output layer's width
    names: Callable[[DatasetSpec], list[str]]  # the output layer's label of each index
    gold: Callable[[Instance], Any]  # the instance-level answer, as `decode` gives predictions
    target: Callable[[Any, dict[str, int]], Any]  # a gold answer -> what the loss reads (label ids given)
    decode: Callable[[Any, list[str]], Any]  # a raw prediction (the head's `predict`) -> an answer


class SequenceEncoder(TaskEncoder):
    """One prediction per sequence, for task kind `output_kind` with its label handling `rule`."""

    def __init__(self, spec: DatasetSpec, tokenizer: PreTrainedTokenizerBase, max_length: int,
                 output_kind: str, rule: SequenceLabels, re_input: str = "dummify"):
        super().__init__(spec, tokenizer, max_length)
        self.output_kind, self.rule = output_kind, rule
        self.labels = list(spec.labels)
        self.label_ids = {label: i for i, label in enumerate(self.labels)}
        # a relation's entities, and how a pair too long is cut: its task type's
        task_type = TASK_TYPES.of(spec.task_type)
        self.relation, self.truncation = task_type.relation, task_type.truncation
        self.transform = get_transform(re_input)
        if self.relation and re_input == "markers":
            # single tokens, never split or lowercased; the model's embeddings are resized to match
            tokenizer.add_special_tokens({"additional_special_tokens": list(MARKERS)})

    @property
    def num_labels(self) -> int:
        return self.rule.width(self.labels)

    def label_names(self) -> list[str]:
        return self.rule.names(self.spec)

    def label(self, instance: Instance) -> Any:
        return self.rule.target(self.gold(instance), self.label_ids)

    def encode(self, instances: Sequence[Instance]) -> list[Features]:
        if self.relation:
            return self._encode_relations(instances)
        if isinstance(instances[0], PairInstance):
            first, second = [x.text_a for x in instances], [x.text_b for x in instances]
        else:
            first, second = [x.text for x in instances], None
        enc = self.tokenizer(first, second, truncation=self.truncation, max_length=self.max_length)
        return [{"input_ids": enc["input_ids"][i], "attention_mask": enc["attention_mask"][i],
                 "token_type_ids": enc["token_type_ids"][i], "labels": self.label(x)}
                for i, x in enumerate(instances)]

    def _encode_relations(self, instances: Sequence[RelationInstance]) -> list[Features]:
        """Transformed text, each entity's token mask, and each start marker's index (0 where there is none)."""
        texts = [self.transform(x) for x in instances]
        enc = self.tokenizer([t.text for t in texts], truncation=True, max_length=self.max_length,
                             return_offsets_mapping=True)
        features = []
        for i, (instance, text) in enumerate(zip(instances, texts)):
            offsets = enc["offset_mapping"][i]
            def covers(span):  # tokens overlapping the character range
                return [int(e > s and s < span[1] and e > span[0]) for s, e in offsets]
            def token_at(char):
                return next((k for k, (s, e) in enumerate(offsets) if e > s and s == char), 0)
            features.append({
                "input_ids": enc["input_ids"][i], "attention_mask": enc["attention_mask"][i],
                "token_type_ids": enc["token_type_ids"][i], "labels": self.label(instance),
                "head_mask": covers(text.head), "tail_mask": covers(text.tail),
                "head_start": token_at(text.head_marker) if text.head_marker is not None else 0,
                "tail_start": token_at(text.tail_marker) if text.tail_marker is not None else 0,
            })
        return features

    def _metric_args(self, instances: Sequence[Instance]) -> dict[str, Any]:
        """A metric that scores groups (a ranking ranks each question's candidates) gets each pair's group."""
        args = dict(self.spec.metric_args)
        if self.group_by is not None:
            args["groups"] = [getattr(x, self.group_by) for x in instances]
        return args

    def decode(self, feature: Features, raw: Any) -> Any:
        return self.rule.decode(raw, self.labels)

    def gold(self, instance: Instance) -> Any:
        return self.rule.gold(instance)


@dataclass(frozen=True)
class EncodingSpec:
    """The `finetune.*` encoding choices, built once from the config; an exported model records them, so
    `predict` rebuilds the same encoder."""

    tagging: str = SCHEMES.default
    subtoken_labels: str = SUBTOKEN_LABELS.default
    re_input: str = RE_INPUTS.default
    # extractive QA's windows: tokens two windows share (None: the span kind's default) and the longest answer
    qa_stride: int | None = None
    max_answer_length: int = 30
    # decoding only, so every rule shares the tokenization cache
    qa_merge: str = QA_MERGES.default

    @classmethod
    def from_config(cls, finetune_cfg: Any) -> EncodingSpec:
        return cls(**{key: finetune_cfg[key] for key in cls.__dataclass_fields__})

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> EncodingSpec:
        """An exported model's record; one from before the QA keys existed gets their defaults."""
        defaults = cls()
        return cls(**{key: metadata.get(key, getattr(defaults, key)) for key in cls.__dataclass_fields__})

    def metadata(self) -> dict[str, str]:
        return asdict(self)

    def cache_key(self) -> dict[str, str]:
        """The keys that shape the encoded features (what the tokenization cache is keyed by)."""
        return {key: value for key, value in asdict(self).items() if key != "qa_merge"}

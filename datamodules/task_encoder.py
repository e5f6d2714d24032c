"""The interface every task encoder implements, apart from the encoders so task_kinds.py can import each."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Sequence

import torch
from transformers import PreTrainedTokenizerBase

from datamodules.instances import Instance
from datamodules.metrics import METRICS
from datamodules.spec import DatasetSpec

Features = dict[str, Any]

# metrics that score groups of instances: a question's ranked candidates, or its answers over its snippets
RANKING_METRICS = ("mean_reciprocal_rank",)
QUESTION_LEVEL_METRICS = ("bioasq_factoid", "bioasq_list")


def scoring_group(spec: DatasetSpec) -> str | None:
    """The instance attribute whose equal values `spec`'s metric scores together, or None."""
    if spec.metric in RANKING_METRICS:
        return "text_a"
    if spec.metric in QUESTION_LEVEL_METRICS:  # extractive QA's (QAInstance.question_id)
        return "question_id"
    return None


class TaskEncoder(ABC):
    """The interface the datamodule and the LightningModule rely on."""

    # the task kind it encodes for (a TASK_KINDS name), which picks the head, loss, export and decoding
    output_kind: str
    # True: `labels` holds one label per input position (padded as the positions are), not one per example
    position_labels: bool = False

    def __init__(self, spec: DatasetSpec, tokenizer: PreTrainedTokenizerBase, max_length: int):
        self.spec, self.tokenizer, self.max_length = spec, tokenizer, max_length
        self.group_by = scoring_group(spec)  # what the metric scores together (None: each instance)

    @property
    @abstractmethod
    def num_labels(self) -> int:
        """Width of the model's output layer."""

    @abstractmethod
    def label_names(self) -> list[str]:
        """The output layer's label of each index (an exported model's id2label)."""

    @abstractmethod
    def encode(self, instances: Sequence[Instance]) -> list[Features]:
        """Tokenize a split; each feature has input_ids, attention_mask, token_type_ids, labels."""

    def gather(self, batch: dict[str, torch.Tensor], predictions: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """One batch of predictions -> (values, counts): each example's rows in batch order and how many.
        Tensor ops only, since it runs in the evaluation loop; `unpack` makes Python of them once per epoch."""
        return predictions, torch.ones(len(predictions), dtype=torch.long, device=predictions.device)

    def unpack(self, values: torch.Tensor, counts: torch.Tensor) -> list[Any]:
        """Concatenated `gather` outputs -> one plain-Python raw prediction per example."""
        return values.tolist()

    @abstractmethod
    def decode(self, feature: Features, raw: Any) -> Any:
        """A raw prediction -> the instance-level prediction that the metric scores."""

    def decode_split(self, instances: Sequence[Instance], examples: Sequence[Features],
                     raws: Sequence[Any]) -> list[Any]:
        """Every row of a split (`examples[i]`: its bookkeeping, `raws[i]`: its raw prediction) -> one
        prediction per instance of `instances`."""
        return [self.decode(example, raw) for example, raw in zip(examples, raws)]

    def encoded_instances(self, split: Any) -> int:
        """How many instances a stored split (`finetune_data.EncodedSplit`) covers; default one row each."""
        return len(split)

    @abstractmethod
    def gold(self, instance: Instance) -> Any:
        """The instance-level gold answer, in the same form as `decode`'s output."""

    def score(self, instances: Sequence[Instance], predictions: Sequence[Any]) -> dict[str, float]:
        golds = [self.gold(x) for x in instances]
        return METRICS.get(self.spec.metric)(golds, list(predictions), **self._metric_args(instances))

    def _metric_args(self, instances: Sequence[Instance]) -> dict[str, Any]:
        return dict(self.spec.metric_args)

    def to_json(self, prediction: Any) -> Any:
        """A prediction as JSON (for the test-predictions artifact)."""
        return prediction

    def question_records(self, instances: Sequence[Instance], predictions: Sequence[Any]) -> list[dict[str, Any]]:
        """Per-question answers where a question spans several instances (extractive QA), else []."""
        return []

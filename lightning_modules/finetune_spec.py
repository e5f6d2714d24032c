"""A fine-tuning run's modelling choices (paper Sec. 2.4, Tables 12-14), built once from the config.

    spec = FinetuneSpec.from_config(cfg.finetune, dataset)     # every choice checked against the task
    encoder = make_encoder(dataset, tokenizer, max_length, spec.encoding)  # datamodules.task_kinds
    head = spec.head.build(encoder, hidden_size)                            # the encoder's task kind's head

The choices live with the layer that uses them; this module checks them together, since one may require
another (entity-start features need the markers input).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from datamodules.encoders import EncodingSpec
from datamodules.spec import DatasetSpec

# every `finetune.<key>` that names an option, torch-free (importers find them here too)
from lightning_modules.choice_names import CHOICES, check_choices, describe  # noqa: F401
from lightning_modules.heads import HeadSpec


@dataclass(frozen=True)
class FinetuneSpec:
    encoding: EncodingSpec
    head: HeadSpec

    @classmethod
    def from_config(cls, finetune_cfg: Any, dataset: DatasetSpec) -> FinetuneSpec:
        """A one-line ConfigError for an unknown option, one not for `dataset`'s task type, or one missing another."""
        check_choices({choice.key: finetune_cfg[choice.key] for choice in CHOICES}, dataset)
        return cls(EncodingSpec.from_config(finetune_cfg), HeadSpec.from_config(finetune_cfg, dataset.task_type))

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> FinetuneSpec:
        """What an exported model folder recorded (`metadata()`), as the spec it was trained with."""
        return cls(EncodingSpec.from_metadata(metadata), HeadSpec.from_metadata(metadata))

    def metadata(self) -> dict[str, Any]:
        return {**self.encoding.metadata(), **self.head.metadata()}

"""A fine-tuning run's modelling choices (paper Sec. 2.4, Tables 12-14), built once from the config.

    spec = FinetuneSpec.from_config(cfg.finetune, dataset)     # every choice checked against the task
    encoder = make_encoder(dataset, tokenizer, max_length, spec.encoding)
    head = spec.head.build(encoder, hidden_size)

The choices themselves live with the layer that uses them, each a `core.choices.Choice` whose options
declare the task types they apply to: the encoding choices in the data layer (`datamodules.tagging`,
`datamodules.encoders`, `datamodules.relation_inputs`, `datamodules.qa_spans`), the head's in
`lightning_modules.heads`. This module only lists them (in `bioablate list variants` order) and checks
them together, since one choice may require another (entity-start features need the markers input).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from core.choices import Choice
from datamodules.encoders import SUBTOKEN_LABELS, EncodingSpec
from datamodules.qa_spans import QA_MERGES
from datamodules.relation_inputs import RE_INPUTS
from datamodules.spec import DatasetSpec
from datamodules.tagging import SCHEMES
from lightning_modules.heads import CLASSIFIERS, HEADS, RE_FEATURES, HeadSpec

# Every `finetune.<key>` that names an option: the keys of FinetuneConfig that are choices.
CHOICES: tuple[Choice, ...] = (SCHEMES, HEADS, SUBTOKEN_LABELS, RE_INPUTS, RE_FEATURES, CLASSIFIERS, QA_MERGES)


@dataclass(frozen=True)
class FinetuneSpec:
    encoding: EncodingSpec
    head: HeadSpec

    @classmethod
    def from_config(cls, finetune_cfg: Any, dataset: DatasetSpec) -> FinetuneSpec:
        """Raises a one-line ConfigError for an unknown option, one that does not apply to `dataset`'s
        task type, or one missing another choice it requires."""
        check_choices({choice.key: finetune_cfg[choice.key] for choice in CHOICES}, dataset)
        return cls(EncodingSpec.from_config(finetune_cfg), HeadSpec.from_config(finetune_cfg, dataset.task_type))

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> FinetuneSpec:
        """What an exported model folder recorded (`metadata()`), as the spec it was trained with."""
        return cls(EncodingSpec.from_metadata(metadata), HeadSpec.from_metadata(metadata))

    def metadata(self) -> dict[str, Any]:
        return {**self.encoding.metadata(), **self.head.metadata()}


def check_choices(chosen: Mapping[str, str], dataset: DatasetSpec) -> None:
    for choice in CHOICES:
        choice.check(chosen[choice.key], dataset.task_type, chosen, dataset.name)


def describe() -> str:
    """Every choice, its options and where they apply (for `bioablate list variants`)."""
    def option(choice: Choice, name: str) -> str:
        where = choice.task_types(name)
        notes = ([", ".join(where)] if where is not None else []) + \
            [f"needs {key}={value}" for key, value in choice.requires(name).items()]
        return f"{name} ({'; '.join(notes)})" if notes else name

    return "\n".join(f"finetune.{choice.key:<16} {', '.join(option(choice, name) for name in choice)}\n"
                     f"{'':<26}default {choice.default}; {choice.description}" for choice in CHOICES)

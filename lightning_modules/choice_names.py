"""Every config key that names an option, torch-free, so a misspelt option (`finetune.head=crff`) is answered
before torch or Lightning are imported. The heads' options are registered here whole (name, task types,
entry); heads.py builds them. Pretraining's objectives and optimizers are registered where implemented.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from bioablate_core.choices import Choice
from datamodules.pretrain.choice_names import MASKING_MODES, SCHEDULES
from datamodules.qa_merges import QA_MERGES
from datamodules.relation_inputs import RE_INPUTS, RELATION_TASK_TYPES
from datamodules.tagging import SCHEMES, SUBTOKEN_LABELS, TAGGED_TASK_TYPES
from datamodules.task_types import TASK_TYPES


@dataclass(frozen=True)
class HeadLayers:
    """What a `finetune.head` option puts around the output layer."""

    # hidden size -> a module between the encoder and the output layer, or None
    layer: Callable[[int], Any] | None = None
    crf: bool = False  # a CRF over the output layer's emissions: needs a sequence of tags


def bilstm(hidden_size: int) -> Any:
    from lightning_modules.bilstm import BiLSTM  # torch loads when a model is built, not for a name check
    return BiLSTM(hidden_size)


HEADS: Choice[HeadLayers] = Choice("finetune.head", "layers around the output layer (Table 12)")
HEADS.register("linear", HeadLayers())
HEADS.register("bilstm", HeadLayers(layer=bilstm))
HEADS.register("crf", HeadLayers(crf=True), task_types=TAGGED_TASK_TYPES)
HEADS.register("bilstm-crf", HeadLayers(layer=bilstm, crf=True), task_types=TAGGED_TASK_TYPES)


@dataclass(frozen=True)
class Featurizer:
    """A `finetune.re_feature`: the `vectors` vectors of width H one sequence is classified from."""

    vectors: int
    build: Callable[[Any, Mapping[str, Any]], tuple[Any, ...]]


def _max_pool(hidden, mask):
    """Max over the mention's tokens; a mention cut off by truncation falls back to [CLS]."""
    pooled = hidden.masked_fill(~mask.bool()[..., None], float("-inf")).amax(1)
    return pooled.where(mask.any(1, keepdim=True), hidden[:, 0])


def _start(hidden, starts):
    return hidden.take_along_dim(starts.view(-1, 1, 1), 1).squeeze(1)


RE_FEATURES: Choice[Featurizer] = Choice("finetune.re_feature", "relation featurizer (Table 14)")
# [CLS]; every non-RE sequence task uses it
RE_FEATURES.register("cls", Featurizer(1, lambda hidden, batch: (hidden[:, 0],)))
# entity tokens max-pooled
RE_FEATURES.register("mention", Featurizer(2, lambda hidden, batch: (_max_pool(hidden, batch["head_mask"]),
                                                                    _max_pool(hidden, batch["tail_mask"]))),
                     task_types=RELATION_TASK_TYPES)
# the [E1], [E2] marker tokens: only the markers input has them
RE_FEATURES.register("entity-start", Featurizer(2, lambda hidden, batch: (_start(hidden, batch["head_start"]),
                                                                         _start(hidden, batch["tail_start"]))),
                     task_types=RELATION_TASK_TYPES, requires={"re_input": "markers"})


def _linear(width: int, hidden_size: int, num_labels: int, dropout: float) -> Any:
    from torch import nn  # torch loads when a model is built, not for a name check
    return nn.Linear(width, num_labels)


def _mlp(width: int, hidden_size: int, num_labels: int, dropout: float) -> Any:
    from torch import nn
    return nn.Sequential(nn.Linear(width, hidden_size), nn.GELU(), nn.Dropout(dropout),
                         nn.Linear(hidden_size, num_labels))


# A `finetune.classifier`: (feature width, hidden size, labels, dropout) -> the output layer.
CLASSIFIERS: Choice[Callable[..., Any]] = Choice("finetune.classifier", "classification layer on the sequence feature")
SEQUENCE_TASK_TYPES = TASK_TYPES.names(lambda t: t.sequence)
CLASSIFIERS.register("linear", _linear, task_types=SEQUENCE_TASK_TYPES)
CLASSIFIERS.register("mlp", _mlp, task_types=SEQUENCE_TASK_TYPES)

# in `bioablate list variants` order
CHOICES: tuple[Choice, ...] = (SCHEMES, HEADS, SUBTOKEN_LABELS, RE_INPUTS, RE_FEATURES, CLASSIFIERS, QA_MERGES)

# Pretraining's choices apply to every corpus: checked by name. The first option is the schema's default.
OBJECTIVES: Choice[Callable[..., Any]] = Choice("pretrain.objective", "what is pretrained: BERT's MLM (+ NSP), "
                                                "ALBERT's MLM + SOP, or ELECTRA's replaced-token detection",
                                                implemented_in="lightning_modules.pretrain_models")
for _name in ("bert", "albert", "electra"):
    OBJECTIVES.declare(_name)
OPTIMIZERS: Choice[Callable[..., dict]] = Choice("pretrain.optimizer", "optimizer with linear warmup and decay",
                                                 implemented_in="lightning_modules.pretrain")
OPTIMIZERS.declare("adamw")
OPTIMIZERS.declare("lamb")
PRETRAIN_CHOICES: tuple[Choice, ...] = (OBJECTIVES, MASKING_MODES, SCHEDULES, OPTIMIZERS)


def check_choices(chosen: Mapping[str, str], dataset) -> None:
    """Each choice in `chosen` ({key: option}) may be used on `dataset` (a DatasetSpec) beside the others."""
    for choice in CHOICES:
        choice.check(chosen[choice.key], dataset.task_type, chosen, dataset.name)


def check_pretrain_choices(pretrain: Mapping[str, str]) -> None:
    """Each pretraining choice in the `pretrain` config section names one of its options."""
    for choice in PRETRAIN_CHOICES:
        choice.check_name(pretrain[choice.key])


def describe() -> str:
    """Every choice, its options and where they apply (for `bioablate list variants`)."""
    def option(choice: Choice, name: str) -> str:
        where = choice.task_types(name)
        notes = ([", ".join(where)] if where is not None else []) + \
            [f"needs {key}={value}" for key, value in choice.requires(name).items()]
        return f"{name} ({'; '.join(notes)})" if notes else name

    return "\n".join(f"{choice.kind:<25} {', '.join(option(choice, name) for name in choice)}\n"
                     f"{'':<26}default {choice.default}; {choice.description}"
                     for choice in (*CHOICES, *PRETRAIN_CHOICES))

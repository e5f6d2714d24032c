"""Every config key that names an option (`finetune.head`, `pretrain.masking`, ...), with its options'
names and where they apply: torch-free, so a misspelt option (`finetune.head=crff`, `--masking wmm`) is
answered before Lightning, MLflow, transformers or torch are imported (ablations.checks.check_names, called
as a config is built).

The heads' choices and pretraining's objectives and optimizers are declared here and implemented in
lightning_modules/heads.py, pretrain_models.py and pretrain.py (whose `register` calls give each option
its entry); the data layer's choices (tagging, sub-token labels, relation inputs, masking) are torch-free
where they live. lightning_modules/finetune_spec.py builds the fine-tuning choices into a model.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from bioablate_core.choices import Choice
from datamodules.pretrain.choice_names import MASKING_MODES, SCHEDULES
from datamodules.qa_merges import QA_MERGES
from datamodules.relation_inputs import RE_INPUTS, RELATION_TASK_TYPES
from datamodules.tagging import SCHEMES, SUBTOKEN_LABELS, TAGGED_TASK_TYPES
from datamodules.task_types import TASK_TYPES

HEADS: Choice[Any] = Choice("finetune.head", "layers around the output layer (Table 12)",
                            implemented_in="lightning_modules.heads")
HEADS.declare("linear")
HEADS.declare("bilstm")
HEADS.declare("crf", task_types=TAGGED_TASK_TYPES)
HEADS.declare("bilstm-crf", task_types=TAGGED_TASK_TYPES)

RE_FEATURES: Choice[Any] = Choice("finetune.re_feature", "relation featurizer (Table 14)",
                                  implemented_in="lightning_modules.heads")
RE_FEATURES.declare("cls")  # [CLS]; every non-RE sequence task uses it
RE_FEATURES.declare("mention", task_types=RELATION_TASK_TYPES)  # entity tokens max-pooled
RE_FEATURES.declare("entity-start", task_types=RELATION_TASK_TYPES,  # the [E1], [E2] marker tokens: only the markers
                    requires={"re_input": "markers"})  # input has them

# A `finetune.classifier`: (feature width, hidden size, labels, dropout) -> the output layer.
CLASSIFIERS: Choice[Callable[..., Any]] = Choice("finetune.classifier", "classification layer on the sequence feature",
                                                 implemented_in="lightning_modules.heads")
SEQUENCE_TASK_TYPES = TASK_TYPES.names(lambda t: t.sequence)
CLASSIFIERS.declare("linear", task_types=SEQUENCE_TASK_TYPES)
CLASSIFIERS.declare("mlp", task_types=SEQUENCE_TASK_TYPES)

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

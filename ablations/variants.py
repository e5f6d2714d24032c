"""The fine-tuning modeling choices (paper Sec. 2.4, Tables 12-14) as config strings: what each key
accepts, which tasks it applies to, and which combinations are valid.

A choice that does not apply to a task (a CRF for relation extraction, a tagging scheme for QA) is an
error rather than silently ignored, so a run's recorded params always describe the model it trained.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import ConfigError
from core.registry import Registry
from datamodules.encoders import SUBTOKEN_LABELS
from datamodules.relation_inputs import RE_INPUTS
from datamodules.spec import DatasetSpec
from datamodules.tagging import SCHEMES
from lightning_modules.heads import CLASSIFIERS, RE_FEATURES, SEQUENCE_HEADS, TOKEN_HEADS

TOKEN_TASKS = ("ner", "pico")


@dataclass(frozen=True)
class Variant:
    key: str
    default: str
    task_types: tuple[str, ...]
    description: str
    registry: Registry  # the choices (for `head`, those of token tasks; SEQUENCE_HEADS for the others)


VARIANTS: Registry[Variant] = Registry("finetune variant")  # the `finetune.*` keys, in `list` order
for _variant in (
    Variant("tagging", "bio", TOKEN_TASKS, "tagging scheme (Table 13)", SCHEMES),
    Variant("head", "linear", ("ner", "pico", "re", "similarity", "classification", "qa"),
            "layer over the encoder (Table 12); crf / bilstm-crf for NER and PICO only", TOKEN_HEADS),
    Variant("subtoken_labels", "first", TOKEN_TASKS,
            "which sub-tokens carry a word's tag (evaluation is per word either way)", SUBTOKEN_LABELS),
    Variant("re_input", "dummify", ("re",), "relation input transform (Table 14)", RE_INPUTS),
    Variant("re_feature", "cls", ("re",), "relation featurizer (Table 14)", RE_FEATURES),
    Variant("classifier", "linear", ("re", "similarity", "classification", "qa"),
            "classification layer on the sequence feature", CLASSIFIERS),
):
    VARIANTS.register(_variant.key, _variant)


def choices(key: str, task_type: str | None = None) -> tuple[str, ...]:
    if key == "head" and task_type is not None and task_type not in TOKEN_TASKS:
        return tuple(SEQUENCE_HEADS)
    return tuple(VARIANTS.get(key).registry)


def check_variants(finetune_cfg, spec: DatasetSpec) -> None:
    """Raise a one-line ConfigError for an unknown choice or one that does not apply to `spec`."""
    for key, variant in VARIANTS.items():
        value = finetune_cfg[key]
        if value == variant.default:
            continue
        if spec.task_type not in variant.task_types:
            raise ConfigError(f"finetune.{key}={value} does not apply to {spec.name} ({spec.task_type} task); "
                              f"it applies to {', '.join(variant.task_types)} tasks")
        valid = choices(key, spec.task_type)
        if value not in valid:
            raise ConfigError(f"unknown finetune.{key} '{value}' for {spec.name}; valid: {', '.join(valid)}")
    if finetune_cfg.re_feature == "entity-start" and finetune_cfg.re_input != "markers":
        raise ConfigError(f"finetune.re_feature=entity-start needs the start markers: set finetune.re_input="
                          f"markers (re_input '{finetune_cfg.re_input}' works with re_feature: cls, mention)")


def describe() -> str:
    """Every variant key, its choices and what it applies to (for `bioablate list variants`)."""
    lines = []
    for key, variant in VARIANTS.items():
        options = ", ".join(choices(key)) if key != "head" else (
            f"{', '.join(TOKEN_HEADS)} (ner, pico); {', '.join(SEQUENCE_HEADS)} (other tasks)")
        lines.append(f"finetune.{key:<16} {options}\n{'':<26}default {variant.default}; {variant.description}")
    return "\n".join(lines)

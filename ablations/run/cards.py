"""Model cards (README.md in the Hugging Face Hub's format) for the models bioablate writes.

A card is YAML front matter (`huggingface_hub.ModelCardData`: language, license, tags, library and
pipeline) and Markdown sections saying how the model was made: for a pretrained model the objective,
corpus and its size, vocabulary, steps, tokens seen, final losses; for a fine-tuned one the task, labels,
test scores and how inputs must be built. Both end with the exact command, the config (the keys of the
run's kind: no pretraining keys in a fine-tuned model's, no launcher keys in either), the run's
fingerprint and its MLflow run id, so anyone holding the folder can find or redo the run.

A fine-tuned model's front matter also carries what the Hub reads: `base_model` (a Hub id, or a bioablate
pretraining run's folder name), `datasets`, `model-index` (the test scores, for the Hub's evaluation
widget) and the licence of the data it was trained on (`DatasetSpec.licenses`: a model carries its
training data's terms); a model of the `micro` profile opens with a warning that it is plumbing, not a
usable model, and one of `mini` with a note that it is a small-budget model.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from huggingface_hub import ModelCard, ModelCardData
from omegaconf import DictConfig, OmegaConf

from ablations.places import LOCAL, LOCAL_KEYS, PATH_KEYS, shown_path
from ablations.run.card_metadata import base_model, eval_results, license_metadata
from bioablate_core.databases import hide_passwords
from datamodules.registry import get_dataset
from datamodules.tagging import shown_name
from datamodules.task_kinds import TASK_KINDS
from datamodules.task_types import TASK_TYPES
from lightning_modules.models import RANDOM_BERT

# A pretrained model's card: the project's (pyproject.toml); the corpora's own terms apply to their text (the
# corpus definitions record no licences yet). A fine-tuned model's card takes its data's (card_metadata).
LICENSE = "mit"
# The options that name local places (ablations.places.LOCAL_KEYS) or a store whose URI may hold a password.
LOCAL_FLAGS = ("--data-dir", "--work-dir", "--tracking-uri", "--storage")


def invoked_command(argv: list[str] | None = None) -> str:
    """The command line of this process, as the user typed it where it was the `bioablate` CLI, with the
    values of the machine-local options (LOCAL_FLAGS, LOCAL_KEYS) shown as `<local>`, and any other URL's
    password masked."""
    argv = list(sys.argv if argv is None else argv)
    program = Path(argv[0]).name if argv else ""
    words = ["bioablate"] if program in ("bioablate", "cli.py", "__main__.py") else ["python", program]
    hide_next = False
    for word in argv[1:]:
        flag, eq, _ = word.partition("=")
        if hide_next:
            word, hide_next = LOCAL, False
        elif word in LOCAL_FLAGS:
            hide_next = True
        elif eq and (flag in LOCAL_FLAGS or flag in LOCAL_KEYS):
            word = f"{flag}={LOCAL}"
        words.append(word)
    return hide_passwords(shlex.join(words))


def shareable_config(cfg: DictConfig, drop: tuple[str, ...] = ()) -> str:
    """The run's resolved config as YAML, with the machine-local paths left out (a model folder or a
    vocabulary file relative to the work or data directory, as the run's params show them) and the
    sections `drop` (those another kind of run reads) removed."""
    data = OmegaConf.to_container(cfg, resolve=True)
    for key in LOCAL_KEYS:
        if key in data:
            data[key] = LOCAL
    for key in PATH_KEYS:
        section, _, name = key.partition(".")
        if isinstance(data.get(section), dict) and isinstance(data[section].get(name), str):
            data[section][name] = shown_path(data[section][name], cfg)
    for key in drop:
        data.pop(key, None)
    return OmegaConf.to_yaml(OmegaConf.create(data))


@dataclass
class Provenance:
    """What finds the run again and redoes it."""

    fingerprint: str
    run_id: str
    tracking_uri: str
    git_commit: str
    config: DictConfig
    command: str = field(default_factory=invoked_command)

    def section(self, drop: tuple[str, ...] = ()) -> str:
        return (f"## Provenance\n\n"
                f"- fingerprint: `{self.fingerprint}` (MLflow tag `fingerprint`)\n"
                f"- MLflow run id: `{self.run_id}`\n"
                f"- bioablate commit: `{self.git_commit}`\n\n"
                f"Command:\n\n```bash\n{self.command}\n```\n\n"
                f"Config (resolved; local paths shown as `<local>`):\n\n```yaml\n"
                f"{shareable_config(self.config, drop)}```\n")


def _card(data: ModelCardData, body: str) -> str:
    return str(ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}"))


@dataclass
class PretrainFacts:
    """What a pretraining run did, for its card."""

    objective: str  # bert | albert | electra
    nsp: bool
    corpus: str
    corpus_documents: int
    corpus_words: int
    corpus_tokens: int
    sequences: int
    seq_len: int
    vocab: str  # the `pretrain.vocab` setting
    vocab_size: int
    lowercase: bool
    init: str  # scratch, or the checkpoint it continued from
    masking: str
    steps: int
    sequences_per_step: int
    final_losses: dict[str, float]
    max_position_embeddings: int
    pooler_untrained: bool


OBJECTIVE_TEXT = {
    "bert": "masked language modelling (BERT)",
    "albert": "masked language modelling + sentence-order prediction (ALBERT: factorized embeddings, "
              "shared layers)",
    "electra": "replaced-token detection (ELECTRA); this folder is the discriminator",
}


def pretrain_card(facts: PretrainFacts, provenance: Provenance) -> str:
    f = facts
    electra = f.objective == "electra"
    data = ModelCardData(language="en", license=LICENSE, library_name="transformers",
                         # the ELECTRA discriminator has no MLM head: it embeds text, it fills no masks
                         pipeline_tag="feature-extraction" if electra else "fill-mask",
                         tags=["bioablate", "biomedical", f.objective, "pretraining"])
    objective = OBJECTIVE_TEXT[f.objective] + (" + next-sentence prediction" if f.nsp else "")
    tokens_seen = round(f.steps * f.sequences_per_step * f.corpus_tokens / max(1, f.sequences))
    losses = ", ".join(f"{k} {v:.4f}" for k, v in sorted(f.final_losses.items())) or "not logged"
    loads = ("`AutoModel`, `AutoModelForPreTraining`" if electra else
             "`AutoModel`, `AutoModelForMaskedLM`" + (", `AutoModelForPreTraining`"
                                                      if f.nsp or f.objective == "albert" else ""))
    pooler = ("\nThe pooler ([CLS] dense + tanh) was never trained (masked language modelling does not use "
              "it); it is saved at its initialisation so that every Auto class loads it without a "
              "missing-weights report (`AutoModelForMaskedLM`, which has no pooler, lists it as unused).\n"
              if f.pooler_untrained else "")
    body = f"""# bioablate {f.objective} pretrained on {f.corpus}

A {f.objective.upper()} encoder pretrained with bioablate (a toolkit for ablation studies of biomedical
language models). Load it with {loads} (nothing is missing; a class without the pretraining heads lists
their weights as unused, as transformers does for every checkpoint with heads); fine-tune it with
`bioablate finetune --model <this folder> --task <task>`.

## Objective

{objective}; masking: {f.masking}; started from: {f.init}.

## Corpus

`{f.corpus}`: {f.corpus_documents:,} documents, {f.corpus_words:,} words, {f.corpus_tokens:,} tokens in
{f.sequences:,} sequences of up to {f.seq_len} tokens.

## Vocabulary

`{f.vocab}`: {f.vocab_size:,} WordPiece entries, {"lowercased" if f.lowercase else "cased"}. The
tokenizer truncates at {f.max_position_embeddings} tokens (the position embeddings); pretraining used
sequences of {f.seq_len}.

## Training

- steps: {f.steps:,} optimizer steps of {f.sequences_per_step:,} sequences
- tokens seen: about {tokens_seen:,}
- final losses: {losses}
{pooler}
{provenance.section(drop=("finetune", "launcher"))}"""
    return _card(data, body)


@dataclass(frozen=True)
class CardPart:
    """A task kind's part of a fine-tuned model's card (datamodules/task_kinds.py): the Hub's pipeline tag,
    and (bioablate.json -> text) how inputs must be built for the model to see what it saw in training."""

    pipeline: str
    inputs: Callable[[dict[str, Any]], str]


def _cut(meta: dict[str, Any]) -> str:
    return f"Tokenize with the saved tokenizer, truncating at {meta['max_length']} tokens."


def _token_inputs(meta: dict[str, Any]) -> str:
    where = ("each word's first sub-token" if meta["subtoken_labels"] == "first" else "every sub-token")
    return (f"Split the text into words and tokenize them with the saved tokenizer (`is_split_into_words="
            f"True`), truncating at {meta['max_length']} tokens. The model tags {where}; a word's tag is "
            f"read there (the rest are ignored). Tags "
            f"use the {shown_name(meta['tagging'])} scheme; decode them into word spans (`bioablate predict` does).")


def _span_inputs(meta: dict[str, Any]) -> str:
    return (f"A question and a context (`tokenizer(question, context)`), the context cut into overlapping "
            f"windows of {meta['max_length']} tokens ({meta.get('qa_stride')} shared; null: a third of the "
            f"window). The model gives a start and an end logit per token; an answer is the best start + end "
            f"over the windows, at most {meta.get('max_answer_length')} tokens (`bioablate predict` does it).")


def _sequence_inputs(rule: str) -> Callable[[dict[str, Any]], str]:
    """The inputs of a kind with one output per example: by the task type's input form, then `rule`."""
    def inputs(meta: dict[str, Any]) -> str:
        return SEQUENCE_INPUTS[TASK_TYPES.of(meta["task_type"]).inputs](meta, rule)
    return inputs


def _relation_inputs(meta: dict[str, Any]) -> str:
    transform = {"dummify": "replace the head and the tail mention by their type tags, `@TYPE$` "
                            "(e.g. `@CHEMICAL$`, `@GENE$`; overlapping mentions become one combined "
                            "tag such as `@CHEMICAL-GENE$`)",
                 "markers": "wrap the head mention in `[E1] ... [/E1]` and the tail in `[E2] ... [/E2]` "
                            "(the four markers are special tokens of the saved tokenizer)",
                 "original": "keep the sentence as it is"}[meta["re_input"]]
    feature = {"cls": "The classifier reads [CLS].",
               "mention": "The classifier reads each entity's tokens, max-pooled: it needs the token mask "
                          "of each mention (`bioablate predict` builds it from character offsets).",
               "entity-start": "The classifier reads the `[E1]` and `[E2]` marker tokens: it needs their "
                               "positions (`bioablate predict` finds them)."}[meta["re_feature"]]
    return f"Relation extraction: {transform}, then classify the sentence. {_cut(meta)} {feature}"


# input form (datamodules/task_types.py) -> (meta, the kind's decision rule) -> how its inputs are built
SEQUENCE_INPUTS: dict[str, Callable[[dict[str, Any], str], str]] = {
    "relation": lambda meta, rule: _relation_inputs(meta),
    "question-text": lambda meta, rule: (f"A pair: question, then the reference text (`tokenizer(question, text)`). "
                                         f"{_cut(meta)} Only the text is cut."),
    "pair": lambda meta, rule: f"A sentence pair (`tokenizer(a, b)`); the output is one similarity score. {_cut(meta)}",
    "text": lambda meta, rule: f"One text. {_cut(meta)} {rule}",
}


def _loading_text(meta: dict[str, Any]) -> str:
    if meta["format"] == "transformers":
        auto = meta["auto_class"]
        pooler = ("\n\nThe pooler is linearised (dense = 1e-4 x identity, classifier x 1e4): it passes [CLS] "
                  "through unchanged to float precision, as the trained head (a linear layer on [CLS]) "
                  "expects; re-initialise it before fine-tuning this model further."
                  if meta["architecture"] in ("BertForSequenceClassification", "AlbertForSequenceClassification")
                  else "")
        return (f"Plain transformers loads it:\n\n```python\nfrom transformers import {auto}, AutoTokenizer\n"
                f"model = {auto}.from_pretrained(path)\ntokenizer = AutoTokenizer.from_pretrained(path)\n```"
                f"{pooler}")
    return (f"The head (`{meta['head']}`, feature `{meta['re_feature']}`, classifier `{meta['classifier']}`) has "
            "no transformers class: the encoder is a transformers folder (`AutoModel.from_pretrained(path)`), "
            "the head's weights are `head.safetensors`, rebuilt by bioablate's own loading code:\n\n"
            "```python\nfrom ablations.run.predict import load_model\nmodel = load_model(path)\n```\n\n"
            "or from the command line: `bioablate predict --model PATH --input FILE`.")


SMALL_PROFILES = ("micro", "mini")  # profiles of scaled-down recipes: their cards open with a banner saying so


def _profile_banner(cfg: DictConfig) -> str:
    """The banner of a `micro` model (plumbing: it shows that the code runs) or a `mini` one (a CPU-budget
    proxy of the recipe, not a model to use), or nothing."""
    if cfg.get("profile") not in SMALL_PROFILES:
        return ""
    ft, model = cfg.finetune, cfg.model
    examples = "all" if ft.max_train_examples is None else f"{ft.max_train_examples:,}"
    size = (f", a {model.num_layers}-layer {model.hidden_size}-wide encoder"
            if model.name_or_path == RANDOM_BERT else "")
    budget = f"({examples} training examples, {ft.epochs} epochs{size})"
    if cfg.profile == "micro":
        return (f"> **Warning: plumbing, not a usable model.** It was trained under bioablate's `micro` profile "
                f"{budget}, which checks that training, export and prediction work end to end. Its predictions "
                "and scores say nothing about the task or the method: use it for tests only.\n\n")
    return (f"> **Note: a small-budget model.** It was trained under bioablate's `mini` profile {budget}, the "
            "scaled-down recipe of CPU-sized ablations: its test scores below are real, but it is not trained or "
            "tuned for use; train under `base` for that.\n\n")


def _license_text(task: str, licenses: tuple[str, ...], fine_tuned_from: str | None) -> str:
    base = " The base model's own terms apply as well (see its card)." if fine_tuned_from else ""
    if not licenses:
        return (f"No licence is stated for the data of `{task}`: ask its authors before sharing or using this "
                f"model.{base}")
    return (f"Trained on `{task}`, whose data is under {', '.join(f'`{x}`' for x in licenses)}: weights "
            "trained on data carry its terms, so this licence is the data's, not bioablate's (its code is "
            f"MIT).{base}")


def finetune_card(meta: dict[str, Any], test_metrics: dict[str, float], provenance: Provenance) -> str:
    """The card of a fine-tuned model; `meta` is its bioablate.json (ablations.run.export)."""
    standard = meta["format"] == "transformers"
    cfg, spec = provenance.config, get_dataset(meta["task"])
    base, made_from = base_model(str(cfg.model.name_or_path))
    small = cfg.get("profile") in SMALL_PROFILES
    data = ModelCardData(language="en", library_name="transformers" if standard else None,
                         pipeline_tag=card_part(meta).pipeline, base_model=base, datasets=[meta["task"]],
                         model_name=f"bioablate-{meta['task']}",
                         eval_results=eval_results(meta, card_part(meta).pipeline, test_metrics, spec.metric) or None,
                         tags=["bioablate", "biomedical", meta["task"], meta["task_type"]]
                         + ([] if standard else ["custom-head"]) + ([f"bioablate-{cfg.profile}"] if small else []),
                         **license_metadata(spec.licenses))
    labels = ", ".join(f"`{label}`" for label in meta["labels"])
    scores = "\n".join(f"- {k}: {int(v) if float(v).is_integer() and k != 'score' else round(v, 4)}"
                       for k, v in sorted(test_metrics.items()) if isinstance(v, (int, float))) or "- not scored"
    body = f"""# bioablate {meta['task']} model

{_profile_banner(cfg)}Fine-tuned with bioablate on `{meta['task']}` ({meta['task_type']}) from {made_from}; the
weights of the best dev epoch.

## Labels

{labels}

## Test scores

{scores}

## Loading

{_loading_text(meta)}

## Inputs

{card_part(meta).inputs(meta)}

## Licence

{_license_text(meta['task'], spec.licenses, base)}

{provenance.section(drop=("pretrain", "launcher"))}"""
    return _card(data, body)


def card_part(meta: dict[str, Any]) -> CardPart:
    return TASK_KINDS.part(meta["output_kind"], "card")


# ------------------------------------------------------------------ this layer's part of each task kind
# (datamodules/task_kinds.py): the Hub's pipeline tag and how the card says inputs are built

TEXT_CLASSIFICATION = "text-classification"
TASK_KINDS.attach("token", card=CardPart("token-classification", _token_inputs))
TASK_KINDS.attach("span", card=CardPart("question-answering", _span_inputs))
TASK_KINDS.attach("classification", card=CardPart(TEXT_CLASSIFICATION, _sequence_inputs(
    "The class is the largest logit.")))
TASK_KINDS.attach("multilabel", card=CardPart(TEXT_CLASSIFICATION, _sequence_inputs(
    "Each label is on where its logit is above 0 (sigmoid > 0.5).")))
TASK_KINDS.attach("regression", card=CardPart(TEXT_CLASSIFICATION, _sequence_inputs(
    "The output is one number.")))
TASK_KINDS.attach("ranking", card=CardPart(TEXT_CLASSIFICATION, _sequence_inputs(
    "The class is the largest logit.")))

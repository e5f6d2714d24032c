"""Model cards (README.md in the Hugging Face Hub's format) for the models bioablate writes.

A card is YAML front matter (`huggingface_hub.ModelCardData`: language, license, tags, library and
pipeline) and Markdown sections saying how the model was made: for a pretrained model the objective,
corpus and its size, vocabulary, steps, tokens seen, final losses; for a fine-tuned one the task, labels,
test scores and how inputs must be built. Both end with the exact command, the config, the run's
fingerprint and its MLflow run id, so anyone holding the folder can find or redo the run.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from huggingface_hub import ModelCard, ModelCardData
from omegaconf import DictConfig, OmegaConf

LICENSE = "mit"  # the project's (pyproject.toml); the corpora's and datasets' own terms apply to their text
# Where the run's files lay on the machine that made it: not part of how it was made, and not to be
# published with a shared model.
LOCAL_KEYS = ("data_dir", "work_dir", "tracking_uri", "datasets")


def invoked_command() -> str:
    """The command line of this process, as the user typed it where it was the `bioablate` CLI."""
    program = Path(sys.argv[0]).name if sys.argv else ""
    if program in ("bioablate", "cli.py", "__main__.py"):
        return shlex.join(["bioablate", *sys.argv[1:]])
    return shlex.join([sys.executable.rsplit("/", 1)[-1], *sys.argv])


def shareable_config(cfg: DictConfig) -> str:
    """The run's resolved config as YAML, with the machine-local paths left out."""
    data = OmegaConf.to_container(cfg, resolve=True)
    for key in LOCAL_KEYS:
        if key in data:
            data[key] = "<local>"
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

    def section(self) -> str:
        return (f"## Provenance\n\n"
                f"- fingerprint: `{self.fingerprint}` (MLflow tag `fingerprint`)\n"
                f"- MLflow run id: `{self.run_id}`\n"
                f"- bioablate commit: `{self.git_commit}`\n\n"
                f"Command:\n\n```bash\n{self.command}\n```\n\n"
                f"Config (resolved; local paths shown as `<local>`):\n\n```yaml\n{shareable_config(self.config)}```\n")


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
              "missing-weights report.\n" if f.pooler_untrained else "")
    body = f"""# bioablate {f.objective} pretrained on {f.corpus}

A {f.objective.upper()} encoder pretrained with bioablate (a toolkit for ablation studies of biomedical
language models). Load it with {loads}; fine-tune it with
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
{provenance.section()}"""
    return _card(data, body)

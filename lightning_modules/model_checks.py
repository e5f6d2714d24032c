"""A model folder checked before a run exists: its config.json agrees with its weights, and its tokenizer
with its embedding matrix. Otherwise transformers fails once the run exists, or goes on: without tokenizer
files every word becomes [UNK]. Shapes come from safetensors headers and a meta-device model, never from
loading tensors; .bin weights are only checked for pickled code.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import struct
from pathlib import Path
from typing import Any, Optional

from bioablate_core.errors import ConfigError
from datamodules.textfiles import read_text
from datamodules.vocabs import resolve_vocab
from lightning_modules.models import (
    RANDOM_BERT,
    ResolvedModel,
    encoder_options,
    load_tokenizer,
    model_config,
    pickled_code_error,
    resolve_model,
)

# fewer tokens than this is no vocabulary (the smallest `bioablate vocab train --size` accepts too)
log = logging.getLogger("bioablate")
MIN_VOCAB = 100
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json")  # or a SentencePiece *.model
SAFETENSORS, INDEX = "model.safetensors", "model.safetensors.index.json"
LAYER = re.compile(r"\.layer\.(\d+)\.")
RESIZE = "model.resize_embeddings"


def check_model(model_cfg: Any, data_dir: Optional[Path]) -> None:
    """The model a fine-tuning run starts from, checked without loading its weights (see the module doc)."""
    if model_cfg.name_or_path == RANDOM_BERT:  # its embedding matrix is made to fit the vocabulary
        from transformers import BertTokenizer

        vocab = resolve_vocab(model_cfg.vocab, data_dir)
        _check_size(vocab, len(BertTokenizer(vocab=str(vocab), do_lower_case=model_cfg.lowercase)))
        return
    model = resolve_model(model_cfg.name_or_path)
    _check_folder(model, bool(model_cfg.resize_embeddings), _stamp(model.path))


def _stamp(folder: Path) -> tuple:
    """The folder's files as (name, size, mtime): a folder rewritten in this process is checked again."""
    return tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file()))


@functools.lru_cache(maxsize=64)  # an experiment checks the same few models for hundreds of cells
def _check_folder(model: ResolvedModel, resize: bool, stamp: tuple) -> None:
    config = model_config(model.path)
    expected, embeddings, prefix = _expected_shapes(model.path, config)
    actual = weight_shapes(model.path, prefix)
    rows = config.vocab_size
    if actual is not None:
        _check_shapes(model.path, expected, actual)
        rows = actual.get(embeddings, (rows,))[0]
    check_weights(model.path)  # after the shapes: what disagrees with config.json says more than a cut file
    if not any((model.path / name).is_file() for name in TOKENIZER_FILES) and not any(model.path.glob("*.model")):
        raise ConfigError(f"{model.path}: no tokenizer files ({', '.join(TOKENIZER_FILES)} or a SentencePiece "
                          "*.model): every word would become [UNK]; copy the tokenizer of the model these weights "
                          "come from into the folder")
    for name in ("vocab.txt", "vocab.json"):  # the tokenizers library fails on bad bytes without naming the file
        if (model.path / name).is_file():
            read_text(model.path / name)  # a non-UTF-8 byte: one DataFormatError naming the file and line
    size = len(load_tokenizer(model, config))
    _check_size(model.path, size)
    if size < rows // 2:  # padded vocabularies leave a few spare rows, not half the matrix
        log.warning("%s: the tokenizer has %d tokens for %d embedding rows: probably not the vocabulary these "
                    "weights were trained with (most words would map to the wrong rows)", model.path, size, rows)
    if size > rows and not resize:
        raise ConfigError(f"{model.path}: the tokenizer has {size} tokens but the embedding matrix {rows} rows: "
                          "not the vocabulary these weights were trained with? Use that one, or set "
                          f"{RESIZE}=true to add {size - rows} randomly initialised rows (config key {RESIZE})")


def _check_size(where: Path, size: int) -> None:
    if size < MIN_VOCAB:
        raise ConfigError(f"{where}: the tokenizer has only {size} tokens (a vocabulary has at least {MIN_VOCAB}: "
                          "special tokens, an alphabet and word pieces); nearly every word would become [UNK]")


def _expected_shapes(folder: Path, config: Any) -> tuple[dict[str, tuple[int, ...]], str, str]:
    """The encoder's shapes as config.json describes it, its embedding matrix's name, and its prefix (`bert`)."""
    import torch
    from transformers import AutoModel

    try:
        with torch.device("meta"):
            encoder = AutoModel.from_config(config, **encoder_options(config))
    except (ValueError, TypeError, KeyError) as e:  # e.g. a width its heads do not divide
        raise ConfigError(f"{folder / 'config.json'}: describes no model transformers can build "
                          f"({' '.join(str(e).split())[:200]}); fix config.json or re-export the model") from None
    names = {id(p): name for name, p in encoder.named_parameters()}
    embeddings = names.get(id(encoder.get_input_embeddings().weight), "")
    return ({name: tuple(p.shape) for name, p in encoder.named_parameters()}, embeddings,
            encoder.base_model_prefix)


def check_weights(folder: Path) -> None:
    """`folder`'s weights can be loaded (safetensors whole, .bin without code), else one ConfigError line."""
    files = _safetensors_files(folder)
    if files:
        for name in files:
            path = folder / name
            length, header = _read_header(path)
            needed = 8 + length + max((entry["data_offsets"][1] for key, entry in header.items()
                                       if key != "__metadata__"), default=0)
            if path.stat().st_size < needed:
                raise ConfigError(f"{path}: truncated ({path.stat().st_size:,} bytes, its header describes "
                                  f"{needed:,}); re-export or re-download the model")
        return
    if not any(folder.glob("pytorch_model*.bin")):
        raise ConfigError(f"{folder}: no weights ({SAFETENSORS}, {INDEX} or pytorch_model.bin): a model folder "
                          "holds its weights beside config.json; copy them in, or re-export the model")
    pickled = pickled_code_error(folder)  # what transformers loads must hold tensors and nothing to run
    if pickled is not None:
        raise pickled


def _safetensors_files(folder: Path) -> list[str]:
    if (folder / INDEX).is_file():
        try:
            return sorted(set(json.loads((folder / INDEX).read_text())["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ConfigError(f"{folder / INDEX}: not a safetensors index (a JSON object with a `weight_map`); "
                              "re-export or re-download the model") from None
    return [SAFETENSORS] if (folder / SAFETENSORS).is_file() else []


def weight_shapes(folder: Path, prefix: str = "") -> dict[str, tuple[int, ...]] | None:
    """Tensor name -> shape from `folder`'s safetensors headers, with `prefix` and legacy LayerNorm names
    read as transformers reads them; None without safetensors weights."""
    files = _safetensors_files(folder)
    if not files:
        return None
    shapes = {}
    for name in files:
        for key, entry in _header(folder / name).items():
            if key == "__metadata__":
                continue
            key = key[len(prefix) + 1:] if prefix and key.startswith(prefix + ".") else key
            key = re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", key))
            shapes[key] = tuple(entry["shape"])
    return shapes


def _header(path: Path) -> dict[str, Any]:
    return _read_header(path)[1]


def _read_header(path: Path) -> tuple[int, dict[str, Any]]:
    """A safetensors file's header: its length in bytes, and its table (tensor -> dtype, shape, offsets)."""
    try:
        with open(path, "rb") as f:
            length = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(length))
        if not isinstance(header, dict) or not all(
                isinstance(e, dict) and len(e.get("data_offsets", ())) == 2 for k, e in header.items()
                if k != "__metadata__"):
            raise ValueError("its header is not a table of tensors")
        return length, header
    except (OSError, struct.error, ValueError, MemoryError) as e:
        raise ConfigError(f"{path}: not a readable safetensors file ({' '.join(str(e).split())[:120]}); "
                          "re-export or re-download the model") from None


def _check_shapes(folder: Path, expected: dict[str, tuple[int, ...]], actual: dict[str, tuple[int, ...]]) -> None:
    for key, shape in expected.items():
        if key in actual and actual[key] != shape:
            raise ConfigError(f"{folder}: config.json does not match the weights: '{key}' is {list(actual[key])} "
                              f"in the weights but {list(shape)} by config.json (hidden_size, vocab_size, "
                              "intermediate_size, max_position_embeddings, ...); fix config.json or re-export "
                              "the model")
    layers = {int(m.group(1)) for key in expected if (m := LAYER.search(key))}
    held = {int(m.group(1)) for key in actual if (m := LAYER.search(key))}
    if held and layers != held:  # transformers would drop the extra layers, or start the missing ones at random
        raise ConfigError(f"{folder}: config.json describes {len(layers)} layers but the weights hold {len(held)}; "
                          "fix config.json (num_hidden_layers) or re-export the model")

"""Corpus definitions: the YAML schema, the built-in corpora (`experiments/corpora/*.yaml`) in a
registry, corpus expressions (``a+b``, ``a>b``) over names and YAML paths, and the files of each part.
See `datamodules/pretrain/corpora.py` for the YAML format and how a corpus streams."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from glob import glob
from pathlib import Path
from typing import Any, List, Optional

from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf

from bioablate_core.errors import ConfigError, MissingDataError, UnknownNameError
from bioablate_core.packaged import packaged_dir
from bioablate_core.registry import Registry
from bioablate_core.schema import load_yaml, validate
from datamodules.pretrain.formats import FORMATS

BUILTIN_DIR = packaged_dir("corpus")


# ------------------------------------------------------------------------------------------- schema

@dataclass
class PartSchema:
    files: List[str] = MISSING
    format: str = MISSING
    text: List[str] = field(default_factory=list)
    pmid: Optional[str] = None


@dataclass
class FiltersSchema:
    min_words: int = 0
    dedup: bool = False
    exclude_eval_pmids: bool = False
    max_words: Optional[int] = None


@dataclass
class CorpusSchema:
    name: str = MISSING
    description: str = ""
    parts: List[Any] = MISSING  # each checked against PartSchema, so errors name parts[i]
    filters: FiltersSchema = field(default_factory=FiltersSchema)


@dataclass(frozen=True)
class Part:
    files: tuple[str, ...]
    format: str
    text: tuple[str, ...] = ()
    pmid: str | None = None


@dataclass(frozen=True)
class CorpusSpec:
    name: str
    path: Path  # the YAML it was read from
    parts: tuple[Part, ...]
    filters: FiltersSchema
    description: str = ""


def _missing(source: str, cfg: DictConfig) -> None:
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise ConfigError(f"{source}: missing key '{missing[0]}' (see docs/pretraining.md, 'Corpora')")


def read_corpus_yaml(path: Path | str) -> CorpusSpec:
    """A corpus YAML, validated; any mistake is one ConfigError naming the file and key."""
    path = Path(path)
    raw = load_yaml(path)
    cfg = validate(path, raw, CorpusSchema)
    _missing(str(path), cfg)
    if not isinstance(cfg.parts, ListConfig) or not cfg.parts:
        raise ConfigError(f"{path}: 'parts' must be a non-empty list of {{files, format}} entries")
    parts = []
    for i, entry in enumerate(cfg.parts):
        where = f"{path}: parts[{i}]"
        if not isinstance(entry, DictConfig):
            raise ConfigError(f"{where}: expected a mapping with 'files' and 'format', got {entry!r}")
        if isinstance(entry.get("files"), str):  # a single glob
            entry = OmegaConf.merge(entry, {"files": [entry.files]})
        part = validate(where, entry, PartSchema)
        _missing(where, part)
        if part.format not in FORMATS:
            raise UnknownNameError("corpus format", part.format, FORMATS.names())
        fmt = FORMATS.get(part.format)
        if not fmt.fields and (part.text or part.pmid):
            raise ConfigError(f"{where}: format '{part.format}' has no fields; 'text' and 'pmid' are for jsonl and csv")
        if not part.files:
            raise ConfigError(f"{where}: 'files' is empty; give one or more globs")
        parts.append(Part(tuple(part.files), part.format, tuple(part.text), part.pmid))
    filters = FiltersSchema(**OmegaConf.to_container(cfg.filters))
    if filters.min_words < 0 or (filters.max_words is not None and filters.max_words < 1):
        raise ConfigError(f"{path}: filters.min_words must be >= 0 and filters.max_words >= 1 (or null)")
    return CorpusSpec(cfg.name, path, tuple(parts), filters, cfg.description)


# --------------------------------------------------------------------------------- named corpora

CORPORA: Registry[CorpusSpec] = Registry("corpus")


def _register_builtins() -> None:
    if not len(CORPORA):
        for path in sorted(BUILTIN_DIR.glob("*.yaml")):
            spec = read_corpus_yaml(path)
            CORPORA.register(spec.name, spec)


def corpus_names() -> list[str]:
    _register_builtins()
    return CORPORA.names()


def _looks_like_path(ref: str) -> bool:
    return ref.endswith((".yaml", ".yml")) or os.sep in ref


def resolve_corpus(ref: str) -> CorpusSpec:
    """A built-in corpus name, or the path of a corpus YAML."""
    _register_builtins()
    if ref in CORPORA:
        return CORPORA.get(ref)
    if _looks_like_path(ref):
        if not Path(ref).is_file():
            raise ConfigError(f"corpus file not found: {ref} (a corpus is a name from `bioablate list corpora` "
                              "or the path of a corpus YAML)")
        return read_corpus_yaml(ref)
    raise UnknownNameError("corpus", ref, CORPORA.names())


def parse_corpus(name: str) -> list[list[str]]:
    """'general>pubmed+pmc' -> [['general'], ['pubmed', 'pmc']], every name or YAML path checked."""
    stages = [[p.strip() for p in stage.split("+")] for stage in name.split(">")]
    for stage in stages:
        for ref in stage:
            if not ref:
                raise ConfigError(f"pretrain.corpus '{name}': an empty name around '+' or '>'")
            resolve_corpus(ref)
    return stages


def part_files(spec: CorpusSpec, index: int, data_dir: Path | None) -> list[Path]:
    """Files of one part: each glob absolute, or relative to the YAML's folder, else under the data dir."""
    part, files = spec.parts[index], []
    for pattern in part.files:
        bases = [Path("/")] if os.path.isabs(pattern) else [spec.path.parent, *([Path(data_dir)] if data_dir else [])]
        matched: list[Path] = []
        for base in bases:
            matched = sorted(Path(p) for p in glob(str(base / pattern), recursive=True) if os.path.isfile(p))
            if matched:
                break
        if not matched:
            if spec.path.parent == BUILTIN_DIR:  # staged data: the data dir is what is missing
                raise MissingDataError(Path(data_dir or "."), {f"corpus {spec.name}": [pattern]})
            looked = " or ".join(str(b) for b in bases)
            raise ConfigError(f"{spec.path}: parts[{index}] glob '{pattern}' matches no file (looked under "
                              f"{looked}); fix the glob or point --data-dir / BIOABLATE_DATA at the data")
        files += matched
    return files


def spec_files(spec: CorpusSpec, data_dir: Path | None) -> list[tuple[Path, Part]]:
    return [(path, part) for i, part in enumerate(spec.parts) for path in part_files(spec, i, data_dir)]

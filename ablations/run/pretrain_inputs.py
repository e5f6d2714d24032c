"""A pretraining run's inputs, prepared once into the work directory's cache and found there by content:
its corpus (as the run's settings cut it), its vocabulary (a named one, the starting checkpoint's, or a
WordPiece one trained on the corpus) and its tokenized shards."""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig

from bioablate_core.claims import claim
from bioablate_core.errors import ConfigError
from bioablate_core.fingerprints import digest
from datamodules.pretrain.corpora import evaluation_pmids, load_corpus
from datamodules.pretrain.shards import Shards, build_shards, open_shards, shards_fingerprint
from datamodules.pretrain.vocab import init_vocab_file, parse_vocab, resolve_vocab_file, train_wordpiece
from lightning_modules.models import resolve_model_dir
from lightning_modules.pretrain_models import ObjectiveSpec

log = logging.getLogger("bioablate")


def corpus_settings(cfg: DictConfig) -> dict:
    p = cfg.pretrain
    return {"corpus": p.corpus, "max_words": p.max_words, "min_words": p.min_words, "dedup": p.dedup,
            "exclude_eval_pmids": p.exclude_eval_pmids, "seed": cfg.seed}


def load_run_corpus(cfg: DictConfig, data_dir: Path):
    p = cfg.pretrain
    exclude = evaluation_pmids(data_dir) if p.exclude_eval_pmids else None
    return load_corpus(p.corpus, data_dir, max_words=p.max_words, min_words=p.min_words, dedup=p.dedup,
                       exclude_pmids=exclude, seed=cfg.seed)


def resolve_pretrain_vocab(cfg: DictConfig, data_dir: Path, work_dir: Path, corpus_fp: str,
                           train: bool = True) -> Path | None:
    """The vocabulary file; a `train:SIZE` one is trained into the cache unless `train` is false (then
    None while it is not there)."""
    p = cfg.pretrain
    spec = parse_vocab(p.vocab, p.lowercase)
    if spec.kind == "init":
        if p.init == "scratch":
            raise ConfigError("pretrain.vocab=init needs pretrain.init to name a checkpoint")
        return init_vocab_file(resolve_model_dir(p.init), work_dir)
    if spec.kind == "file":
        return resolve_vocab_file(p.vocab, data_dir)
    key = digest({"corpus": corpus_fp, **corpus_settings(cfg), "size": spec.size, "lowercase": spec.lowercase})
    out_dir = work_dir / "cache" / "vocab" / key
    if not (out_dir / "vocab.txt").is_file():
        if not train:
            return None
        with claim(out_dir.with_name(out_dir.name + ".lock"), what=f"vocabulary {out_dir}"):  # one trainer
            if not (out_dir / "vocab.txt").is_file():
                log.info("training a %d-entry WordPiece vocabulary on %s", spec.size, p.corpus)
                train_wordpiece(load_run_corpus(cfg, data_dir).sentences(), spec.size, spec.lowercase, out_dir)
    return out_dir / "vocab.txt"


def shard_settings(cfg: DictConfig) -> dict:
    p = cfg.pretrain
    return {**corpus_settings(cfg), "seq_len": p.seq_len, "pairs": ObjectiveSpec.from_config(p).pairs,
            "lowercase": parse_vocab(p.vocab, p.lowercase).lowercase, **({"packing": True} if p.packing else {})}


def shards_dir(cfg: DictConfig, work_dir: Path, vocab_path: Path, corpus_fp: str) -> Path:
    return work_dir / "cache" / "shards" / shards_fingerprint(corpus_fp, vocab_path, shard_settings(cfg))


def prepare_shards(cfg: DictConfig, data_dir: Path, work_dir: Path, vocab_path: Path, corpus_fp: str) -> Shards:
    p, settings = cfg.pretrain, shard_settings(cfg)
    out_dir = shards_dir(cfg, work_dir, vocab_path, corpus_fp)
    if (found := open_shards(out_dir)) is not None:
        return found
    shards = build_shards(load_run_corpus(cfg, data_dir), vocab_path, settings["lowercase"], p.seq_len,
                          settings["pairs"], cfg.seed, out_dir, packing=p.packing)
    log.info("tokenized %s: %d documents, %d words, %d sequences -> %s", p.corpus, shards.meta["documents"],
             shards.meta["words"], len(shards), out_dir)
    return shards

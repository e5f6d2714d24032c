"""What a pretraining config computes, named without computing it: its run's fingerprint and the folder its
model is exported to (found in the tracking store for reuse, for a plan, for a table), and `--dry-run`'s
summary of what it would train on. A module of its own, free of Lightning and MLflow, so that planning an
experiment imports neither (ablations/experiment/plan.py); ablations/run/pretrain.py runs what it names."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from omegaconf import DictConfig, OmegaConf

from ablations.config import PRETRAIN_RESULT_KEYS, flatten, under_key
from ablations.places import resolve_data_dir, resolve_work_dir
from ablations.run.pretrain_checks import check_config
from ablations.run.pretrain_inputs import load_run_corpus, resolve_pretrain_vocab, shard_settings, shards_dir
from bioablate_core.fingerprints import digest
from datamodules.pretrain.corpora import corpus_fingerprint
from datamodules.pretrain.summary import corpus_summary
from datamodules.pretrain.vocab import file_hash
from lightning_modules.models import model_fingerprint, resolve_model_dir


class PretrainIdentity(NamedTuple):
    """What a pretraining config computes. Unpacks and indexes like the tuple `identify` returned
    before: [0] fingerprint, [1] model_dir."""

    fingerprint: str  # the run's: finds it in the tracking store (tag `fingerprint`)
    model_dir: Path  # where the finished run's model is exported


def dry_run(cfg: DictConfig) -> list[str]:
    """What `run_pretrain(cfg)` would train on, and how often it would see it, without building or
    training anything: the corpus size (exact once its shards exist, else estimated from samples), the
    steps, tokens seen and passes over the corpus, with a warning past ~10 passes."""
    check_config(cfg)
    p = cfg.pretrain
    data_dir, work_dir = resolve_data_dir(cfg.data_dir), resolve_work_dir(cfg)
    corpus_fp = corpus_fingerprint(p.corpus, data_dir)
    vocab_path = resolve_pretrain_vocab(cfg, data_dir, work_dir, corpus_fp, train=False)
    meta = None
    if vocab_path is not None:
        meta_file = shards_dir(cfg, work_dir, vocab_path, corpus_fp) / "meta.json"
        meta = json.loads(meta_file.read_text()) if meta_file.is_file() else None
    devices = cfg.trainer.devices if isinstance(cfg.trainer.devices, int) and cfg.trainer.devices > 0 else 1
    settings = shard_settings(cfg)
    return corpus_summary(load_run_corpus(cfg, data_dir), seq_len=p.seq_len, batch_size=p.batch_size,
                          accumulate=p.accumulate, max_steps=p.max_steps,
                          world_size=devices * cfg.trainer.num_nodes, pairs=settings["pairs"],
                          vocab_path=vocab_path, lowercase=settings["lowercase"], shards_meta=meta).lines()


def pretrain_fingerprint(cfg: DictConfig, corpus_fp: str, vocab_path: Path, init_fp: str) -> str:
    items = {k: v for k, v in flatten(cfg).items() if under_key(k, PRETRAIN_RESULT_KEYS)
             # a continual run's starting model counts by content (init_fp), not by its path
             and not (k == "pretrain.init" and init_fp != "scratch")}
    return digest({"config": items, "corpus": corpus_fp, "vocab": file_hash(vocab_path), "init": init_fp})


@dataclass(frozen=True)
class PretrainInputs:
    """Everything a pretraining run reads besides its config, resolved once."""

    identity: PretrainIdentity
    data_dir: Path
    work_dir: Path
    corpus_fp: str
    vocab_path: Path
    init_dir: Path | None  # the checkpoint continual pretraining starts from; None: from scratch


def resolve_inputs(cfg: DictConfig, train_vocab: bool = True) -> PretrainInputs | None:
    """The run's inputs and identity (config already checked). None only without `train_vocab`, while a
    `train:SIZE` vocabulary is not trained yet."""
    p = cfg.pretrain
    data_dir = resolve_data_dir(cfg.data_dir)
    work_dir = resolve_work_dir(cfg)
    corpus_fp = corpus_fingerprint(p.corpus, data_dir)
    vocab_path = resolve_pretrain_vocab(cfg, data_dir, work_dir, corpus_fp, train=train_vocab)
    if vocab_path is None:
        return None
    init_dir = None if p.init == "scratch" else resolve_model_dir(p.init)
    init_fp = ("scratch" if init_dir is None
               else model_fingerprint(OmegaConf.create({"name_or_path": p.init}), data_dir))
    run_fp = pretrain_fingerprint(cfg, corpus_fp, vocab_path, init_fp)
    return PretrainInputs(PretrainIdentity(run_fp, export_dir(cfg, work_dir, run_fp)), data_dir, work_dir,
                          corpus_fp, vocab_path, init_dir)


def export_dir(cfg: DictConfig, work_dir: Path, run_fp: str) -> Path:
    """Where the run's model is exported: `<work>/models/<model_dir_name>/`."""
    return work_dir / "models" / model_dir_name(cfg, run_fp)


def model_dir_name(cfg: DictConfig, run_fp: str) -> str:
    """A folder name a person can read (objective, corpus, masking, seed) plus the fingerprint's first 8
    characters, which tell apart runs that differ elsewhere (size, steps, vocabulary ...). A corpus given
    as a YAML file counts by its file name; a continued sequence `a>b` reads `a-then-b`."""
    p = cfg.pretrain
    corpus = "+".join(Path(part).stem if part.endswith((".yaml", ".yml")) else part
                      for part in p.corpus.replace(">", "-then-").split("+"))
    name = f"{p.objective}-{corpus}-{p.masking}-s{cfg.seed}"
    return f"{re.sub(r'[^A-Za-z0-9._+-]+', '_', name)}-{run_fp[:8]}"


def identify(cfg: DictConfig) -> PretrainIdentity | None:
    """What `run_pretrain(cfg)` would compute or reuse, without running anything, computed as
    run_pretrain does. None while it cannot be known: a `train:SIZE` vocabulary that is not trained yet
    (the run trains it)."""
    check_config(cfg)
    inputs = resolve_inputs(cfg, train_vocab=False)
    return None if inputs is None else inputs.identity

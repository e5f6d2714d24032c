"""One pretraining run, end to end: corpus -> vocabulary -> shards -> model -> Trainer -> HF directory.

Same lifecycle as fine-tuning (ablations/finetune.py): a run is identified by a fingerprint of its
`pretrain.*` / `model.*` settings, seed, precision, corpus files, vocabulary and starting checkpoint.
FINISHED already: reused. Killed (SIGKILL) or failed: the same command takes the MLflow run over and
resumes from `<work>/runs/<fingerprint>/checkpoints/last.ckpt`. Checkpoints are written every
`pretrain.checkpoint_every` optimizer steps (a Lightning "epoch" is that many steps), and data order,
masks and dropout depend only on (seed, step), so the resumed run ends with the weights an
uninterrupted one would have. The model is exported to `<work>/models/<fingerprint>/`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytorch_lightning as pl
from omegaconf import DictConfig, OmegaConf
from pytorch_lightning.callbacks import ModelCheckpoint
from torch.utils.data import DataLoader

from ablations.config import flatten, resolve_data_dir, resolve_tracking_uri, resolve_work_dir
from ablations.tracking import Tracker, git_commit
from core.distributed import is_ddp_worker
from core.errors import ConfigError, UnknownNameError
from datamodules.pretrain.corpora import corpus_fingerprint, evaluation_pmids, load_corpus, parse_corpus
from datamodules.pretrain.data import MicroBatches
from datamodules.pretrain.masking import check_masking
from datamodules.pretrain.shards import BatchPlan, Shards, build_shards, load_shards, shards_fingerprint
from datamodules.pretrain.vocab import (SPECIAL_TOKENS, file_hash, hf_tokenizer, parse_vocab, read_vocab,
                                        resolve_vocab_file, train_wordpiece)
from lightning_modules.algorithms.alum import Alum
from lightning_modules.models import model_fingerprint, resolve_model_dir
from lightning_modules.pretrain import (OBJECTIVES, OPTIMIZERS, PretrainModule, build_model, check_init,
                                        export_model, exported_model, load_continual, reinit_embeddings)

log = logging.getLogger("bioablate")
EXPERIMENT = "pretrain"


@dataclass
class PretrainResult:
    run_id: str | None
    fingerprint: str
    model_dir: Path
    reused: bool
    tracking_uri: str
    losses: list[float] = field(default_factory=list)  # MLM loss per micro-batch of this invocation


def _check(cfg: DictConfig) -> None:
    p = cfg.pretrain
    parse_corpus(p.corpus)
    check_masking(p.masking, p.mask_schedule)
    if p.objective not in OBJECTIVES:
        raise UnknownNameError("objective", p.objective, OBJECTIVES)
    if p.optimizer not in OPTIMIZERS:
        raise UnknownNameError("optimizer", p.optimizer, OPTIMIZERS)
    for key in ("seq_len", "batch_size", "accumulate", "max_steps", "checkpoint_every"):
        if p[key] < 1:
            raise ConfigError(f"pretrain.{key} must be at least 1 (got {p[key]})")
    if not 0 < p.mask_rate < 1:
        raise ConfigError(f"pretrain.mask_rate must be in (0, 1) (got {p.mask_rate})")
    if p.objective == "electra":
        if p.nsp:
            raise ConfigError("pretrain.nsp=true needs objective=bert (electra has no sentence-pair task)")
        if p.adversarial:
            raise ConfigError("pretrain.adversarial=true (ALUM) is implemented for objective=bert and albert, "
                              "not electra")
        if not 0 < p.generator_size <= 1:
            raise ConfigError(f"pretrain.generator_size must be in (0, 1] (got {p.generator_size})")
    if p.init != "scratch":
        check_init(resolve_model_dir(p.init), p.objective)


def _corpus_settings(cfg: DictConfig) -> dict:
    p = cfg.pretrain
    return {"corpus": p.corpus, "max_words": p.max_words, "min_words": p.min_words, "dedup": p.dedup,
            "exclude_eval_pmids": p.exclude_eval_pmids, "seed": cfg.seed}


def _load_corpus(cfg: DictConfig, data_dir: Path):
    p = cfg.pretrain
    exclude = evaluation_pmids(data_dir) if p.exclude_eval_pmids else None
    return load_corpus(p.corpus, data_dir, max_words=p.max_words, min_words=p.min_words, dedup=p.dedup,
                       exclude_pmids=exclude, seed=cfg.seed)


def init_vocab_file(init_dir: Path, work_dir: Path) -> Path:
    """vocab.txt of a checkpoint, or one written from its tokenizer.json (WordPiece)."""
    if (init_dir / "vocab.txt").is_file():
        return init_dir / "vocab.txt"
    tok = init_dir / "tokenizer.json"
    if tok.is_file():
        vocab = json.loads(tok.read_text())["model"].get("vocab")
        if isinstance(vocab, dict):
            out = work_dir / "cache" / "vocab" / f"init-{file_hash(tok)}" / "vocab.txt"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text("".join(t + "\n" for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])))
            return out
    raise ConfigError(f"pretrain.init {init_dir}: no WordPiece vocabulary (vocab.txt or tokenizer.json) "
                      "to inherit; set pretrain.vocab")


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
    key = json.dumps({"corpus": corpus_fp, **_corpus_settings(cfg), "size": spec.size,
                      "lowercase": spec.lowercase}, sort_keys=True)
    out_dir = work_dir / "cache" / "vocab" / hashlib.sha256(key.encode()).hexdigest()[:16]
    if not (out_dir / "vocab.txt").is_file():
        if not train:
            return None
        corpus = _load_corpus(cfg, data_dir)
        log.info("training a %d-entry WordPiece vocabulary on %s (%d words)", spec.size, p.corpus,
                 corpus.stats.words)
        sentences = (s for stage in corpus.stages for doc in stage for s in doc)
        train_wordpiece(sentences, spec.size, spec.lowercase, out_dir)
    return out_dir / "vocab.txt"


def prepare_shards(cfg: DictConfig, data_dir: Path, work_dir: Path, vocab_path: Path, corpus_fp: str) -> Shards:
    p = cfg.pretrain
    pairs = "sop" if p.objective == "albert" else ("nsp" if p.nsp and p.objective == "bert" else "none")
    settings = {**_corpus_settings(cfg), "seq_len": p.seq_len, "pairs": pairs,
                "lowercase": parse_vocab(p.vocab, p.lowercase).lowercase}
    out_dir = work_dir / "cache" / "shards" / shards_fingerprint(corpus_fp, vocab_path, settings)
    if (out_dir / "meta.json").is_file():
        return load_shards(out_dir)
    corpus = _load_corpus(cfg, data_dir)
    log.info("tokenizing %s: %d documents, %d words -> %s", p.corpus, corpus.stats.documents,
             corpus.stats.words, out_dir)
    return build_shards(corpus, vocab_path, settings["lowercase"], p.seq_len, pairs, cfg.seed, out_dir)


def pretrain_fingerprint(cfg: DictConfig, corpus_fp: str, vocab_path: Path, init_fp: str) -> str:
    items = {k: v for k, v in flatten(cfg).items()
             if (k.startswith("pretrain.") or k.startswith("model.") or k in ("seed", "trainer.precision"))
             and k not in ("model.name_or_path", "model.vocab", "model.lowercase")
             # a continual run's starting model counts by content (init_fp), not by its path
             and not (k == "pretrain.init" and init_fp != "scratch")}
    payload = json.dumps({"config": items, "corpus": corpus_fp, "vocab": file_hash(vocab_path),
                          "init": init_fp}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def identify(cfg: DictConfig) -> tuple[str, Path] | None:
    """What `run_pretrain(cfg)` would compute or reuse, without running anything: (fingerprint, model
    directory), computed as run_pretrain does. None while it cannot be known: a `train:SIZE` vocabulary
    that is not trained yet (the run trains it)."""
    _check(cfg)
    p = cfg.pretrain
    data_dir = resolve_data_dir(cfg.data_dir)
    work_dir = resolve_work_dir(cfg)
    corpus_fp = corpus_fingerprint(p.corpus, data_dir)
    vocab_path = resolve_pretrain_vocab(cfg, data_dir, work_dir, corpus_fp, train=False)
    if vocab_path is None:
        return None
    init_fp = ("scratch" if p.init == "scratch"
               else model_fingerprint(OmegaConf.create({"name_or_path": p.init}), data_dir))
    run_fp = pretrain_fingerprint(cfg, corpus_fp, vocab_path, init_fp)
    return run_fp, work_dir / "models" / run_fp


class PretrainData(pl.LightningDataModule):
    """A Lightning epoch = the next `checkpoint_every` optimizer steps from the current one."""

    def __init__(self, shards: Shards, cfg: DictConfig, vocab: list[str]):
        super().__init__()
        self.shards, self.cfg, self.vocab = shards, cfg, vocab

    def train_dataloader(self) -> DataLoader:
        p, trainer = self.cfg.pretrain, self.trainer
        world = trainer.world_size
        micro_per_epoch = p.checkpoint_every * p.accumulate
        total_micro = p.max_steps * p.accumulate
        # keyed by the restored optimizer step, not Lightning's epoch counter (a resumed fit loop counts
        # the interrupted epoch its own way); an epoch ends at the next checkpoint boundary
        first = trainer.global_step * p.accumulate
        last = min((first // micro_per_epoch + 1) * micro_per_epoch, total_micro)
        plan = BatchPlan(self.shards.stage_sizes, p.batch_size, total_micro * world, self.cfg.seed)
        index = {t: i for i, t in enumerate(self.vocab)}
        special_ids = [index[t] for t in SPECIAL_TOKENS]
        dataset = MicroBatches(
            self.shards, plan, first, last, rank=trainer.global_rank,
            world_size=world, accumulate=p.accumulate, max_steps=p.max_steps, seed=self.cfg.seed,
            masking=p.masking, rate=p.mask_rate, schedule=p.mask_schedule, mask_id=index["[MASK]"],
            replace_low=max(special_ids) + 1, special_ids=special_ids)
        return DataLoader(dataset, batch_size=None, shuffle=False, num_workers=self.cfg.trainer.num_workers)


def run_pretrain(cfg: DictConfig, force: bool = False) -> PretrainResult:
    _check(cfg)
    p = cfg.pretrain
    data_dir = resolve_data_dir(cfg.data_dir)
    work_dir = resolve_work_dir(cfg)
    tracking_uri = resolve_tracking_uri(cfg, work_dir)
    is_child = is_ddp_worker()

    corpus_fp = corpus_fingerprint(p.corpus, data_dir)
    vocab_path = resolve_pretrain_vocab(cfg, data_dir, work_dir, corpus_fp)
    init_dir = None if p.init == "scratch" else resolve_model_dir(p.init)
    init_fp = "scratch" if init_dir is None else model_fingerprint(OmegaConf.create({"name_or_path": p.init}), data_dir)
    run_fp = pretrain_fingerprint(cfg, corpus_fp, vocab_path, init_fp)
    model_dir = work_dir / "models" / run_fp

    tracker = Tracker(tracking_uri, cfg.experiment_name, artifact_root=work_dir / "mlartifacts")
    previous = tracker.find(run_fp)
    if (previous is not None and previous.info.status == "FINISHED" and not force
            and (model_dir / "config.json").is_file()):
        log.info("pretraining run %s already finished: %s", run_fp, model_dir)
        return PretrainResult(previous.info.run_id, run_fp, model_dir, True, tracking_uri)

    shards = prepare_shards(cfg, data_dir, work_dir, vocab_path, corpus_fp)
    run_dir = work_dir / "runs" / run_fp
    checkpoint_dir = run_dir / "checkpoints"
    resume = previous is not None and previous.info.status != "FINISHED" and not force
    run_id = None
    if is_child:
        run_id = previous.info.run_id if previous is not None else None
    elif resume:
        run_id = previous.info.run_id
        log.info("resuming MLflow run %s (%s)", run_id, previous.info.status)
    else:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
        tags = {"kind": "pretrain", "corpus": p.corpus, "objective": p.objective, "masking": p.masking,
                "vocab": p.vocab, "init": p.init, "seed": str(cfg.seed), "profile": cfg.profile,
                "fingerprint": run_fp, "git_commit": git_commit(), "model_dir": str(model_dir),
                "shards": str(shards.path), "corpus_words": str(shards.meta["words"]),
                "corpus_tokens": str(shards.meta["tokens"]), "sequences": str(len(shards))}
        name = f"{p.objective}-{p.corpus}-{p.masking}-s{cfg.seed}"
        run_id = tracker.create(name, tags, flatten(cfg))
    last_checkpoint = checkpoint_dir / "last.ckpt"

    vocab = read_vocab(vocab_path)
    tokenizer = hf_tokenizer(vocab_path, parse_vocab(p.vocab, p.lowercase).lowercase)
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    if init_dir is None:
        model = build_model(p.objective, p.nsp, len(vocab), vocab.index("[PAD]"), cfg.model, p.seq_len,
                            p.embedding_size, p.share_layers, p.generator_size)
    else:
        model = load_continual(init_dir, p.objective, p.nsp, p.generator_size)
        if file_hash(vocab_path) != file_hash(init_vocab_file(init_dir, work_dir)):
            reinit_embeddings(model, len(vocab))  # continual pretraining with a new vocabulary
    alum = Alum(**p.alum) if p.adversarial else None
    module = PretrainModule(model, pair_loss=p.objective == "albert" or p.nsp, lr=p.lr,
                            weight_decay=p.weight_decay, warmup_ratio=p.warmup_ratio, total_steps=p.max_steps,
                            optimizer=p.optimizer, alum=alum, seed=cfg.seed,
                            discriminator_weight=p.discriminator_weight)
    datamodule = PretrainData(shards, cfg, vocab)
    checkpoints = ModelCheckpoint(dirpath=checkpoint_dir, filename="latest", save_top_k=1, save_last=True,
                                  every_n_epochs=1)

    def fit() -> None:
        trainer = pl.Trainer(
            max_steps=p.max_steps, max_epochs=-1,
            accumulate_grad_batches=p.accumulate, gradient_clip_val=p.grad_clip or None,
            accelerator=cfg.trainer.accelerator, devices=cfg.trainer.devices, num_nodes=cfg.trainer.num_nodes,
            strategy=cfg.trainer.strategy, precision=cfg.trainer.precision,
            logger=tracker.lightning_logger(run_id) if run_id is not None else False,
            callbacks=[checkpoints], enable_progress_bar=cfg.trainer.progress_bar,
            enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
            log_every_n_steps=cfg.trainer.log_every_n_steps, default_root_dir=run_dir,
            reload_dataloaders_every_n_epochs=1, use_distributed_sampler=False,
        )
        trainer.fit(module, datamodule=datamodule,
                    ckpt_path=str(last_checkpoint) if resume and last_checkpoint.exists() else None)
        if trainer.is_global_zero:
            export_model(exported_model(model), tokenizer, model_dir, vocab_path)

    if is_child or run_id is None:
        fit()
        # a DDP worker process (run_id None) neither owns nor reports the MLflow run: rank 0 does
        return PretrainResult(None if is_child else run_id, run_fp, model_dir, False, tracking_uri, module.history)
    with tracker.tracked_run(run_id):
        fit()
        tracker.client.set_tag(run_id, "model_dir", str(model_dir))
        if module.history:
            tracker.log_metrics(run_id, {f"final/{module.history_name}": module.history[-1]})
    if not cfg.keep_checkpoints:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
    return PretrainResult(run_id, run_fp, model_dir, False, tracking_uri, module.history)

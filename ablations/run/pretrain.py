"""One pretraining run, end to end: corpus -> vocabulary -> shards -> model -> Trainer -> HF directory.

A run is identified by a fingerprint of its `pretrain.*` / `model.*` settings, seed, precision, corpus
files, vocabulary and starting checkpoint, and goes through the tracked-run lifecycle of
`ablations.run.lifecycle` (as fine-tuning does): FINISHED already, with its exported model still there:
reused. Killed (SIGKILL) or failed: the same command takes the MLflow run over and resumes from
`<work>/runs/<fingerprint>/checkpoints/last.ckpt`. Checkpoints are written every
`pretrain.checkpoint_every` optimizer steps (a Lightning "epoch" is that many steps), and data order,
masks and dropout depend only on (seed, step), so the resumed run ends with the weights an
uninterrupted one would have. The model is exported, with its model card, to
`<work>/models/<objective>-<corpus>-<masking>-s<seed>-<fingerprint[:8]>/` (`model_dir_name`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import pytorch_lightning as pl
from omegaconf import DictConfig
from pytorch_lightning.callbacks import ModelCheckpoint

from ablations.checks import check_accelerator_present
from ablations.config import PRETRAIN_EXPERIMENT
from ablations.places import run_params, shown_place
from ablations.run.cards import PretrainFacts, Provenance, pretrain_card
from ablations.run.costs import log_compute
from ablations.run.dashboard import log_corpus
from ablations.run.figures import curves_figure
from ablations.run.lifecycle import InterruptCheck, TrackedRun
from ablations.run.pretrain_checks import check_config
from ablations.run.pretrain_identity import PretrainInputs, resolve_inputs
from ablations.run.pretrain_inputs import (
    prepare_shards,
)
from ablations.run.tracking import git_commit
from datamodules.pretrain.data import BatchingSpec
from datamodules.pretrain.datamodule import PretrainData
from datamodules.pretrain.masking import MaskingSpec
from datamodules.pretrain.shards import Shards
from datamodules.pretrain.vocab import (
    file_hash,
    hf_tokenizer,
    init_vocab_file,
    parse_vocab,
    read_vocab,
)
from lightning_modules.algorithms.alum import Alum
from lightning_modules.checkpoints import AtomicCheckpointIO, usable_checkpoint
from lightning_modules.compiling import compile_cache_dir, use_compile_cache
from lightning_modules.compute import ComputeCounter
from lightning_modules.fused_qkv import fuse_qkv
from lightning_modules.matmul_precision import answerable_matmul_precision
from lightning_modules.pretrain import PretrainModule
from lightning_modules.pretrain_models import (
    ObjectiveSpec,
    build_model,
    export_model,
    exported_model,
    load_continual,
    reinit_embeddings,
)
from lightning_modules.progress import StepProgressBar

log = logging.getLogger("bioablate")
EXPERIMENT = PRETRAIN_EXPERIMENT


@dataclass
class PretrainResult:
    run_id: str | None  # None in a DDP worker process (rank > 0): rank 0 owns the MLflow run
    fingerprint: str
    model_dir: Path
    reused: bool
    tracking_uri: str
    # the objective's loss (MLM; electra: its total) per step of the run, resumed segments included (from the
    # store; a DDP worker: per micro-batch of its own segment)
    losses: list[float] = field(default_factory=list)
    experiment_id: str = ""  # the MLflow experiment of `run_id` ("" in a DDP worker process)


def run_pretrain(cfg: DictConfig, force: bool = False, wait: bool = True,
                 callbacks: Sequence[pl.Callback] = ()) -> PretrainResult:
    """Run (or reuse, or resume) one pretraining run and export its model. While another live process
    works on the same fingerprint this waits for it and then reuses its run; with `wait=False` it raises
    `bioablate_core.claims.ClaimHeld` instead. `callbacks` are added to the Trainer (e.g. progress lines)."""
    check_config(cfg)
    check_accelerator_present(cfg)
    inputs = resolve_inputs(cfg)
    run_fp, model_dir = inputs.identity
    run = TrackedRun.open(cfg, run_fp, force, kind="pretrain")
    usable = lambda _: (model_dir / "config.json").is_file()  # noqa: E731
    done = run.finished(usable)
    if done is None:
        with run.claimed(wait):
            done = run.finished(usable)  # the holder we waited for may have finished it
            if done is None:
                return _train(cfg, inputs, run, callbacks)
    return PretrainResult(done.info.run_id, run_fp, model_dir, True, run.tracking_uri,
                          experiment_id=done.info.experiment_id)


def _train(cfg: DictConfig, inputs: PretrainInputs, run: TrackedRun, callbacks: Sequence[pl.Callback] = ()
           ) -> PretrainResult:
    model_dir = inputs.identity.model_dir
    shards = prepare_shards(cfg, inputs.data_dir, inputs.work_dir, inputs.vocab_path, inputs.corpus_fp)
    run.start(f"{cfg.pretrain.objective}-{cfg.pretrain.corpus}-{cfg.pretrain.masking}-s{cfg.seed}",
              _run_tags(cfg, model_dir, shards, inputs.work_dir), run_params(cfg, "pretrain"))
    if not run.is_worker:  # its corpus, as the run's MLflow dataset input
        log_corpus(run.tracker.client, run.run_id, cfg.pretrain.corpus,
                   shown_place(shards.path, inputs.work_dir, "work_dir"), inputs.corpus_fp, len(shards))
    with run.tracked():
        counter = ComputeCounter()
        module = _fit_and_export(cfg, inputs, shards, run, counter, callbacks)
        log_compute(run, counter)
        run.set_tags({"model_dir": shown_place(model_dir, inputs.work_dir)})  # relative to the work directory
        if module.history:
            run.log_metrics({f"final/{module.history_name}": module.history[-1]})
        losses = module.history
        if not run.is_worker:  # a resumed run's first loss is the run's, not its last segment's
            stored = run.tracker.client.get_metric_history(run.run_id, f"train/{module.history_name}")
            losses = [m.value for m in sorted(stored, key=lambda m: m.step)] or losses
        if not run.is_worker and cfg.figures:
            history = {"train/loss": [(m.step, m.value) for m in run.tracker.client.get_metric_history(
                run.run_id, "train/loss")]}
            figure = curves_figure(run.run_dir / "artifacts" / "figures" / "curves.png", history,
                                   f"{cfg.pretrain.objective} on {cfg.pretrain.corpus}, seed {cfg.seed}")
            run.log_artifacts([figure] if figure else [], "figures")
    return PretrainResult(run.run_id, inputs.identity.fingerprint, model_dir, False, run.tracking_uri,
                          losses, "" if run.is_worker else run.tracker.experiment_id)


def _run_tags(cfg: DictConfig, model_dir: Path, shards: Shards, work_dir: Path) -> dict[str, str]:
    p = cfg.pretrain
    return {"kind": "pretrain", "corpus": p.corpus, "objective": p.objective, "masking": p.masking,
            "vocab": p.vocab, "init": p.init, "seed": str(cfg.seed), "profile": cfg.profile,
            "model_dir": shown_place(model_dir, work_dir), "shards": shown_place(shards.path, work_dir, "work_dir"),
            "corpus_words": str(shards.meta["words"]),
            "corpus_tokens": str(shards.meta["tokens"]), "sequences": str(len(shards))}


def _module(cfg: DictConfig, inputs: PretrainInputs, vocab: list[str]) -> PretrainModule:
    """The model to pretrain (fresh, or a checkpoint to continue from), seeded, in its LightningModule."""
    p = cfg.pretrain
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    objective = ObjectiveSpec.from_config(p)
    if inputs.init_dir is None:
        model = build_model(objective, len(vocab), vocab.index("[PAD]"), cfg.model, p.seq_len)
    else:
        model = load_continual(inputs.init_dir, objective)
        its_vocab = init_vocab_file(inputs.init_dir, inputs.work_dir, "to tell whether pretrain.vocab is its own; "
                                    "copy the vocabulary it was trained with beside its config.json")
        if file_hash(inputs.vocab_path) != file_hash(its_vocab):
            reinit_embeddings(model, len(vocab))  # continual pretraining with a new vocabulary
    alum = Alum(**p.alum) if p.adversarial else None
    model = fuse_qkv(model) if p.fused_qkv else model  # after a checkpoint loads: its weights stacked too
    module = PretrainModule(model, objective=objective, lr=p.lr, weight_decay=p.weight_decay,
                            warmup_ratio=p.warmup_ratio, total_steps=p.max_steps, optimizer=p.optimizer,
                            alum=alum, seed=cfg.seed, log_every=cfg.trainer.log_every_n_steps,
                            master_weights=p.master_weights)
    if cfg.trainer.compile:  # the whole forward + loss + backward; one static shape with pretrain.max_predictions
        use_compile_cache(compile_cache_dir(inputs.work_dir))
        module.compile_losses(None if cfg.trainer.compile_mode == "default" else cfg.trainer.compile_mode)
    return module


def _fit_and_export(cfg: DictConfig, inputs: PretrainInputs, shards: Shards, run: TrackedRun,
                    counter: ComputeCounter, callbacks: Sequence[pl.Callback] = ()) -> PretrainModule:
    """Train to `pretrain.max_steps` (resuming from the run's checkpoint if it has one), checkpointing
    every `checkpoint_every` steps, and export the model (rank 0)."""
    p = cfg.pretrain
    vocab = read_vocab(inputs.vocab_path)
    tokenizer = hf_tokenizer(inputs.vocab_path, parse_vocab(p.vocab, p.lowercase).lowercase)
    module = _module(cfg, inputs, vocab)
    datamodule = PretrainData(shards, vocab, batching=BatchingSpec.from_config(p, cfg.seed),
                              masking=MaskingSpec.from_config(p), num_workers=cfg.trainer.num_workers)
    # last.ckpt, overwritten at every checkpoint: the one file a resume reads. (Lightning's `save_last`
    # writes it only as a second full copy of a top-k checkpoint: a BERT-base one, 1.3 GB, written twice.)
    checkpoints = ModelCheckpoint(dirpath=run.checkpoint_dir, filename="last", save_top_k=1, every_n_epochs=1,
                                  enable_version_counter=False)
    answerable_matmul_precision()  # Lightning's CUDA check must be able to read it
    trainer = pl.Trainer(
        max_steps=p.max_steps, max_epochs=-1,
        accumulate_grad_batches=p.accumulate, gradient_clip_val=p.grad_clip or None,
        accelerator=cfg.trainer.accelerator, devices=cfg.trainer.devices, num_nodes=cfg.trainer.num_nodes,
        strategy=cfg.trainer.strategy, precision=cfg.trainer.precision,
        logger=run.lightning_logger(cfg.trainer.log_every_n_steps),
        callbacks=[checkpoints, InterruptCheck(), counter, *run.callbacks(), *callbacks,
                   *([StepProgressBar()] if cfg.trainer.progress_bar else [])],
        enable_progress_bar=cfg.trainer.progress_bar,
        enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
        # every step's point is logged: read back from the device and stored log_every_n_steps at a time
        log_every_n_steps=cfg.trainer.log_every_n_steps, default_root_dir=run.run_dir,
        reload_dataloaders_every_n_epochs=1, use_distributed_sampler=False, plugins=[AtomicCheckpointIO()],
    )
    # rank 0 checked it in `run.start` (setting an unreadable one aside); a worker checks it here
    resume_from = usable_checkpoint(run.resume_from, set_aside=False) if run.is_worker else run.resume_from
    trainer.fit(module, datamodule=datamodule, ckpt_path=str(resume_from) if resume_from else None, weights_only=True)
    if trainer.is_global_zero:
        model = exported_model(module.model, trainer.optimizers[0])
        card = _card(cfg, inputs, shards, run, trainer, model, len(vocab))
        export_model(model, tokenizer, inputs.identity.model_dir, inputs.vocab_path, card)
    return module


def _card(cfg: DictConfig, inputs: PretrainInputs, shards: Shards, run: TrackedRun, trainer: pl.Trainer,
          model, vocab_size: int) -> str | None:
    """The exported model's card (None in a process without the MLflow run)."""
    if run.is_worker:
        return None
    p = cfg.pretrain
    metrics = run.tracker.client.get_run(run.run_id).data.metrics
    facts = PretrainFacts(
        objective=p.objective, nsp=ObjectiveSpec.from_config(p).pairs == "nsp", corpus=p.corpus,
        corpus_documents=shards.meta["documents"], corpus_words=shards.meta["words"],
        corpus_tokens=shards.meta["tokens"], sequences=len(shards), seq_len=p.seq_len, vocab=p.vocab,
        vocab_size=vocab_size, lowercase=parse_vocab(p.vocab, p.lowercase).lowercase, init=p.init,
        masking=p.masking, steps=trainer.global_step,
        sequences_per_step=p.batch_size * p.accumulate * trainer.world_size,
        final_losses={k.removeprefix("train/"): v for k, v in metrics.items()
                      if k.startswith("train/") and k.endswith("loss")},
        max_position_embeddings=model.config.max_position_embeddings,
        pooler_untrained=p.objective == "bert" and not p.nsp)
    provenance = Provenance(inputs.identity.fingerprint, run.run_id, run.tracking_uri, git_commit(), cfg)
    return pretrain_card(facts, provenance)

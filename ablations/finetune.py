"""One fine-tuning run, end to end: config -> data -> model -> Trainer -> MLflow.

A run is identified by its fingerprint (config minus bookkeeping keys, data content, model content):
- FINISHED in the tracking store already: reused, nothing is recomputed (unless `force`);
- FAILED / KILLED / still RUNNING (the process died): the same MLflow run is taken over and training
  resumes from `<work_dir>/runs/<fingerprint>/checkpoints/last.ckpt`;
- otherwise a new MLflow run is created.

Under DDP (`trainer.devices=N trainer.strategy=ddp`) Lightning starts the other ranks by rerunning the
command; those processes (LOCAL_RANK / NODE_RANK set and not 0) train and evaluate but never touch the
tracking store: the MLflow run, its metrics and artifacts belong to rank 0.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import pytorch_lightning as pl
from omegaconf import DictConfig, OmegaConf
from pytorch_lightning.callbacks import ModelCheckpoint

from ablations.config import (fingerprint, flatten, resolve_data_dir, resolve_tracking_uri,
                              resolve_work_dir)
from ablations.tracking import Tracker, git_commit
from ablations.variants import check_variants
from core.distributed import is_ddp_worker
from datamodules.custom import register_from_yaml
from core.errors import ConfigError, MissingDataError
from datamodules.finetune_data import FinetuneDataModule
from datamodules.registry import DatasetSpec, get_dataset
from lightning_modules.algorithms.alum import Alum
from lightning_modules.finetune import FineTuneModule
from lightning_modules.heads import make_head
from lightning_modules.models import RANDOM_BERT, load_encoder, model_fingerprint

log = logging.getLogger("bioablate")


@dataclass
class FinetuneResult:
    run_id: str | None  # None in a DDP worker process (rank > 0): rank 0 owns the MLflow run
    fingerprint: str
    reused: bool  # True: an earlier FINISHED run with the same fingerprint was found
    tracking_uri: str
    best_dev: dict[str, float] = field(default_factory=dict)
    test: dict[str, float] = field(default_factory=dict)


def _metrics_of(run, prefix: str) -> dict[str, float]:
    return {k[len(prefix):]: v for k, v in run.data.metrics.items() if k.startswith(prefix)}


def identify(cfg: DictConfig) -> tuple[DatasetSpec, Path, str, str]:
    """Check a fine-tuning config and name what it would compute: (dataset spec, data directory,
    data fingerprint, run fingerprint). The run fingerprint is what finds the run in the tracking store
    (tag `fingerprint`), e.g. for reuse or for rendering a table without running anything."""
    for dataset_file in cfg.datasets:
        register_from_yaml(dataset_file)
    spec = get_dataset(cfg.task)
    check_variants(cfg.finetune, spec)
    data_dir = resolve_data_dir(cfg.data_dir)
    missing = spec.missing_files(data_dir)
    if missing:
        raise MissingDataError(spec.base_dir(data_dir), {spec.name: missing})
    if cfg.finetune.adversarial and spec.task_type == "similarity":
        raise ConfigError(f"finetune.adversarial=true does not apply to {spec.name}: ALUM compares predicted "
                          "distributions and a regression task has none; drop the override")
    data_fp = spec.fingerprint(data_dir)
    # A model directory or named model counts by its files' content, not by where it lies, so the same
    # pretrained model finds the same runs from any work directory; a random BERT has no files to hash
    # beyond its vocabulary, so its name stays in.
    by_content = () if cfg.model.name_or_path == RANDOM_BERT else ("model.name_or_path",)
    run_fp = fingerprint(cfg, data_fp + model_fingerprint(cfg.model, data_dir), exclude=by_content)
    return spec, data_dir, data_fp, run_fp


def run_finetune(cfg: DictConfig, force: bool = False, callbacks: Sequence[pl.Callback] = (),
                 tags: dict[str, str] | None = None,
                 stop_exceptions: tuple[type[BaseException], ...] = ()) -> FinetuneResult:
    """Run (or reuse, or resume) one fine-tuning run.

    `callbacks` are added to the Trainer (e.g. an Optuna pruning callback), `tags` to a newly created
    MLflow run (e.g. `mlflow.parentRunId` for a sweep's trial), and `stop_exceptions` end the run as
    KILLED rather than FAILED (e.g. optuna.TrialPruned).
    """
    spec, data_dir, data_fp, run_fp = identify(cfg)
    work_dir = resolve_work_dir(cfg)
    tracking_uri = resolve_tracking_uri(cfg, work_dir)
    run_dir = work_dir / "runs" / run_fp
    checkpoint_dir = run_dir / "checkpoints"
    last_checkpoint = checkpoint_dir / "last.ckpt"
    if is_ddp_worker():
        # rank 0 decided reuse / resume / new before starting this process and removed stale
        # checkpoints; a last.ckpt that exists now is the one it resumes from
        module, _, _ = _fit_and_test(cfg, spec, data_dir, data_fp, run_dir, checkpoint_dir,
                                     last_checkpoint if last_checkpoint.exists() else None, callbacks, None)
        return FinetuneResult(None, run_fp, False, tracking_uri, {}, module.test_metrics)

    tracker = Tracker(tracking_uri, cfg.experiment_name, artifact_root=work_dir / "mlartifacts")
    previous = tracker.find(run_fp)
    if previous is not None and previous.info.status == "FINISHED" and not force:
        log.info("run %s already finished (MLflow run %s): reusing it", run_fp, previous.info.run_id)
        return FinetuneResult(previous.info.run_id, run_fp, True, tracking_uri,
                              _metrics_of(previous, "best_dev/"), _metrics_of(previous, "test/"))

    resume = previous is not None and previous.info.status != "FINISHED" and not force
    if resume:
        run_id = previous.info.run_id
        log.info("resuming MLflow run %s (%s)", run_id, previous.info.status)
    else:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
        tags = {"task": spec.name, "task_type": spec.task_type, "dataset": spec.name,
                "model": cfg.model.name_or_path, "seed": str(cfg.seed), "profile": cfg.profile,
                "metric": spec.metric, "fingerprint": run_fp, "data_fingerprint": data_fp,
                "git_commit": git_commit(), "kind": "finetune", **(tags or {})}
        run_id = tracker.create(f"{spec.name}-{cfg.model.name_or_path.rsplit('/', 1)[-1]}-s{cfg.seed}",
                                tags, flatten(cfg))

    with tracker.tracked_run(run_id, stop_exceptions):
        module, datamodule, best_epoch = _fit_and_test(
            cfg, spec, data_dir, data_fp, run_dir, checkpoint_dir,
            last_checkpoint if resume and last_checkpoint.exists() else None, callbacks,
            (tracker, run_id))
        best_dev = module.dev_history[best_epoch]
        tracker.log_metrics(run_id, {f"best_dev/{k}": v for k, v in best_dev.items()})
        tracker.client.set_tag(run_id, "best_epoch", str(best_epoch))
        _log_artifacts(tracker, run_id, run_dir, cfg, datamodule, module.test_predictions)
    if not cfg.keep_checkpoints:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
    return FinetuneResult(run_id, run_fp, False, tracking_uri, best_dev, module.test_metrics)


def _fit_and_test(cfg: DictConfig, spec: DatasetSpec, data_dir: Path, data_fp: str, run_dir: Path,
                  checkpoint_dir: Path, ckpt_path: Path | None, callbacks: Sequence[pl.Callback],
                  tracking: tuple[Tracker, str] | None
                  ) -> tuple[FineTuneModule, FinetuneDataModule, int]:
    """Train with dev evaluation every epoch, then score test with the best dev epoch's weights.
    `tracking`: (tracker, run_id) on rank 0, None in a DDP worker."""
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    ft = cfg.finetune
    encoder, tokenizer = load_encoder(cfg.model, data_dir, ft.dropout)
    max_length = min(ft.max_length or spec.max_length, encoder.config.max_position_embeddings)
    cache_dir = resolve_work_dir(cfg) / "cache" / "tokenized" if ft.cache_tokenized else None
    datamodule = FinetuneDataModule(
        spec, data_dir, tokenizer, max_length, ft.batch_size, ft.eval_batch_size, ft.max_train_examples,
        ft.max_eval_examples, cfg.trainer.num_workers, ft.tagging, ft.subtoken_labels, ft.re_input,
        cache_dir=cache_dir, data_fingerprint=data_fp, bucketing=ft.bucketing, seed=cfg.seed)
    datamodule.setup()
    if tracking is not None:
        hits = set(datamodule.from_cache.values())
        tracking[0].client.set_tag(tracking[1], "tokenization_cache",
                                   "off" if cache_dir is None else
                                   "hit" if hits == {True} else "miss" if hits == {False} else "partial")
    if len(tokenizer) > encoder.get_input_embeddings().num_embeddings:  # entity markers were added
        encoder.resize_token_embeddings(len(tokenizer))
    if cfg.trainer.compile:
        encoder.compile(dynamic=True)  # in place: parameter names (and checkpoints) stay the same
    head = make_head(ft, datamodule.encoder, encoder.config.hidden_size)
    alum = Alum(**ft.alum) if ft.adversarial else None
    module = FineTuneModule(encoder, head, ft.lr, ft.weight_decay, ft.warmup_ratio, alum=alum)
    checkpoints = ModelCheckpoint(dirpath=checkpoint_dir, filename="best", monitor="dev/score",
                                  mode="max", save_top_k=1, save_last=True)
    trainer = pl.Trainer(
        max_epochs=ft.epochs, accelerator=cfg.trainer.accelerator,
        devices=cfg.trainer.devices, num_nodes=cfg.trainer.num_nodes, strategy=cfg.trainer.strategy,
        precision=cfg.trainer.precision,
        logger=tracking[0].lightning_logger(tracking[1]) if tracking is not None else False,
        callbacks=[checkpoints, *callbacks], enable_progress_bar=cfg.trainer.progress_bar,
        enable_model_summary=False, num_sanity_val_steps=0,
        log_every_n_steps=cfg.trainer.log_every_n_steps, default_root_dir=run_dir,
        # the datamodule's samplers shard batches over ranks themselves (disjoint evaluation shares,
        # length bucketing): Lightning must not wrap them in a DistributedSampler
        use_distributed_sampler=False,
    )
    trainer.fit(module, datamodule=datamodule, ckpt_path=str(ckpt_path) if ckpt_path else None)
    best_epoch = max(range(len(module.dev_history)), key=lambda i: module.dev_history[i]["score"])
    trainer.test(module, datamodule=datamodule, ckpt_path=checkpoints.best_model_path or None, verbose=False)
    return module, datamodule, best_epoch


def _log_artifacts(tracker: Tracker, run_id: str, run_dir: Path, cfg: DictConfig,
                   datamodule: FinetuneDataModule, predictions: list) -> None:
    out = run_dir / "artifacts"
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    encoder = datamodule.encoder
    with open(out / "test_predictions.jsonl", "w") as f:
        for instance, prediction in zip(datamodule.instances["test"], predictions):
            f.write(json.dumps({"id": instance.id, "gold": encoder.to_json(encoder.gold(instance)),
                                "prediction": encoder.to_json(prediction)}) + "\n")
    for name in ("config.yaml", "test_predictions.jsonl"):
        tracker.client.log_artifact(run_id, str(out / name))

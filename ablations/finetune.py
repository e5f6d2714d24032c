"""One fine-tuning run, end to end: config -> data -> model -> Trainer -> MLflow.

A run is identified by its fingerprint (config minus bookkeeping keys, data content, model content):
- FINISHED in the tracking store already: reused, nothing is recomputed (unless `force`);
- FAILED / KILLED / still RUNNING (the process died): the same MLflow run is taken over and training
  resumes from `<work_dir>/runs/<fingerprint>/checkpoints/last.ckpt`;
- otherwise a new MLflow run is created.
"""

from __future__ import annotations

import json
import logging
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
from datamodules.custom import register_from_yaml
from datamodules.errors import MissingDataError
from datamodules.finetune_data import FinetuneDataModule
from datamodules.registry import DatasetSpec, get_dataset
from lightning_modules.finetune import FineTuneModule
from lightning_modules.heads import make_head
from lightning_modules.models import load_encoder, model_fingerprint

log = logging.getLogger("bioablate")


@dataclass
class FinetuneResult:
    run_id: str
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
    data_fp = spec.fingerprint(data_dir)
    return spec, data_dir, data_fp, fingerprint(cfg, data_fp + model_fingerprint(cfg.model, data_dir))


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

    tracker = Tracker(tracking_uri, cfg.experiment_name, artifact_root=work_dir / "mlartifacts")
    previous = tracker.find(run_fp)
    if previous is not None and previous.info.status == "FINISHED" and not force:
        log.info("run %s already finished (MLflow run %s): reusing it", run_fp, previous.info.run_id)
        return FinetuneResult(previous.info.run_id, run_fp, True, tracking_uri,
                              _metrics_of(previous, "best_dev/"), _metrics_of(previous, "test/"))

    run_dir = work_dir / "runs" / run_fp
    checkpoint_dir = run_dir / "checkpoints"
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
    last_checkpoint = checkpoint_dir / "last.ckpt"

    with tracker.tracked_run(run_id, stop_exceptions):
        pl.seed_everything(cfg.seed, workers=True, verbose=False)
        encoder, tokenizer = load_encoder(cfg.model, data_dir, cfg.finetune.dropout)
        max_length = min(cfg.finetune.max_length or spec.max_length, encoder.config.max_position_embeddings)
        ft = cfg.finetune
        datamodule = FinetuneDataModule(
            spec, data_dir, tokenizer, max_length, ft.batch_size, ft.eval_batch_size, ft.max_train_examples,
            ft.max_eval_examples, cfg.trainer.num_workers, ft.tagging, ft.subtoken_labels, ft.re_input)
        datamodule.setup()
        if len(tokenizer) > encoder.get_input_embeddings().num_embeddings:  # entity markers were added
            encoder.resize_token_embeddings(len(tokenizer))
        head = make_head(ft, datamodule.encoder, encoder.config.hidden_size)
        module = FineTuneModule(encoder, head, cfg.finetune.lr, cfg.finetune.weight_decay,
                                cfg.finetune.warmup_ratio)
        checkpoints = ModelCheckpoint(dirpath=checkpoint_dir, filename="best", monitor="dev/score",
                                      mode="max", save_top_k=1, save_last=True)
        trainer = pl.Trainer(
            max_epochs=cfg.finetune.epochs, accelerator=cfg.trainer.accelerator,
            devices=cfg.trainer.devices, num_nodes=cfg.trainer.num_nodes, strategy=cfg.trainer.strategy,
            precision=cfg.trainer.precision, logger=tracker.lightning_logger(run_id),
            callbacks=[checkpoints, *callbacks], enable_progress_bar=cfg.trainer.progress_bar,
            enable_model_summary=False, num_sanity_val_steps=0,
            log_every_n_steps=cfg.trainer.log_every_n_steps, default_root_dir=run_dir,
        )
        trainer.fit(module, datamodule=datamodule,
                    ckpt_path=str(last_checkpoint) if resume and last_checkpoint.exists() else None)

        best_epoch = max(range(len(module.dev_history)), key=lambda i: module.dev_history[i]["score"])
        best_dev = module.dev_history[best_epoch]
        trainer.test(module, datamodule=datamodule, ckpt_path=checkpoints.best_model_path or None,
                     verbose=False)
        if trainer.is_global_zero:
            tracker.log_metrics(run_id, {f"best_dev/{k}": v for k, v in best_dev.items()})
            tracker.client.set_tag(run_id, "best_epoch", str(best_epoch))
            _log_artifacts(tracker, run_id, run_dir, cfg, datamodule, module.test_predictions)
    if not cfg.keep_checkpoints:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
    return FinetuneResult(run_id, run_fp, False, tracking_uri, best_dev, module.test_metrics)


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

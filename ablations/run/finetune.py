"""One fine-tuning run, end to end, in the order `run_finetune` takes the steps:

identify (finetune_identity.py: the fingerprint) -> reuse a FINISHED run -> claim -> fit, resuming from
`<work_dir>/runs/<fingerprint>/checkpoints/last.ckpt` -> test the best dev epoch's weights -> log -> result.

A FAILED / KILLED / dead RUNNING run is taken over and resumed (ablations.run.lifecycle); a dataset with no
dev split (a user dataset's `dev: none`) trains `finetune.epochs` epochs and tests the last (tag
`epoch_selection`). A run with `keep_model` keeps its best weights in `<run dir>/model/` (`bioablate export`).
Under DDP (`trainer.devices=N trainer.strategy=ddp`) the other ranks train and evaluate but never touch the
tracking store: the MLflow run, its metrics and artifacts belong to rank 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import pytorch_lightning as pl
from omegaconf import DictConfig
from pytorch_lightning.callbacks import ModelCheckpoint

from ablations.checks import check_accelerator_present, check_max_length
from ablations.places import resolve_work_dir, run_params, shown_path, shown_place
from ablations.run.cards import Provenance
from ablations.run.costs import log_compute
from ablations.run.dashboard import log_datasets, run_name
from ablations.run.export import HeadInit, carry_head, save_finetuned
from ablations.run.finetune_identity import FinetuneIdentity, identify, plain, run_max_length
from ablations.run.finetune_outputs import FLOOR_KEY, STATE_TAG, log_outputs, unknown_tokens
from ablations.run.lifecycle import InterruptCheck, TrackedRun
from ablations.run.tracking import git_commit
from datamodules.class_weights import resolve_class_weights
from datamodules.finetune_data import FinetuneDataModule, FinetuneDataOptions, subsample
from datamodules.metrics import summary_keys
from datamodules.split_checks import read_checked
from lightning_modules.algorithms.alum import Alum
from lightning_modules.checkpoints import AtomicCheckpointIO, usable_checkpoint
from lightning_modules.compiling import compile_cache_dir, compile_in_place
from lightning_modules.compute import ComputeCounter
from lightning_modules.finetune import FineTuneModule
from lightning_modules.loop_timer import LoopTimer
from lightning_modules.matmul_precision import answerable_matmul_precision
from lightning_modules.model_checks import check_model
from lightning_modules.models import RANDOM_BERT, RANDOM_BERT_KEYS, load_encoder, model_params, resolve_model_dir
from lightning_modules.timing import Profile, profiled, section


@dataclass(frozen=True)
class FinetuneResult:
    run_id: str | None  # None in a DDP worker process (rank > 0): rank 0 owns the MLflow run
    fingerprint: str
    reused: bool  # True: an earlier FINISHED run with the same fingerprint was found
    tracking_uri: str
    best_dev: dict[str, float] = field(default_factory=dict)
    test: dict[str, float] = field(default_factory=dict)
    experiment_id: str = ""  # the MLflow experiment of `run_id` ("" in a DDP worker process)
    head_init: HeadInit = field(default_factory=HeadInit)  # a new head, or one carried over (tag head_init)
    floor: float | None = None  # the best trivial baseline's test score (datamodules.floors; metric test/floor)
    state: str = ""  # learned / at floor / collapsed (tag test_state; "" in a DDP worker process)


def run_finetune(cfg: DictConfig, force: bool = False, callbacks: Sequence[pl.Callback] = (),
                 tags: dict[str, str] | None = None, stop_exceptions: tuple[type[BaseException], ...] = (),
                 wait: bool = True, fingerprints: tuple[str, str] | None = None) -> FinetuneResult:
    """Run (or reuse, or resume) one fine-tuning run of a built config.

    `callbacks` are added to the Trainer (e.g. an Optuna pruning callback), `tags` to a newly created MLflow
    run (e.g. `mlflow.parentRunId`), and `stop_exceptions` end the run KILLED rather than FAILED (e.g.
    optuna.TrialPruned). While another live process holds the fingerprint this waits for it and reuses its
    run; with `wait=False` it raises `bioablate_core.claims.ClaimHeld`. `fingerprints`: (run, data) as the
    planner computed them for this config (`finetune_identity.identify`)."""
    with profiled() as profile:  # the run's timing profile, logged as system/time/* (lightning_modules/timing.py)
        identity = identify(cfg, fingerprints)
        # what only this machine and the model's files tell, before a run exists: a config may be built on a
        # login node for a GPU node, and a planned model has files only once its stage ran
        check_accelerator_present(cfg)
        check_model(cfg.model, identity.data_dir)
        check_max_length(cfg)
        run = TrackedRun.open(cfg, identity.fingerprint, force, kind="finetune")
        done = run.finished()
        if done is None:
            # the data read and checked (and `balanced` weights with it) before the claim and a new store exist:
            with section("tokenization"):  # refused data leaves nothing behind
                splits = read_checked(identity.spec, identity.data_dir, warn=not run.is_worker)
            resolve_class_weights(plain(cfg.finetune.class_weights), identity.spec,
                                  subsample(splits["train"], cfg.finetune.max_train_examples))
            with run.claimed(wait):
                done = run.finished()  # the holder we waited for may have finished it
                if done is None:
                    return _train(cfg, identity, run, callbacks, tags or {}, stop_exceptions, profile)
    test = _metrics_of(done, "test/")
    return FinetuneResult(done.info.run_id, identity.fingerprint, True, run.tracking_uri,
                          _metrics_of(done, "best_dev/"), test, done.info.experiment_id,
                          HeadInit.from_tag(done.data.tags.get("head_init", "")), test.pop(FLOOR_KEY, None),
                          done.data.tags.get(STATE_TAG, ""))


def _train(cfg: DictConfig, identity: FinetuneIdentity, run: TrackedRun, callbacks: Sequence[pl.Callback],
           tags: dict[str, str], stop_exceptions: tuple[type[BaseException], ...], profile: Profile) -> FinetuneResult:
    """Start (or continue) the MLflow run, fit it from its checkpoint, test the best dev epoch, log."""
    params, model_tags = _params(cfg, identity.choices)
    tags = {**_run_tags(cfg, identity), **model_tags, **tags}
    name = run_name(cfg, identity.spec, tags)
    run.start(name, tags, params)
    with run.tracked(stop_exceptions):
        pl.seed_everything(cfg.seed, workers=True, verbose=False)
        module, datamodule = _module_and_data(cfg, identity, run)
        counter = ComputeCounter()
        trainer, best = _trainer(cfg, run, identity.spec.no_dev, [*callbacks, counter])
        # rank 0 checked it in `run.start` (setting an unreadable one aside); a worker checks it here
        resume_from = usable_checkpoint(run.resume_from, set_aside=False) if run.is_worker else run.resume_from
        trainer.fit(module, datamodule=datamodule, ckpt_path=str(resume_from) if resume_from else None,
                    weights_only=True)
        best_epoch = _test_best(trainer, module, datamodule, best, cfg.finetune.epochs)
        log_compute(run, counter)
        best_dev = module.dev_history[best_epoch] if module.dev_history else {}
        if best_dev:
            run.log_metrics({f"best_dev/{k}": best_dev[k] for k in summary_keys(best_dev)})
        run.set_tags({**({"best_epoch": str(best_epoch)} if best_dev else {}), "tested_epoch": str(best_epoch),
                      "epoch_selection": "last (dev: none)" if identity.spec.no_dev else "best dev"})
        floor, state = None, ""
        if not run.is_worker:
            floor, state = log_outputs(run, cfg, datamodule, module, best_epoch, name)
            if cfg.keep_model:  # the best weights (the module holds them after testing), for `bioablate export`
                with section("checkpoint_writes"):
                    provenance = Provenance(identity.fingerprint, run.run_id, run.tracking_uri, git_commit(), cfg)
                    model_dir = save_finetuned(run.run_dir / "model", module.encoder, module.head,
                                               datamodule.encoder, identity.choices, cfg, provenance,
                                               module.test_metrics)
                    run.set_tags({"model_dir": shown_place(model_dir, resolve_work_dir(cfg))})
        run.log_metrics(profile.metrics())
    return FinetuneResult(run.run_id, identity.fingerprint, False, run.tracking_uri, best_dev, module.test_metrics,
                          "" if run.is_worker else run.tracker.experiment_id, module.head_init, floor, state)


def _module_and_data(cfg: DictConfig, identity: FinetuneIdentity,
                     run: TrackedRun) -> tuple[FineTuneModule, FinetuneDataModule]:
    """The encoder with its task head, and the task's data encoded (or read from the tokenization cache)."""
    ft, spec = cfg.finetune, identity.spec
    with section("model_load"):
        encoder, tokenizer = load_encoder(cfg.model, identity.data_dir, ft.dropout)
    options = FinetuneDataOptions(
        max_length=run_max_length(cfg, spec, encoder.config.max_position_embeddings), batch_size=ft.batch_size,
        eval_batch_size=ft.eval_batch_size, max_train_examples=ft.max_train_examples,
        max_eval_examples=ft.max_eval_examples, num_workers=cfg.trainer.num_workers,
        encoding=identity.choices.encoding, bucketing=ft.bucketing, seed=cfg.seed, static_shapes=ft.static_shapes)
    with section("tokenization"):  # encoding, or reading the tokenization cache (tag tokenization_cache)
        datamodule = FinetuneDataModule(spec, identity.data_dir, tokenizer, options,
                                        cache_dir=resolve_work_dir(cfg) / "cache" / "tokenized" if
                                        ft.cache_tokenized else None, data_fingerprint=identity.data_fingerprint)
        datamodule.setup()
    if not run.is_worker:  # the examples it reads, as MLflow dataset inputs
        log_datasets(run.tracker.client, run.run_id, spec.name,
                     shown_place(spec.base_dir(identity.data_dir), identity.data_dir, "data_dir"),
                     identity.data_fingerprint, {s: x for s, x in datamodule.instances.items() if x or s != "dev"})
    hits = set(datamodule.from_cache.values())
    # what the run found before training, as tags in one store write (each tag alone is a transaction)
    tags = {"tokenization_cache": "off" if datamodule.cache_dir is None else
            "hit" if hits == {True} else "miss" if hits == {False} else "partial", **unknown_tokens(datamodule)}
    if len(tokenizer) > encoder.get_input_embeddings().num_embeddings:  # entity markers were added
        encoder.resize_token_embeddings(len(tokenizer))
    # length-bucketed batches: one graph with a symbolic length; static shapes: the whole forward and loss
    # as one graph per width bucket (FineTuneModule.compile_step)
    if cfg.trainer.compile and not ft.static_shapes:
        compile_in_place([encoder], dynamic=True, cache_dir=compile_cache_dir(resolve_work_dir(cfg)))
    weights = resolve_class_weights(plain(ft.class_weights), spec, datamodule.instances["train"])
    if weights is not None:  # what the loss used, for `balanced` computed from this run's training split
        tags["class_weights"] = ", ".join(f"{c}={w:.4g}" for c, w in zip(spec.labels, weights))
    head = identity.choices.head.build(datamodule.encoder, encoder.config.hidden_size, weights)
    # a fine-tuned model folder (a two-stage model): its head too where the label spaces agree
    head_init = HeadInit() if cfg.model.name_or_path == RANDOM_BERT else \
        carry_head(resolve_model_dir(cfg.model.name_or_path), head, datamodule.encoder, identity.choices)
    run.set_tags({**tags, "head_init": head_init.tag()})
    # the step's losses are read from the device (the host waits for it) log_every_n_steps steps at a time
    module = FineTuneModule(encoder, head, ft.lr, ft.weight_decay, ft.warmup_ratio, seed=cfg.seed,
                            alum=Alum(**ft.alum) if ft.adversarial else None, read_every=cfg.trainer.log_every_n_steps)
    module.head_init = head_init
    if cfg.trainer.compile and ft.static_shapes:
        module.compile_step(buckets=len(datamodule.shapes("train").widths()),
                            cache_dir=compile_cache_dir(resolve_work_dir(cfg)))
    return module, datamodule


def _trainer(cfg: DictConfig, run: TrackedRun, no_dev: bool,
             callbacks: Sequence[pl.Callback]) -> tuple[pl.Trainer, ModelCheckpoint | None]:
    """The Trainer, and the callback keeping the best dev epoch's weights (None without a dev split: no
    evaluation, the last epoch is tested)."""
    # the best epoch's weights alone: the test split and the export read nothing else, and the optimizer's
    # moments would triple the file, written at every improvement
    best = None if no_dev else ModelCheckpoint(dirpath=run.checkpoint_dir, filename="best", monitor="dev/score",
                                               mode="max", save_top_k=1, save_weights_only=True)
    # last.ckpt (what a killed run resumes from) after every epoch: Lightning's own `save_last` writes it
    # only when the best checkpoint changes, so a resume went back to the best epoch and redid the rest
    latest = ModelCheckpoint(dirpath=run.checkpoint_dir, filename="last", save_top_k=1, enable_version_counter=False)
    answerable_matmul_precision()  # Lightning's CUDA check must be able to read it
    trainer = pl.Trainer(
        max_epochs=cfg.finetune.epochs, accelerator=cfg.trainer.accelerator, devices=cfg.trainer.devices,
        num_nodes=cfg.trainer.num_nodes, strategy=cfg.trainer.strategy, precision=cfg.trainer.precision,
        logger=run.lightning_logger(cfg.trainer.log_every_n_steps),
        callbacks=[LoopTimer(), *([best] if best else []), latest, InterruptCheck(), *run.callbacks(), *callbacks],
        limit_val_batches=0 if no_dev else None, enable_progress_bar=cfg.trainer.progress_bar,
        enable_model_summary=False, num_sanity_val_steps=0,
        log_every_n_steps=1, default_root_dir=run.run_dir,  # every step; stored log_every_n_steps at a time
        # the datamodule's samplers shard batches over ranks themselves (disjoint evaluation shares, length
        # bucketing): Lightning must not wrap them in a DistributedSampler
        use_distributed_sampler=False, plugins=[AtomicCheckpointIO()])
    return trainer, best


def _test_best(trainer: pl.Trainer, module: FineTuneModule, datamodule: FinetuneDataModule,
               best: ModelCheckpoint | None, epochs: int) -> int:
    """Score test with the best dev epoch's weights (without a dev split: the last epoch's); the epoch."""
    history = module.dev_history  # the best checkpoint holds the history up to its epoch: keep the whole
    if best is None:
        epoch, path = epochs - 1, None
    else:
        epoch = max(range(len(history)), key=lambda i: history[i]["score"])
        # in memory when it is the last one (better than every earlier epoch, so the best checkpoint holds
        # these very weights), else read back from the best checkpoint
        path = None if epoch == len(history) - 1 else best.best_model_path or None
    with section("test"):
        trainer.test(module, datamodule=datamodule, ckpt_path=path, verbose=False, weights_only=True)
    module.dev_history = history
    return epoch


def _params(cfg: DictConfig, choices: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The run's params and its model's tags: the config keys that apply to it, the encoding choices as
    used (a task kind's window defaults resolved); for a model folder or a Hub model its loaded config in
    place of the random-BERT keys, and the Hub commit it resolved to."""
    params = {**run_params(cfg, "finetune"),
              **{f"finetune.{key}": value for key, value in choices.encoding.metadata().items()}}
    if cfg.model.name_or_path != RANDOM_BERT:
        params = {k: v for k, v in params.items() if k not in RANDOM_BERT_KEYS}
    model, model_tags = model_params(cfg.model)
    return {**params, **model}, model_tags


def _run_tags(cfg: DictConfig, identity: FinetuneIdentity) -> dict[str, str]:
    spec = identity.spec
    return {"task": spec.name, "task_type": spec.task_type, "dataset": spec.name,
            "model": shown_path(cfg.model.name_or_path, cfg), "seed": str(cfg.seed), "profile": cfg.profile,
            "metric": spec.metric, "data_fingerprint": identity.data_fingerprint, "kind": "finetune",
            **({} if spec.fold_index is None else {"fold": str(spec.fold_index)}),
            # a user tagged dataset without `labels:`: the entity types read from its training split
            **({"labels": ", ".join(spec.labels), "labels_from": spec.labels_from} if spec.labels_from else {})}


def _metrics_of(run: Any, prefix: str) -> dict[str, float]:
    return {k[len(prefix):]: v for k, v in run.data.metrics.items() if k.startswith(prefix)}

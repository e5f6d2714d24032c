"""One fine-tuning run, end to end: config -> data -> model -> Trainer -> MLflow.

A run is identified by its fingerprint (config minus bookkeeping keys, data content, model content) and
goes through the tracked-run lifecycle of `ablations.run.lifecycle`: a FINISHED run is reused (unless
`force`), a FAILED / KILLED / dead RUNNING one is taken over and resumed from
`<work_dir>/runs/<fingerprint>/checkpoints/last.ckpt`, otherwise a new MLflow run is created. A finished
run keeps its best weights in `<work_dir>/runs/<fingerprint>/model/` (`bioablate export`, ablations.run.export).

Test is scored with the weights of the best dev epoch (tags `best_epoch`, `tested_epoch`); a dataset with
no dev split at all (a user dataset's `dev: none`) trains `finetune.epochs` epochs without evaluating and
tests the last (tag `epoch_selection` says which).

Under DDP (`trainer.devices=N trainer.strategy=ddp`) Lightning starts the other ranks by rerunning the
command; those processes train and evaluate but never touch the tracking store: the MLflow run, its
metrics and artifacts belong to rank 0.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Sequence

import pytorch_lightning as pl
from omegaconf import DictConfig
from pytorch_lightning.callbacks import ModelCheckpoint

from ablations.checks import check_accelerator_present
from ablations.places import resolve_work_dir, run_params, shown_path, shown_place
from ablations.run.cards import Provenance, shareable_config
from ablations.run.costs import log_compute
from ablations.run.dashboard import log_datasets, run_name, write_details
from ablations.run.export import HeadInit, carry_head, save_finetuned
from ablations.run.figures import log_run_figures
from ablations.run.finetune_identity import FinetuneIdentity, identify, plain, run_max_length
from ablations.run.lifecycle import InterruptCheck, TrackedRun
from ablations.run.tracking import git_commit
from datamodules.class_weights import resolve_class_weights
from datamodules.finetune_data import FinetuneDataModule, FinetuneDataOptions, subsample
from datamodules.floors import COLLAPSED, LEARNED, collapsed, floor_of, histogram, learning_state
from datamodules.metrics import summary_keys
from datamodules.split_checks import read_checked
from lightning_modules.algorithms.alum import Alum
from lightning_modules.checkpoints import AtomicCheckpointIO, usable_checkpoint
from lightning_modules.compiling import compile_cache_dir, compile_in_place
from lightning_modules.compute import ComputeCounter
from lightning_modules.finetune import FineTuneModule
from lightning_modules.finetune_spec import FinetuneSpec
from lightning_modules.loop_timer import LoopTimer
from lightning_modules.matmul_precision import answerable_matmul_precision
from lightning_modules.model_checks import check_model
from lightning_modules.models import (
    RANDOM_BERT,
    RANDOM_BERT_KEYS,
    load_encoder,
    model_params,
    resolve_model_dir,
)
from lightning_modules.timing import Profile, profiled, section

log = logging.getLogger("bioablate")


@dataclass
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
                 tags: dict[str, str] | None = None,
                 stop_exceptions: tuple[type[BaseException], ...] = (), wait: bool = True) -> FinetuneResult:
    """Run (or reuse, or resume) one fine-tuning run.

    `callbacks` are added to the Trainer (e.g. an Optuna pruning callback), `tags` to a newly created
    MLflow run (e.g. `mlflow.parentRunId` for a sweep's trial), and `stop_exceptions` end the run as
    KILLED rather than FAILED (e.g. optuna.TrialPruned). While another live process works on the same
    fingerprint this waits for it and then reuses its run; with `wait=False` it raises
    `bioablate_core.claims.ClaimHeld` instead.
    """
    with profiled() as profile:  # the run's timing profile, logged as system/time/* (lightning_modules/timing.py)
        return _run_finetune(cfg, force, callbacks, tags, stop_exceptions, wait, profile)


def _run_finetune(cfg: DictConfig, force: bool, callbacks: Sequence[pl.Callback], tags: dict[str, str] | None,
                  stop_exceptions: tuple[type[BaseException], ...], wait: bool, profile: Profile) -> FinetuneResult:
    identity = identify(cfg)
    # what only this machine and the model's files can tell, before a run exists (identify does not read
    # them: it also names runs to render tables, where neither need be at hand)
    check_accelerator_present(cfg)
    check_model(cfg.model, identity.data_dir)
    run = TrackedRun.open(cfg, identity.fingerprint, force, kind="finetune")
    done = run.finished()
    if done is None:
        # read and checked (and `balanced` weights with them) before the claim and a new store exist:
        with section("tokenization"):  # refused data leaves nothing behind (the splits are cached)
            splits = read_checked(identity.spec, identity.data_dir, warn=not run.is_worker)
        resolve_class_weights(plain(cfg.finetune.class_weights), identity.spec,
                              subsample(splits["train"], cfg.finetune.max_train_examples))
        with run.claimed(wait):
            done = run.finished()  # the holder we waited for may have finished it
            if done is None:
                return _train(cfg, identity, run, callbacks, tags, stop_exceptions, profile)
    test = _metrics_of(done, "test/")
    return FinetuneResult(done.info.run_id, identity.fingerprint, True, run.tracking_uri,
                          _metrics_of(done, "best_dev/"), test, done.info.experiment_id,
                          HeadInit.from_tag(done.data.tags.get("head_init", "")), test.pop(FLOOR_KEY, None),
                          done.data.tags.get(STATE_TAG, ""))


def _train(cfg: DictConfig, identity: FinetuneIdentity, run: TrackedRun, callbacks: Sequence[pl.Callback],
           tags: dict[str, str] | None, stop_exceptions: tuple[type[BaseException], ...],
           profile: Profile) -> FinetuneResult:
    params, model_tags = _params(cfg, identity.choices)
    tags = {**_run_tags(cfg, identity), **model_tags, **(tags or {})}
    name = run_name(cfg, identity.spec, tags)
    run.start(name, tags, params)
    with run.tracked(stop_exceptions):
        counter = ComputeCounter()
        module, datamodule, best_epoch = _fit_and_test(cfg, identity, run, [*callbacks, counter])
        log_compute(run, counter)
        best_dev = module.dev_history[best_epoch] if module.dev_history else {}
        if best_dev:
            run.log_metrics({f"best_dev/{k}": best_dev[k] for k in summary_keys(best_dev)})
        run.set_tags({**({"best_epoch": str(best_epoch)} if best_dev else {}), "tested_epoch": str(best_epoch),
                      "epoch_selection": "last (dev: none)" if identity.spec.no_dev else "best dev"})
        floor, state = None, ""
        if not run.is_worker:
            _log_artifacts(run, cfg, datamodule, module, best_epoch, name)
            floor, state = _log_floor(run, datamodule, module)
            if cfg.keep_model:
                with section("checkpoint_writes"):
                    _store_model(run, cfg, identity, module, datamodule)
        run.log_metrics(profile.metrics())
    return FinetuneResult(run.run_id, identity.fingerprint, False, run.tracking_uri, best_dev,
                          module.test_metrics, "" if run.is_worker else run.tracker.experiment_id, module.head_init,
                          floor, state)


FLOOR_KEY, STATE_TAG = "floor", "test_state"  # metric test/floor, tag test_state (with test_floor_kind)


def _log_floor(run: TrackedRun, datamodule: FinetuneDataModule, module: FineTuneModule) -> tuple[float, str]:
    """The test split's best trivial baseline and whether the model beat it (datamodules.floors), as metric
    test/floor and tags test_state, test_floor_kind and test_prediction_histogram; a warning where it did not.
    A failure to learn is a result to report, so the run still finishes."""
    encoder, predictions = datamodule.encoder, module.test_predictions
    floor = floor_of(encoder, datamodule.instances["test"])
    score = module.test_metrics["score"]
    state = learning_state(score, floor, collapsed(encoder, predictions))
    run.log_metrics({f"test/{FLOOR_KEY}": floor.score})
    run.set_tags({STATE_TAG: state, "test_floor_kind": floor.kind,
                  "test_prediction_histogram": json.dumps(histogram(encoder, predictions))})
    if state != LEARNED:
        what = "one prediction for nearly every test instance" if state == COLLAPSED else "not above the floor"
        log.warning("%s did not learn (%s): %s, test score %.4f against %.4f for '%s'; train on more examples or "
                    "epochs", datamodule.spec.name, state, what, score, floor.score, floor.kind)
    return floor.score, state


def _params(cfg: DictConfig, choices: FinetuneSpec) -> tuple[dict[str, Any], dict[str, str]]:
    """The run's params and its model's tags: the config keys that apply to it, the encoding choices as
    used (a task kind's window defaults resolved: the stride extractive QA ran with, where the config
    says null); for a model folder or a Hub model its loaded config in place of the random-BERT keys,
    and the Hub commit it resolved to."""
    params = {**run_params(cfg, "finetune"),
              **{f"finetune.{key}": value for key, value in choices.encoding.metadata().items()}}
    if cfg.model.name_or_path != RANDOM_BERT:
        params = {k: v for k, v in params.items() if k not in RANDOM_BERT_KEYS}
    model, model_tags = model_params(cfg.model)
    return {**params, **model}, model_tags


def _metrics_of(run, prefix: str) -> dict[str, float]:
    return {k[len(prefix):]: v for k, v in run.data.metrics.items() if k.startswith(prefix)}


def _run_tags(cfg: DictConfig, identity: FinetuneIdentity) -> dict[str, str]:
    spec = identity.spec
    return {"task": spec.name, "task_type": spec.task_type, "dataset": spec.name,
            "model": shown_path(cfg.model.name_or_path, cfg), "seed": str(cfg.seed), "profile": cfg.profile,
            "metric": spec.metric, "data_fingerprint": identity.data_fingerprint, "kind": "finetune",
            **({} if spec.fold_index is None else {"fold": str(spec.fold_index)}),
            # a user tagged dataset without `labels:`: the entity types read from its training split
            **({"labels": ", ".join(spec.labels), "labels_from": spec.labels_from} if spec.labels_from else {})}


def _fit_and_test(cfg: DictConfig, identity: FinetuneIdentity, run: TrackedRun,
                  callbacks: Sequence[pl.Callback]) -> tuple[FineTuneModule, FinetuneDataModule, int]:
    """Train with dev evaluation every epoch (resuming from the run's checkpoint if it has one), then
    score test with the best dev epoch's weights (without a dev split: the last epoch's). Returns the
    module, the data and the tested epoch."""
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    ft = cfg.finetune
    with section("model_load"):
        encoder, tokenizer = load_encoder(cfg.model, identity.data_dir, ft.dropout)
    with section("tokenization"):  # encoding, or reading the tokenization cache (tag tokenization_cache)
        datamodule = _datamodule(cfg, identity, tokenizer, encoder.config.max_position_embeddings)
    if not run.is_worker:  # the examples it reads, as MLflow dataset inputs
        spec = identity.spec
        source = shown_place(spec.base_dir(identity.data_dir), identity.data_dir, "data_dir")
        log_datasets(run.tracker.client, run.run_id, spec.name, source,
                     identity.data_fingerprint, {s: x for s, x in datamodule.instances.items() if x or s != "dev"})
    hits = set(datamodule.from_cache.values())
    # what the run found before training, as tags in one store write (each tag alone is a transaction)
    tags = {"tokenization_cache": "off" if datamodule.cache_dir is None else
            "hit" if hits == {True} else "miss" if hits == {False} else "partial", **_unknown_tokens(datamodule)}
    if len(tokenizer) > encoder.get_input_embeddings().num_embeddings:  # entity markers were added
        encoder.resize_token_embeddings(len(tokenizer))
    # length-bucketed batches: one graph with a symbolic length; static shapes: the whole forward and loss
    # as one graph per width bucket (FineTuneModule.compile_step)
    if cfg.trainer.compile and not ft.static_shapes:
        compile_in_place([encoder], dynamic=True, cache_dir=compile_cache_dir(resolve_work_dir(cfg)))
    weights = resolve_class_weights(plain(ft.class_weights), identity.spec, datamodule.instances["train"])
    if weights is not None:  # what the loss used, for `balanced` computed from this run's training split
        tags["class_weights"] = ", ".join(f"{c}={w:.4g}" for c, w in zip(identity.spec.labels, weights))
    head = identity.choices.head.build(datamodule.encoder, encoder.config.hidden_size, weights)
    # a fine-tuned model folder (a two-stage model): its head too where the label spaces agree
    head_init = HeadInit() if cfg.model.name_or_path == RANDOM_BERT else \
        carry_head(resolve_model_dir(cfg.model.name_or_path), head, datamodule.encoder, identity.choices)
    run.set_tags({**tags, "head_init": head_init.tag()})
    alum = Alum(**ft.alum) if ft.adversarial else None
    # the step's losses are read from the device (the host waits for it) log_every_n_steps steps at a time
    module = FineTuneModule(encoder, head, ft.lr, ft.weight_decay, ft.warmup_ratio, alum=alum, seed=cfg.seed,
                            read_every=cfg.trainer.log_every_n_steps)
    module.head_init = head_init
    if cfg.trainer.compile and ft.static_shapes:
        module.compile_step(buckets=len(datamodule.shapes("train").widths()),
                            cache_dir=compile_cache_dir(resolve_work_dir(cfg)))
    # the best epoch's weights alone: the test split and the export read nothing else, and the optimizer's
    # moments would double the file (BERT-base: 0.44 GB instead of 1.3 GB, written at every improvement)
    no_dev = identity.spec.no_dev  # no dev split: no evaluation, no best checkpoint; test the last epoch
    checkpoints = None if no_dev else ModelCheckpoint(dirpath=run.checkpoint_dir, filename="best",
                                                      monitor="dev/score", mode="max", save_top_k=1,
                                                      save_weights_only=True)
    # last.ckpt (what a killed run resumes from) after every epoch: Lightning's own `save_last` writes it
    # only when the best checkpoint changes, so a resume went back to the best epoch and redid the rest
    latest = ModelCheckpoint(dirpath=run.checkpoint_dir, filename="last", save_top_k=1,
                             enable_version_counter=False)
    answerable_matmul_precision()  # Lightning's CUDA check must be able to read it
    trainer = pl.Trainer(
        max_epochs=ft.epochs, accelerator=cfg.trainer.accelerator,
        devices=cfg.trainer.devices, num_nodes=cfg.trainer.num_nodes, strategy=cfg.trainer.strategy,
        precision=cfg.trainer.precision, logger=run.lightning_logger(cfg.trainer.log_every_n_steps),
        callbacks=[LoopTimer(), *([checkpoints] if checkpoints else []), latest, InterruptCheck(), *run.callbacks(),
                   *callbacks],
        limit_val_batches=0 if no_dev else None,
        enable_progress_bar=cfg.trainer.progress_bar,
        enable_model_summary=False, num_sanity_val_steps=0,
        log_every_n_steps=1, default_root_dir=run.run_dir,  # every step; stored log_every_n_steps at a time
        # the datamodule's samplers shard batches over ranks themselves (disjoint evaluation shares,
        # length bucketing): Lightning must not wrap them in a DistributedSampler
        use_distributed_sampler=False, plugins=[AtomicCheckpointIO()],
    )
    # rank 0 checked it in `run.start` (setting an unreadable one aside); a worker checks it here
    resume_from = usable_checkpoint(run.resume_from, set_aside=False) if run.is_worker else run.resume_from
    trainer.fit(module, datamodule=datamodule, ckpt_path=str(resume_from) if resume_from else None, weights_only=True)
    if no_dev:  # the last epoch's weights, in memory
        best_epoch, best = ft.epochs - 1, None
    else:
        best_epoch = max(range(len(module.dev_history)), key=lambda i: module.dev_history[i]["score"])
        # the best dev epoch's weights: in memory when it is the last one (better than every earlier epoch, so
        # the best checkpoint holds these very weights), else read back from the best checkpoint
        best = None if best_epoch == len(module.dev_history) - 1 else checkpoints.best_model_path or None
    history = module.dev_history  # the best checkpoint holds the history up to its epoch: keep the whole
    with section("test"):
        trainer.test(module, datamodule=datamodule, ckpt_path=best, verbose=False, weights_only=True)
    module.dev_history = history
    return module, datamodule, best_epoch


UNK_WARNING = 0.3  # a share of [UNK] input tokens above which the tokenizer does not fit the text


def _unknown_tokens(datamodule: FinetuneDataModule) -> dict[str, str]:
    """The share of the training inputs the tokenizer could not split into its vocabulary, as the run's
    tag `unk_rate`, and a warning where it is large: a tokenizer of another model (or a handful of
    tokens) fine-tunes on [UNK]s without a word of complaint otherwise."""
    unk = datamodule.tokenizer.unk_token_id
    if unk is None:  # byte-level tokenizers have no unknown token
        return {}
    rate = datamodule.features["train"].token_share(unk)
    if rate > UNK_WARNING:
        log.warning("%.0f%% of the training input tokens of %s are [UNK]: the tokenizer does not fit this text "
                    "(the vocabulary of another model?); the run goes on", 100 * rate, datamodule.spec.name)
    return {"unk_rate": f"{rate:.4f}"}


def _datamodule(cfg: DictConfig, identity: FinetuneIdentity, tokenizer, max_positions: int) -> FinetuneDataModule:
    """The task's data, encoded (or read from the tokenization cache) and ready to batch."""
    ft, spec = cfg.finetune, identity.spec
    options = FinetuneDataOptions(
        max_length=run_max_length(cfg, spec, max_positions), batch_size=ft.batch_size,
        eval_batch_size=ft.eval_batch_size, max_train_examples=ft.max_train_examples,
        max_eval_examples=ft.max_eval_examples, num_workers=cfg.trainer.num_workers,
        encoding=identity.choices.encoding, bucketing=ft.bucketing, seed=cfg.seed, static_shapes=ft.static_shapes)
    cache_dir = resolve_work_dir(cfg) / "cache" / "tokenized" if ft.cache_tokenized else None
    datamodule = FinetuneDataModule(spec, identity.data_dir, tokenizer, options, cache_dir=cache_dir,
                                    data_fingerprint=identity.data_fingerprint)
    datamodule.setup()
    return datamodule


def _log_artifacts(run: TrackedRun, cfg: DictConfig, datamodule: FinetuneDataModule, module: FineTuneModule,
                   best_epoch: int, title: str) -> None:
    """The resolved config (its machine-local keys as `<local>`: `shareable_config`), the test predictions,
    the scores' details (`ablations.run.dashboard`) and the run's figures (`ablations.run.figures`)."""
    out = run.run_dir / "artifacts"
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(shareable_config(cfg))
    encoder, golds, predicted = datamodule.encoder, [], []
    with open(out / "test_predictions.jsonl", "w") as f:
        for instance, prediction in zip(datamodule.instances["test"], module.test_predictions):
            golds.append(encoder.to_json(encoder.gold(instance)))
            predicted.append(encoder.to_json(prediction))
            group = {"group": getattr(instance, encoder.group_by)} if encoder.group_by else {}  # what it is scored with
            f.write(json.dumps({"id": instance.id, "gold": golds[-1], "prediction": predicted[-1], **group}) + "\n")
    artifacts = [out / "config.yaml", out / "test_predictions.jsonl"]
    questions = encoder.question_records(datamodule.instances["test"], module.test_predictions)
    if questions:  # extractive QA: each question's top answers over its contexts, as it was scored
        (out / "test_answers.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
        artifacts.append(out / "test_answers.jsonl")
    run.log_artifacts(artifacts)
    run.log_artifacts(write_details(out / "metrics", module.dev_history, best_epoch, module.test_metrics), "metrics")
    if cfg.figures:
        log_run_figures(run, out / "figures", len(module.dev_history), best_epoch, title, datamodule.spec,
                        (golds, predicted, encoder))


def _store_model(run: TrackedRun, cfg: DictConfig, identity: FinetuneIdentity, module: FineTuneModule,
                 datamodule: FinetuneDataModule) -> None:
    """Keep the best dev epoch's weights (the module holds them after testing) as a Hugging Face folder,
    `<run dir>/model/`, for `bioablate export` (ablations.run.export); MLflow tag `model_dir`."""
    provenance = Provenance(identity.fingerprint, run.run_id, run.tracking_uri, git_commit(), cfg)
    model_dir = save_finetuned(run.run_dir / "model", module.encoder, module.head, datamodule.encoder,
                               identity.choices, cfg,
                               provenance, module.test_metrics)
    run.set_tags({"model_dir": shown_place(model_dir, resolve_work_dir(cfg))})  # relative to the work directory

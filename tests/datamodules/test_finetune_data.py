"""Fine-tuning speed features, checked for behaviour (never for speed): the tokenization cache, length-
bucketed and rank-sharded batches, evaluation in sorted order, and that bucketing does not change what a
model learns."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from mlflow.tracking import MlflowClient

from ablations.config import build_config
from ablations.run.finetune import run_finetune
from datamodules.batch_samplers import BucketBatchSampler, SortedBatchSampler
from datamodules.encoders import EncodingSpec, TaggingEncoder
from datamodules.finetune_data import FinetuneDataModule, FinetuneDataOptions
from datamodules.registry import get_dataset
from lightning_modules.finetune import FineTuneModule
from lightning_modules.heads import HeadSpec
from lightning_modules.models import load_encoder

FAST = ["finetune.max_train_examples=48", "finetune.max_eval_examples=40", "finetune.epochs=1",
        "finetune.max_length=64", "trainer.progress_bar=false"]


def datamodule(data_dir: Path, cache_dir: Path | None, *overrides: str, task: str = "bc5-chem",
               limit: int = 64, max_length: int = 64, **kwargs) -> FinetuneDataModule:
    cfg = build_config("micro", list(overrides), task=task)
    _, tokenizer = load_encoder(cfg.model, data_dir, 0.1)
    ft = cfg.finetune
    options = FinetuneDataOptions(max_length=max_length, batch_size=16, eval_batch_size=32, max_train_examples=limit,
                                  max_eval_examples=limit, encoding=EncodingSpec(tagging=ft.tagging), **kwargs)
    dm = FinetuneDataModule(get_dataset(task), data_dir, tokenizer, options, cache_dir=cache_dir)
    dm.setup()
    return dm


# ---------------------------------------------------------------------------------- tokenization cache

@pytest.mark.slow
def test_second_run_reads_the_tokenization_cache(data_dir, tmp_path, monkeypatch):
    calls = []
    original = TaggingEncoder.encode

    def counting_encode(self, instances):
        calls.append(len(instances))
        return original(self, instances)

    monkeypatch.setattr(TaggingEncoder, "encode", counting_encode)
    common = dict(task="bc5-chem", data_dir=str(data_dir), work_dir=str(tmp_path))
    first = run_finetune(build_config("micro", [*FAST, "seed=1"], **common))
    assert calls == [48, 40, 40]  # train, dev, test tokenized once each
    second = run_finetune(build_config("micro", [*FAST, "seed=2"], **common))  # a new run, same encoding
    assert calls == [48, 40, 40]  # nothing tokenized again

    client = MlflowClient(first.tracking_uri)
    assert client.get_run(first.run_id).data.tags["tokenization_cache"] == "miss"
    assert client.get_run(second.run_id).data.tags["tokenization_cache"] == "hit"
    assert client.get_run(second.run_id).info.status == "FINISHED"
    entries = sorted(p.name for p in (tmp_path / "cache" / "tokenized").iterdir())
    assert len(entries) == 3 and not any(name.endswith(".tmp") for name in entries)


def test_cache_is_keyed_by_tokenizer_max_length_and_encoding(data_dir, tmp_path):
    cache = tmp_path / "tokenized"
    fresh = datamodule(data_dir, cache)
    assert fresh.encode_calls == 3 and not any(fresh.from_cache.values())

    again = datamodule(data_dir, cache)
    assert again.encode_calls == 0 and all(again.from_cache.values())
    uncached = datamodule(data_dir, None)
    for split in ("train", "dev", "test"):  # the cached tensors are exactly a fresh encoding's
        indices = list(range(len(uncached.features[split])))
        want = uncached.features[split].batch(indices, 0)
        got = again.features[split].batch(indices, 0)
        assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) for k in want)
        assert again.features[split].example(5) == uncached.features[split].example(5)

    changes = [
        dict(max_length=48),
        dict(overrides=("model.vocab=pubmedbert-uncased",)),  # another vocabulary
        dict(overrides=("model.lowercase=false",)),  # same vocabulary, casing kept
        dict(overrides=("finetune.tagging=bioul",)),
        dict(limit=32),
    ]
    for n, change in enumerate(changes, start=2):
        dm = datamodule(data_dir, cache, *change.pop("overrides", ()), **change)
        assert dm.encode_calls == 3, change
        assert len(list(cache.iterdir())) == 3 * n, change



def test_the_tokenizer_fingerprint_ignores_truncation_and_padding_and_sees_the_vocabulary(data_dir):
    from transformers import BertTokenizer

    from datamodules.finetune_data import tokenizer_fingerprint

    def tokenizer(vocab: str = "pubmedbert-uncased", lowercase: bool = True):
        return BertTokenizer(vocab=str(data_dir / "vocab" / vocab / "vocab.txt"), do_lower_case=lowercase)

    fresh = tokenizer()
    before = tokenizer_fingerprint(fresh)
    fresh(["a sentence", "a longer sentence than that"], truncation=True, max_length=4, padding="max_length")
    assert fresh.backend_tokenizer.truncation is not None  # encoding left its settings on the backend
    assert tokenizer_fingerprint(fresh) == before
    assert fresh.backend_tokenizer.truncation is not None  # and the fingerprint leaves them as they were
    assert tokenizer_fingerprint(tokenizer()) == before
    assert tokenizer_fingerprint(tokenizer(lowercase=False)) != before
    assert tokenizer_fingerprint(tokenizer("bert-base-uncased")) != before
    added = tokenizer()
    added.add_tokens(["[E1]"], special_tokens=True)
    assert tokenizer_fingerprint(added) != before


# ------------------------------------------------------------------------------------------- samplers

def lengths_of(data_dir: Path) -> torch.Tensor:
    return datamodule(data_dir, None, limit=1000, max_length=128).features["train"].lengths


def test_bucketed_batches_are_seeded_by_seed_and_epoch_and_cover_every_example(data_dir):
    lengths = lengths_of(data_dir)
    sampler = BucketBatchSampler(lengths, 16, seed=3, chunk_batches=8)
    epoch0 = list(sampler)
    assert sorted(i for batch in epoch0 for i in batch) == list(range(len(lengths)))
    assert len(epoch0) == len(sampler) == 63
    assert list(BucketBatchSampler(lengths, 16, seed=3, chunk_batches=8)) == epoch0  # reproducible
    sampler.set_epoch(1)
    assert list(sampler) != epoch0
    sampler.set_epoch(0)
    assert list(sampler) == epoch0  # a resumed run sees the batches of an uninterrupted one
    assert list(BucketBatchSampler(lengths, 16, seed=4, chunk_batches=8)) != epoch0


def test_lightning_reshuffles_each_epoch_through_set_epoch(data_dir):
    """The Trainer calls the sampler's set_epoch at every epoch start (also after a resume, with the
    restored epoch), so each epoch gets its own (seed, epoch) batch order."""
    dm = datamodule(data_dir, None, limit=48)
    cfg = build_config("micro", [], task="bc5-chem")
    encoder, _ = load_encoder(cfg.model, data_dir, 0.1)
    module = FineTuneModule(encoder, HeadSpec.from_config(cfg.finetune, dm.spec.task_type).build(dm.encoder, 64),
                            1e-3, 0.01, 0.1)
    seen: list[tuple[int, int, tuple[int, ...]]] = []

    class Record(pl.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            seen.append((trainer.current_epoch, trainer.train_dataloader.sampler.epoch,
                         tuple(batch["index"].tolist())))

    trainer = pl.Trainer(max_epochs=2, accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         use_distributed_sampler=False, limit_val_batches=0, callbacks=[Record()])
    trainer.fit(module, datamodule=dm)
    assert [(e, s) for e, s, _ in seen] == [(0, 0)] * 3 + [(1, 1)] * 3
    assert [b for e, _, b in seen if e == 0] != [b for e, _, b in seen if e == 1]


class _Stop(Exception):
    pass


@pytest.mark.slow
def test_a_run_resumed_from_an_epoch_checkpoint_draws_the_batches_and_dropout_of_an_uninterrupted_one(
        data_dir, tmp_path):
    """Batch order from (seed, steps taken), dropout from (seed, step): the resumed run's every batch and
    loss equal the uninterrupted run's (losses bitwise: same weights, same masks)."""
    cfg = build_config("micro", [], task="bc5-chem")

    def fit(name: str, *, stop_in_epoch: int | None = None, resume: Path | None = None
            ) -> list[tuple[int, tuple, float]]:
        pl.seed_everything(0, verbose=False)
        dm = datamodule(data_dir, None, limit=48)
        encoder, _ = load_encoder(cfg.model, data_dir, 0.1)
        module = FineTuneModule(encoder, HeadSpec.from_config(cfg.finetune, dm.spec.task_type).build(dm.encoder, 64),
                                1e-3, 0.01, 0.1, seed=5)
        seen: list[tuple[int, tuple, float]] = []

        class Record(pl.Callback):
            def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
                if trainer.current_epoch == stop_in_epoch:
                    raise _Stop()  # killed after the previous epoch's checkpoint

            def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
                seen.append((trainer.global_step, tuple(batch["index"].tolist()), float(outputs["loss"])))

        trainer = pl.Trainer(max_epochs=3, accelerator="cpu", logger=False, enable_progress_bar=False,
                             enable_model_summary=False, num_sanity_val_steps=0, use_distributed_sampler=False,
                             limit_val_batches=0, callbacks=[Record(), pl.callbacks.ModelCheckpoint(
                                 dirpath=tmp_path / name, save_last=True)])
        try:
            trainer.fit(module, datamodule=dm, ckpt_path=str(resume) if resume else None)
        except _Stop:
            pass
        return seen

    whole = fit("whole")
    killed = fit("killed", stop_in_epoch=1)
    resumed = fit("resumed", resume=tmp_path / "killed" / "last.ckpt")
    assert len(whole) == 9 and len(killed) == 3
    assert killed + resumed == whole


def padding(batches: list[list[int]], lengths: torch.Tensor) -> int:
    return sum(int(lengths[b].max()) * len(b) - int(lengths[b].sum()) for b in batches)


def test_bucketing_cuts_padding_and_keeps_batches_random(data_dir):
    lengths = lengths_of(data_dir)
    bucketed = list(BucketBatchSampler(lengths, 16, seed=0, chunk_batches=8))
    plain = list(BucketBatchSampler(lengths, 16, seed=0, bucketing=False))
    assert padding(bucketed, lengths) < 0.3 * padding(plain, lengths)
    # the batch order is shuffled, not sorted by length
    maxima = [int(lengths[b].max()) for b in bucketed]
    assert maxima != sorted(maxima) and maxima != sorted(maxima, reverse=True)


@pytest.mark.parametrize("world_size", [2, 3])
def test_ranks_get_disjoint_shares_with_equal_step_counts(data_dir, world_size):
    lengths = lengths_of(data_dir)
    shares = [list(BucketBatchSampler(lengths, 16, seed=0, rank=r, world_size=world_size))
              for r in range(world_size)]
    assert len({len(s) for s in shares}) == 1  # every rank takes the same number of optimizer steps
    assert all(len(s) == len(BucketBatchSampler(lengths, 16, 0, rank=1, world_size=world_size)) for s in shares)
    seen = [i for share in shares for batch in share for i in batch]
    assert set(seen) == set(range(len(lengths)))
    # only whole batches repeat, to even out the ranks (63 batches: 1 repeat for 2 ranks, 0 for 3)
    assert len(seen) - len(lengths) <= 16 * (world_size - 1)

    evals = [list(SortedBatchSampler(lengths, 32, r, world_size)) for r in range(world_size)]
    flat = [i for share in evals for batch in share for i in batch]
    assert sorted(flat) == list(range(len(lengths)))  # every example exactly once, none padded in
    for share in evals:
        order = [int(lengths[i]) for batch in share for i in batch]
        assert order == sorted(order)


def test_evaluation_in_length_order_scores_in_split_order(data_dir):
    """Gold tags fed through the evaluation path (sorted batches -> gather -> unpack -> decode) score a
    perfect F1: predictions land on the right examples whatever order the batches visit them in."""
    dm = datamodule(data_dir, None, limit=200, max_length=512)
    raw = {}
    for batch in dm.val_dataloader():
        values, counts = dm.encoder.gather(batch, batch["labels"])
        raw.update(zip(batch["index"].tolist(), dm.encoder.unpack(values, counts)))
    first_batch = next(iter(dm.val_dataloader()))["index"].tolist()
    assert first_batch != list(range(len(first_batch)))  # really not in split order
    metrics, predictions = dm.score("dev", raw)
    assert metrics["score"] == 1.0 and metrics["tp"] > 100
    assert list(predictions) == [dm.encoder.gold(x) for x in dm.instances["dev"]]


# ---------------------------------------------------------------------- bucketing does not change F1

def dev_f1(data_dir: Path, cache: Path, seed: int, bucketing: bool) -> float:
    """A 2-layer, 64-wide random BERT trained on 1,000 BC5-chem sentences for 3 epochs: enough steps
    to learn chemical names well past the all-O plateau (dev F1 about 0.55)."""
    cfg = build_config("micro", ["finetune.lr=2e-3"], task="bc5-chem")
    pl.seed_everything(seed, verbose=False)
    encoder, tokenizer = load_encoder(cfg.model, data_dir, 0.1)
    options = FinetuneDataOptions(max_length=64, batch_size=16, eval_batch_size=128, max_train_examples=1000,
                                  max_eval_examples=400, bucketing=bucketing, seed=seed)
    dm = FinetuneDataModule(get_dataset("bc5-chem"), data_dir, tokenizer, options, cache_dir=cache)
    module = FineTuneModule(encoder, HeadSpec.from_config(cfg.finetune, dm.spec.task_type).build(dm.encoder, 64),
                            2e-3, 0.01, 0.1)
    trainer = pl.Trainer(max_epochs=3, accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                         use_distributed_sampler=False)
    trainer.fit(module, datamodule=dm)
    return module.dev_history[-1]["score"]


@pytest.fixture
def one_thread():
    """A 64-wide model gains nothing from intra-op threads, and on a shared CPU they spin against each
    other (several times slower): run the six trainings single-threaded."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.slow
def test_bucketing_matches_unbucketed_dev_f1_within_seed_noise(data_dir, tmp_path, one_thread):
    seeds = (1, 2, 3)
    bucketed = [dev_f1(data_dir, tmp_path, s, True) for s in seeds]
    plain = [dev_f1(data_dir, tmp_path, s, False) for s in seeds]
    assert min(bucketed + plain) > 0.3, (bucketed, plain)  # both really learned
    pooled_std = ((statistics.variance(bucketed) + statistics.variance(plain)) / 2) ** 0.5
    # 3 x the pooled std is ~3.7 standard errors of a difference of two 3-seed means; the floor keeps a
    # lucky low-variance draw from making the bound meaninglessly tight
    assert abs(statistics.mean(bucketed) - statistics.mean(plain)) <= 3 * pooled_std + 0.02, (bucketed, plain)


@pytest.mark.parametrize("how", ["truncate", "overwrite"])
def test_a_damaged_tokenization_cache_entry_is_encoded_again(data_dir, tmp_path, how, caplog):
    cache = tmp_path / "tokenized"
    datamodule(data_dir, cache)
    entry = sorted(cache.iterdir())[0]  # one split's entry: the other two stay good
    columns = entry / "columns.pt"
    data = columns.read_bytes()
    if how == "truncate":
        columns.write_bytes(data[: len(data) // 2])
    else:
        time.sleep(0.01)
        columns.write_bytes(data[:-64] + bytes(255 - b for b in data[-64:]))
    with caplog.at_level("WARNING", logger="bioablate"):
        again = datamodule(data_dir, cache)
    assert f"the tokenization cache {entry} is damaged (columns.pt " in caplog.text
    assert again.encode_calls == 1 and columns.read_bytes() == data  # encoded again, and saved again
    assert datamodule(data_dir, cache).encode_calls == 0


@pytest.mark.parametrize("task", ["bc5-chem", "chemprot", "hoc"])  # tags; a class id; a multi-label vector
def test_static_shapes_pad_widths_to_buckets_and_fill_training_batches_with_ignored_rows(task, data_dir):
    from datamodules.finetune_data import SHAPE_STEP

    dm = datamodule(data_dir, None, task=task, limit=40, max_length=128, static_shapes=True)
    train = list(dm.train_dataloader())
    assert [len(b["index"]) for b in train] == [16, 16, 16]  # 40 examples: the last batch holds 8 fillers
    assert dm.shapes("train").widths() == [32, 64, 96, 128]
    for batch in train:
        width = batch["input_ids"].shape[1]
        assert width % SHAPE_STEP == 0 and width - SHAPE_STEP < int(batch["attention_mask"].sum(1).max())
        assert all(v.shape[0] == 16 for v in batch.values())
    last = next(b for b in train if not b["real"].all())
    real = last["real"]
    assert int(real.sum()) == 8 and (last["index"][~real] == -1).all()
    if not last["labels"].is_floating_point():  # ignored by the cross-entropy; float labels: by `real`
        assert (last["labels"][~real] == -100).all() and (last["labels"][real] != -100).any()
    dynamic = datamodule(data_dir, None, task=task, limit=40, max_length=128)
    unfilled = dynamic.features["train"].batch(last["index"][real].tolist(), dm.tokenizer.pad_token_id)
    width = unfilled["input_ids"].shape[1]
    positions = dm.features["train"].position_keys
    for key, value in unfilled.items():  # the real rows are those of dynamic padding, padded further
        assert torch.equal(last[key][real][:, :width] if key in positions else last[key][real], value), key
    assert not last["attention_mask"][:, width:].any()
    evaluation = next(iter(dm.val_dataloader()))
    assert evaluation["input_ids"].shape[1] % SHAPE_STEP == 0 and evaluation["real"].all()  # no filler rows

"""Static batch shapes for fine-tuning (`finetune.static_shapes`, datamodules.finetune_data.Shapes): the
same losses as dynamic padding where the math is unchanged (no dropout, fp32), and a whole fine-tuning
step (forward, loss, backward) that compiles as one graph per width bucket and never again."""

from __future__ import annotations

from itertools import count
from pathlib import Path

import pytest
import torch

from ablations.config import build_config
from datamodules.finetune_data import SHAPE_STEP, FinetuneDataModule, FinetuneDataOptions
from datamodules.registry import get_dataset
from lightning_modules.finetune import FineTuneModule
from lightning_modules.heads import HeadSpec
from lightning_modules.models import load_encoder
from lightning_modules.optim import adamw_with_linear_warmup


def micro_task(task: str, data_dir: Path, static_shapes: bool, dropout: float = 0.0, examples: int = 120):
    """A micro fine-tuning task's module, optimizer and endless training batches (batches of 16, in
    the bucketed order of its seed), the model initialised the same way every time."""
    cfg = build_config("micro", [f"finetune.dropout={dropout}"], task=task)
    spec = get_dataset(task)
    torch.manual_seed(0)
    encoder, tokenizer = load_encoder(cfg.model, data_dir, dropout)
    options = FinetuneDataOptions(max_length=cfg.finetune.max_length, batch_size=16, eval_batch_size=64,
                                  max_train_examples=examples, max_eval_examples=8, seed=1,
                                  static_shapes=static_shapes)
    dm = FinetuneDataModule(spec, data_dir, tokenizer, options)
    dm.setup()
    if len(tokenizer) > encoder.get_input_embeddings().num_embeddings:
        encoder.resize_token_embeddings(len(tokenizer))
    head = HeadSpec.from_config(cfg.finetune, spec.task_type).build(dm.encoder, encoder.config.hidden_size)
    module = FineTuneModule(encoder, head, 1e-3, 0.01, 0.1).train()
    optimizer = adamw_with_linear_warmup(module, 1e-3, 0.01, 0.1, total_steps=1000)["optimizer"]
    loader = dm.train_dataloader()

    def batches():
        for epoch in count():
            loader.sampler.set_epoch(epoch)
            yield from loader

    return module, optimizer, batches()


def train(module, optimizer, batches, steps: int) -> list[float]:
    losses = []
    for _ in range(steps):
        loss = module.training_step(next(batches), 0)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    return losses


@pytest.mark.slow
@pytest.mark.parametrize("task", ["bc5-chem", "chemprot"])  # the token kind; the classification kind
def test_static_shapes_give_the_losses_of_dynamic_padding(task, data_dir):
    """120 examples in batches of 16: every epoch ends in a batch of 8 real rows and 8 filler rows."""
    dynamic = micro_task(task, data_dir, static_shapes=False)
    static = micro_task(task, data_dir, static_shapes=True)
    batch = next(static[2])
    assert batch["input_ids"].shape[1] % SHAPE_STEP == 0
    static = micro_task(task, data_dir, static_shapes=True)
    expected, got = train(*dynamic, steps=100), train(*static, steps=100)
    assert got == pytest.approx(expected, rel=1e-5)
    assert max(expected) - min(expected) > 0.01  # the weights moved: the steps were taken


def test_filler_rows_add_nothing_to_the_loss(data_dir):
    """The last batch of an epoch, filled to 16 rows: the loss is that of its 8 real rows."""
    module, _, batches = micro_task("chemprot", data_dir, static_shapes=True)
    module.eval()
    batch = next(b for b in batches if not b["real"].all())
    real = batch["real"]
    assert real.sum() == 8 and len(real) == 16 and (batch["index"][~real] == -1).all()
    alone = {k: v[real] for k, v in batch.items()}
    with torch.no_grad():
        assert module.batch_loss(batch) == pytest.approx(float(module.batch_loss(alone)), rel=1e-5)
        batch["labels"] = torch.where(real, batch["labels"], (batch["labels"] + 1) % 6)  # filler labels counted
        assert module.batch_loss(batch) != pytest.approx(float(module.batch_loss(alone)), rel=1e-5)


@pytest.mark.slow
def test_a_static_shape_step_compiles_whole_once_per_width_bucket(data_dir):
    """50 steps of micro GAD with the whole forward, loss and backward compiled with fullgraph=True:
    no graph break, one compiled graph per distinct batch width and none after a width's first batch
    (counted: torch._dynamo's `stats.unique_graphs` before and after each step; `graph_break` over all)."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    module, optimizer, batches = micro_task("gad", data_dir, static_shapes=True, dropout=0.1, examples=200)
    # dynamo and AOTAutograd capture the graphs (forward and backward) as inductor would get them; "aot_eager"
    # runs them without inductor's code generation, which would take minutes of C++ compilation here
    module.compile_step(buckets=4, backend="aot_eager")
    widths_seen, new_graphs = set(), []
    for _ in range(50):
        batch = next(batches)
        before = counters["stats"]["unique_graphs"]
        loss = module.training_step(batch, 0)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        width = batch["input_ids"].shape
        new_graphs.append((width not in widths_seen, counters["stats"]["unique_graphs"] - before))
        widths_seen.add(width)
    assert sum(counters["graph_break"].values()) == 0
    assert [graphs for first, graphs in new_graphs if not first] == [0] * (50 - len(widths_seen))
    assert [graphs for first, graphs in new_graphs if first] == [1] * len(widths_seen)
    assert len(widths_seen) >= 2 and {shape[0] for shape in widths_seen} == {16}

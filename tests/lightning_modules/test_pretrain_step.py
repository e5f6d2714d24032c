"""The pretraining step reads nothing back from the device, compiles as one graph with one shape, and
computes what the step before it computed (benchmarks/step_overhead.py keeps that step, `today_step`, for
the side-by-side counts)."""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch
from torch._dynamo.utils import counters
from torch.utils._python_dispatch import TorchDispatchMode

from ablations.config import build_config
from benchmarks.step_ops import OpCounter
from benchmarks.step_overhead import StaticStep, batches, build_module, build_sides, today_optimizer, today_step
from datamodules.pretrain.corpora import load_corpus
from datamodules.pretrain.shards import build_shards
from datamodules.pretrain.vocab import read_vocab, resolve_vocab_file
from lightning_modules.optim import Lamb
from lightning_modules.pretrain import sample_tokens


@pytest.fixture(scope="module")
def staged(data_dir, tmp_path_factory):
    """A micro BERT's config (rows of 64 tokens, as the micro profile's), the bert-base-uncased vocabulary and
    shards of staged PubMed abstracts."""
    vocab_path = resolve_vocab_file("bert-base-uncased", data_dir)
    corpus = load_corpus("pubmed", data_dir, max_words=20000, min_words=128, seed=1)
    shards = build_shards(corpus, vocab_path, True, 64, "none", 0, tmp_path_factory.mktemp("shards") / "x")
    return read_vocab(vocab_path), shards


def micro(masking: str = "wwm"):
    return build_config("micro", ["pretrain.batch_size=4", f"pretrain.masking={masking}"], task="pretrain")


def sync_counts(step, batch) -> tuple[int, dict]:
    with OpCounter() as counter:
        step(batch)
    return counter.count.ops, dict(counter.count.sync_ops)


class StepSyncs(pl.Callback):
    """The operators of each optimizer step of a real fit, by step: from its first micro-batch's start to
    the next step's, so the forward, loss, backward, clipping, optimizer and schedule, every callback's and
    the module's hooks, the logger and the progress bar are all inside. With `trainer.num_workers=1` the
    next batch is assembled in a worker process, outside the count."""

    def __init__(self):
        self.counter, self.step, self.counts = None, None, {}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step != self.step:
            self._close()
            self.step, self.counter = trainer.global_step, OpCounter()
            self.counter.__enter__()

    def on_train_end(self, trainer, pl_module):
        self._close()

    def _close(self):
        if self.counter is not None:
            self.counter.__exit__(None, None, None)
            self.counts[self.step], self.counter = self.counter.count, None


@pytest.mark.parametrize("masking, accumulate", [("wwm", 1), ("wordpiece", 2)])
def test_a_fit_reads_nothing_back_from_the_device_between_log_points(staged, data_dir, tmp_path_factory, masking,
                                                                     accumulate):
    """A real `bioablate pretrain` fit (ablations.run.pretrain: the module, Lightning's loop, the run's
    callbacks, logger and progress bar), counted by a TorchDispatchMode: the steps between log points read
    no device value back (`.item()`, `float()`, `nonzero`, boolean-mask indexing, a blocking copy to the
    host), at one micro-batch a step or two. The loss guard read its record at every micro-batch and the
    bar its figures at every refresh before. Every step's loss still reaches the run. The step before the
    sync-free one (boolean indexing, `float(loss)`, the token count read back, and transformers asking
    whether the [B, L] mask has padding) made six such calls."""
    from ablations.run.pretrain import run_pretrain

    cfg = build_config("micro", ["pretrain.batch_size=4", "pretrain.max_steps=4", "pretrain.checkpoint_every=4",
                                 "trainer.log_every_n_steps=2", "pretrain.max_words=20000", "trainer.num_workers=1",
                                 "trainer.progress_bar=true", f"pretrain.masking={masking}",
                                 f"pretrain.accumulate={accumulate}"],
                       task="pretrain", experiment_name="pretrain", data_dir=str(data_dir),
                       work_dir=str(tmp_path_factory.mktemp("fit")))
    counter = StepSyncs()
    result = run_pretrain(cfg, callbacks=[counter])
    assert sorted(counter.counts) == [0, 1, 2, 3] and len(result.losses) == 4
    for step in (0, 2):  # the log points are steps 1 and 3 (counted from 0)
        assert counter.counts[step].ops > 100 * accumulate, step  # the step was counted
        assert counter.counts[step].syncs == 0, (step, dict(counter.counts[step].sync_ops))

    vocab, shards = staged
    data = batches(micro(masking), vocab, shards, 2, 32, torch.device("cpu"))
    old, _, _ = build_module(micro(masking), vocab, torch.device("cpu"), 2)
    old_optimizer, old_scheduler = today_optimizer(old, 1e-3, 0.01, 0.1, 2)
    today_step(old, old_optimizer, old_scheduler, data[0], [])
    _, syncs = sync_counts(lambda b: today_step(old, old_optimizer, old_scheduler, b, []), data[1])
    assert syncs == {"_local_scalar_dense": 3, "index": 2, "index_put": 1}


class MatmulDtypes(TorchDispatchMode):
    """The dtypes the weight matmuls (`mm`, `addmm`) of a step compute in, forward and backward. (Attention's
    `bmm` is left out: SDPA's math kernel on a CPU computes a bf16 attention in fp32.)"""

    def __init__(self):
        super().__init__()
        self.dtypes: set[torch.dtype] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket.__name__ in ("mm", "addmm"):
            self.dtypes.add(args[-1].dtype)
        return func(*args, **(kwargs or {}))


def test_the_benchmark_steps_compute_their_matmuls_in_bf16_autocast(staged):
    """benchmarks.step_overhead's sides run as Lightning's bf16-mixed runs the step: every weight matmul of
    today's step and of the static one, forward and backward, in bf16 (an fp32 step on a GPU measures
    the fp32 peak, not the host)."""
    vocab, shards = staged
    cfg = micro()
    data = batches(cfg, vocab, shards, 2, 32, torch.device("cpu"))
    for name, step in build_sides(cfg, vocab, torch.device("cpu"), 2, ["today", "static"], "bf16").items():
        with MatmulDtypes() as seen:
            step(data[0])
        assert seen.dtypes == {torch.bfloat16}, (name, seen.dtypes)


def test_the_step_computes_the_losses_of_the_step_before(staged):
    """100 fp32 micro steps on the same batches: where the math is unchanged (every drawn position fits
    the slots), the losses of the step before and of the sync-free one agree to 1e-5 relative."""
    vocab, shards = staged
    cfg = micro()
    steps = 100
    data = batches(cfg, vocab, shards, steps, 64, torch.device("cpu"))  # a slot for every position: room for every draw
    old, _, _ = build_module(cfg, vocab, torch.device("cpu"), steps)
    old_optimizer, old_scheduler = today_optimizer(old, cfg.pretrain.lr, cfg.pretrain.weight_decay,
                                                   cfg.pretrain.warmup_ratio, steps)
    module, optimizer, scheduler = build_module(cfg, vocab, torch.device("cpu"), steps)
    step = StaticStep(module, optimizer, scheduler)
    before: list[float] = []
    after = []
    for batch in data:
        today_step(old, old_optimizer, old_scheduler, batch, before)
        after.append(step(batch))
    after = torch.stack(after).tolist()
    assert before[-1] < before[0] - 0.5  # it trains
    worst = max(abs(a - b) / abs(b) for a, b in zip(after, before))
    assert worst < 1e-5, worst


def test_the_whole_step_compiles_as_one_graph_with_one_shape(staged):
    """forward + loss (and, through AOTAutograd, backward) with fullgraph=True: no graph break, and over
    50 batches of a micro run with fixed predictions per row, no recompile."""
    import torch._dynamo

    vocab, shards = staged
    cfg = micro()
    data = batches(cfg, vocab, shards, 50, 32, torch.device("cpu"))
    module, optimizer, scheduler = build_module(cfg, vocab, torch.device("cpu"), 50)
    torch._dynamo.reset()
    counters.clear()
    module.compile_losses(backend="aot_eager")  # dynamo's capture and AOTAutograd: what decides graphs and shapes
    step = StaticStep(module, optimizer, scheduler)  # the optimizer eager: what is counted is the model's
    losses = [step(data[0])]
    torch._dynamo.config.error_on_recompile = True
    try:
        losses += [step(batch) for batch in data[1:]]
    finally:
        torch._dynamo.config.error_on_recompile = False
    assert dict(counters["graph_break"]) == {}
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    assert torch.isfinite(torch.stack(losses)).all()


def test_sampled_tokens_follow_the_softmax_and_never_draw_a_zero_probability_token():
    """ELECTRA's generator samples: 40,000 draws from each of three rows against their softmax, by a chi-square
    test (a sampler whose draws shift by 0.05 of the mass fails it at p < 1e-6);
    a token at -inf is never drawn, and the default generator's seed fixes the draw."""
    from scipy.stats import chisquare

    logits = torch.tensor([[0.0, 1.0, 2.0, -1.0, 0.5, -float("inf")],
                           [3.0, -float("inf"), 0.0, 0.0, 0.0, 1.0],
                           [-float("inf"), -float("inf"), -float("inf"), 0.0, -float("inf"), -float("inf")]])
    draws = 40000
    torch.manual_seed(0)
    drawn = sample_tokens(logits.repeat_interleave(draws, dim=0)).view(3, draws)
    for row, tokens in zip(logits, drawn):
        probs = torch.softmax(row, -1)
        assert not probs[tokens].eq(0).any()
        counts = torch.bincount(tokens, minlength=len(row))
        support = probs > 0
        if support.sum() == 1:  # one token with all the mass: every draw is it
            assert counts[support].item() == draws
            continue
        expected = probs[support].double() / probs[support].double().sum() * draws
        result = chisquare(counts[support].double().numpy(), expected.numpy())
        assert result.pvalue > 1e-6, (counts, probs)
    torch.manual_seed(0)
    assert torch.equal(sample_tokens(logits.repeat_interleave(draws, dim=0)).view(3, draws), drawn)


def _lamb_reference(params, grads_per_step, lr=1e-2, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01):
    """LAMB as it was written before, one tensor at a time with its trust ratio read back."""
    state = {i: (torch.zeros_like(p), torch.zeros_like(p)) for i, p in enumerate(params)}
    for step, grads in enumerate(grads_per_step, start=1):
        for i, (p, g) in enumerate(zip(params, grads)):
            m, v = state[i]
            m.mul_(betas[0]).add_(g, alpha=1 - betas[0])
            v.mul_(betas[1]).addcmul_(g, g, value=1 - betas[1])
            update = (m / (1 - betas[0] ** step)) / ((v / (1 - betas[1] ** step)).sqrt() + eps)
            update = update.add(p, alpha=weight_decay)
            w_norm, u_norm = p.norm(), update.norm()
            trust = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
            p.add_(update, alpha=-lr * float(trust))


def test_lamb_on_all_tensors_at_once_is_lamb_and_reads_nothing_back():
    torch.manual_seed(0)
    shapes = [(8, 4), (4,), (3, 3), (5,)]
    start = [torch.randn(s) for s in shapes]
    start[3].zero_()  # a zero tensor: trust ratio 1
    grads = [[torch.randn(s) for s in shapes] for _ in range(5)]
    reference = [p.clone() for p in start]
    _lamb_reference(reference, grads)
    params = [torch.nn.Parameter(p.clone()) for p in start]
    lamb = Lamb(params, lr=1e-2, weight_decay=0.01)
    for step, step_grads in enumerate(grads):
        for p, g in zip(params, step_grads):
            p.grad = g.clone()
        if step == 4:
            with OpCounter() as counter:
                lamb.step()
            assert dict(counter.count.sync_ops) == {}
        else:
            lamb.step()
    for p, r in zip(params, reference):
        torch.testing.assert_close(p.detach(), r, rtol=1e-6, atol=1e-7)

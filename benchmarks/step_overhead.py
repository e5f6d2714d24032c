"""Host overhead of one pretraining step: ATen operators issued, host-device syncs and host microseconds
per step, today's step against the sync-free, static-shape one, side by side in one process.

    python -m benchmarks.step_overhead --data-dir ../shared/data            # CPU, toy width
    python -m benchmarks.step_overhead --device cuda --size base --batch-size 64

At toy width (hidden 32) the matmuls cost nothing, so the host time per step is what dispatching the
step's operators costs: the part of a GPU step the device waits on when it is not captured in a graph.
The operators are counted by a `TorchDispatchMode` (`OpCounter`): every ATen call the step makes
through the dispatcher, the same way for every side, including those a compiled graph still calls
(matmuls, random numbers; the compiler's fused loops are one call each in its generated code and not
ATen calls). A sync is a call that reads a device value back to the host (`.item()`, `float(t)`,
`bool(t)`, a data-dependent shape: `nonzero`, boolean indexing).

Sides (the same model, data, optimizer and schedule; the same batches in the same order):

- **today**: the step as it was before: the MLM head on `hidden[labels != -100]` (boolean indexing),
  `float(loss)` for the loss history and `float(mask.sum())` for the token rate after every step,
  per-tensor gradient clipping, fused AdamW with a float learning rate;
- **static**: `PretrainModule.training_step` on fixed-width predicted positions (`pretrain.max_predictions`)
  gathered by index, losses kept on the device, for-each clipping, fused capturable AdamW, eager;
- **static-compiled**: the same, forward + loss + backward compiled with `fullgraph=True` and the
  optimizer step compiled too;
- **static-graphed** (CUDA only): compiled with `mode="reduce-overhead"` (CUDA graphs).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import torch
import torch.nn.functional as F
from benchmarks.pretrain_throughput import SIZES as PRETRAIN_SIZES
from torch.utils._python_dispatch import TorchDispatchMode

# the ATen calls that read a device value back to the host, or make a shape from device data
SYNC_OPS = frozenset({"_local_scalar_dense", "item", "nonzero", "masked_select", "is_nonzero", "equal"})


def _is_sync(func, args) -> bool:
    name = func.overloadpacket.__name__
    if name in SYNC_OPS:
        return True
    # boolean-mask indexing (`t[mask]`, `t[mask] = v`) finds the mask's true positions inside the kernel
    # (a nonzero the dispatcher does not see again): a shape made from device data
    if name in ("index", "index_put", "index_put_", "_index_put_impl_") and len(args) > 1:
        return any(torch.is_tensor(i) and i.dtype in (torch.bool, torch.uint8) for i in args[1] if i is not None)
    return False


class OpCounter(TorchDispatchMode):
    """Counts the ATen operators dispatched while active (by name: `mm`, `add_`), and among them the
    syncs (`syncs`)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter = Counter()
        self.syncs: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.overloadpacket.__name__] += 1
        if _is_sync(func, args):
            self.syncs[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.ops.values())


# ------------------------------------------------------------------------------------------- sides

# toy: the width at which a step's host time is all dispatch (the op count does not depend on width)
SIZES = {"toy": dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64), **PRETRAIN_SIZES}
SIDES = ("today", "static", "static-compiled", "static-graphed")


def build_module(cfg, vocab: list[str], device: torch.device, total_steps: int, optimizer: str = "adamw"):
    """A freshly initialised BERT MLM model (seed 0) in its PretrainModule, on `device`, with its optimizer
    and schedule."""
    from lightning_modules.pretrain import PretrainModule
    from lightning_modules.pretrain_models import ObjectiveSpec, build_model

    p = cfg.pretrain
    torch.manual_seed(0)
    objective = ObjectiveSpec("bert")
    model = build_model(objective, len(vocab), vocab.index("[PAD]"), cfg.model, p.seq_len)
    module = PretrainModule(model, objective=objective, lr=p.lr, weight_decay=p.weight_decay,
                            warmup_ratio=p.warmup_ratio, total_steps=total_steps, optimizer=optimizer,
                            seed=0).to(device)
    module.train()
    opt = module.configure_optimizers()
    return module, opt["optimizer"], opt["lr_scheduler"]["scheduler"]


def today_optimizer(module, lr: float, weight_decay: float, warmup_ratio: float, total_steps: int):
    """Today's AdamW: fused where supported, the learning rate a float (not capturable)."""
    from transformers import get_linear_schedule_with_warmup

    from lightning_modules.optim import fused_supported, parameter_groups

    optimizer = torch.optim.AdamW(parameter_groups(module.model, weight_decay), lr=lr,
                                  fused=True if fused_supported(module.model) else None)
    return optimizer, get_linear_schedule_with_warmup(optimizer, int(warmup_ratio * total_steps), total_steps)


def today_step(module, optimizer, scheduler, batch: dict, history: list[float], clip: float = 1.0) -> torch.Tensor:
    """One optimizer step as PretrainModule and Lightning ran it before the sync-free step: the MLM head on
    the boolean-indexed masked positions, the loss read back for the history, per-tensor clipping, the
    token count read back for the rate."""
    module.on_train_batch_start(batch, 0)
    selected = batch["labels"] != -100
    embeds = module.parts.embeddings(batch["input_ids"])
    out = module.parts.encoder(inputs_embeds=embeds, attention_mask=batch["attention_mask"],
                               token_type_ids=batch["token_type_ids"])
    logits = module.parts.mlm_head(out.last_hidden_state[selected])
    loss = F.cross_entropy(logits.float(), batch["labels"][selected])
    history.append(float(loss.detach()))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(module.parameters(), clip)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    float(batch["attention_mask"].sum())  # the token rate's count
    return loss.detach()


class StaticStep:
    """One optimizer step of the sync-free, static-shape path: `PretrainModule.training_step` (fixed-width
    positions gathered by index, losses kept on the device), backward, for-each clipping, the fused
    capturable AdamW, the schedule. With `compile`, forward + loss (+ backward) is one fullgraph graph
    and clipping + the optimizer step another; `mode` is torch.compile's (reduce-overhead: CUDA graphs)."""

    def __init__(self, module, optimizer, scheduler, clip: float = 1.0, compile: bool = False,
                 mode: str | None = None):
        from lightning_modules.optim import clip_gradients

        self.module, self.optimizer, self.scheduler = module, optimizer, scheduler
        self.parameters = [p for p in module.parameters() if p.requires_grad]

        def update() -> None:
            clip_gradients(self.parameters, clip)
            optimizer.step()

        self.update = update
        if compile:
            module.compile_losses(mode)
            self.update = torch.compile(update, fullgraph=True, mode=mode)

    def __call__(self, batch: dict) -> torch.Tensor:
        self.module.on_train_batch_start(batch, 0)
        loss = self.module.training_step(batch, 0)
        loss.backward()
        self.update()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()


def batches(cfg, vocab: list[str], shards, steps: int, max_predictions: int | None, device: torch.device
            ) -> list[dict]:
    """The first `steps` micro-batches of a run of `cfg` (seed 0), masked as the loader's workers mask them,
    on `device`."""
    from datamodules.pretrain.data import BatchingSpec, MicroBatches
    from datamodules.pretrain.masking import MaskingSpec, MaskTokens

    p = cfg.pretrain
    batching = BatchingSpec(p.batch_size, accumulate=1, max_steps=steps, checkpoint_every=steps, seed=0)
    masking = MaskingSpec(p.masking, p.mask_rate, "constant", max_predictions)
    data = MicroBatches(shards, range(steps), rank=0, world_size=1, batching=batching, masking=masking,
                        tokens=MaskTokens.from_vocab(vocab))
    return [{k: v.to(device) if torch.is_tensor(v) else v for k, v in data.batch(m).items()} for m in range(steps)]

"""`pretrain.master_weights`: bf16 parameters, fp32 masters in the optimizer. The masters follow the fp32
trajectory exactly where bf16 weights would round every update away, gradients accumulate in fp32 over
micro-batches, and the masters travel in the optimizer's state dict (a resumed run continues from them)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lightning_modules.master_weights import master_model, optimized_parameters, with_master_weights
from lightning_modules.optim import adamw_with_linear_warmup

LR, STEPS = 1e-3, 40  # each AdamW update ~1e-3: below half a bf16 unit (2^-8) at 1.0


def model(dtype: torch.dtype) -> nn.Module:
    layer = nn.Linear(4, 3, bias=True)
    with torch.no_grad():
        layer.weight.fill_(1.0)
        layer.bias.fill_(0.5)
    return layer.to(dtype)


def step(layer: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """A loss whose gradient does not depend on the weights (so every side sees the same gradients)."""
    x = torch.ones((2, 4), dtype=layer.weight.dtype)
    (layer(x) * 0.5).sum().backward()
    optimizer.step()
    optimizer.zero_grad()


def configured(layer: nn.Module, masters: bool) -> torch.optim.Optimizer:
    factory = with_master_weights(adamw_with_linear_warmup) if masters else adamw_with_linear_warmup
    return factory(layer, LR, 0.01, 0.0, 1000)["optimizer"]


def test_masters_follow_the_fp32_trajectory_that_bf16_weights_lose():
    reference, bf16, plain = model(torch.float32), model(torch.bfloat16), model(torch.bfloat16)
    sides = [(reference, configured(reference, False)), (bf16, configured(bf16, True)),
             (plain, configured(plain, False))]
    for _ in range(STEPS):
        for layer, optimizer in sides:
            step(layer, optimizer)
    masters = list(sides[1][1].master_weights.masters)
    assert masters[0].dtype == torch.float32 and bf16.weight.dtype == torch.bfloat16
    torch.testing.assert_close(masters[0], reference.weight, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(masters[1], reference.bias, rtol=1e-6, atol=1e-7)
    assert torch.equal(bf16.weight, masters[0].to(torch.bfloat16))  # the model holds the masters, rounded
    assert float((reference.weight.detach() - 1).abs().min()) > 0.03  # the updates added up ...
    assert torch.equal(plain.weight, torch.ones_like(plain.weight))  # ... and bf16 weights alone lost them all


def test_gradients_accumulate_in_fp32():
    layer = model(torch.bfloat16)
    optimizer = configured(layer, True)
    x = torch.ones((1, 4), dtype=torch.bfloat16)
    layer(x).sum().backward()  # d/dW = 1
    (layer(x).sum() * 2 ** -9).backward()  # + 2^-9: lost in a bf16 sum (1 + 2^-9 rounds to 1)
    grad = optimizer.master_weights.masters[0].grad
    assert layer.weight.grad is None and grad.dtype == torch.float32
    assert torch.equal(grad, torch.full_like(grad, 1 + 2 ** -9))
    assert [p.grad for p in optimized_parameters(optimizer)][0] is grad  # what clipping scales


def test_the_masters_travel_in_the_optimizer_state():
    layer = model(torch.bfloat16)
    optimizer = configured(layer, True)
    for _ in range(5):
        step(layer, optimizer)
    state = optimizer.state_dict()
    resumed = model(torch.bfloat16)
    resumed.load_state_dict(layer.state_dict())
    again = configured(resumed, True)
    again.load_state_dict(state)
    for a, b in zip(again.master_weights.masters, optimizer.master_weights.masters):
        assert torch.equal(a, b)  # the fp32 values, not their bf16 rounding
    assert not torch.equal(optimizer.master_weights.masters[0], layer.weight.float())
    step(layer, optimizer), step(resumed, again)
    assert torch.equal(layer.weight, resumed.weight)
    with pytest.raises(ValueError, match="no fp32 master weights"):
        configured(model(torch.bfloat16), True).load_state_dict(configured(model(torch.bfloat16), False).state_dict())


def test_the_exported_model_holds_the_masters_in_fp32():
    layer = model(torch.bfloat16)
    optimizer = configured(layer, True)
    for _ in range(3):
        step(layer, optimizer)
    exported = master_model(layer, optimizer)
    assert exported is not layer and exported.weight.dtype == torch.float32 and layer.weight.dtype == torch.bfloat16
    assert torch.equal(exported.weight, optimizer.master_weights.masters[0])
    plain = model(torch.float32)
    assert master_model(plain, configured(plain, False)) is plain

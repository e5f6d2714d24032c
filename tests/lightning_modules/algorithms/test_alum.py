"""ALUM on tensors: the perturbation stays in its ball and the adversarial loss is differentiable."""

from __future__ import annotations

import pytest
import torch

from lightning_modules.algorithms.alum import alum_loss, symmetric_kl


def test_alum_perturbation_stays_in_the_ball_and_the_loss_is_differentiable():
    torch.manual_seed(0)
    layer = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 50))
    embeddings = torch.randn(8, 10, 16, requires_grad=True)
    for eps, steps in ((1e-5, 1), (1e-2, 3)):
        clean = layer(embeddings)
        loss, delta = alum_loss(layer, embeddings, clean, sigma=1e-5, epsilon=eps, step_size=1e-3, steps=steps)
        assert delta.abs().max() <= eps + 1e-12 and delta.abs().max() > 0
        assert loss.item() > 0 and loss.requires_grad
        loss.backward()
        assert layer[0].weight.grad is not None and layer[0].weight.grad.abs().sum() > 0
        layer.zero_grad()
    assert symmetric_kl(clean.detach(), clean.detach()).item() == pytest.approx(0.0, abs=1e-6)

"""ALUM adversarial training (Liu et al. 2020, "Adversarial Training for Large Neural Language Models").

`alum_loss` draws delta ~ N(0, sigma^2), takes `steps` ascent steps on the symmetric KL between clean and
perturbed predictions (delta += step_size * g / ||g||_inf, projected onto the L-inf epsilon-ball), and
returns that KL at the final delta, differentiable w.r.t. the model but not delta. The caller adds
`alpha * loss` to its task loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F


def symmetric_kl(p_logits: torch.Tensor, q_logits: torch.Tensor, weights: torch.Tensor | None = None
                 ) -> torch.Tensor:
    """KL(p||q) + KL(q||p) over the last dimension, averaged over the rest (float32), or over the rows
    `weights` marks 1."""
    p = F.log_softmax(p_logits.float(), dim=-1)
    q = F.log_softmax(q_logits.float(), dim=-1)
    kl = (p.exp() * (p - q)).sum(-1) + (q.exp() * (q - p)).sum(-1)
    return kl.mean() if weights is None else (kl * weights).sum() / weights.sum()


def _project(delta: torch.Tensor, epsilon: float) -> torch.Tensor:
    return delta.clamp(-epsilon, epsilon)


def alum_loss(forward: Callable[[torch.Tensor], torch.Tensor], embeddings: torch.Tensor,
              clean_logits: torch.Tensor, *, sigma: float = 1e-5, epsilon: float = 1e-5,
              step_size: float = 1e-3, steps: int = 1, generator: torch.Generator | None = None,
              weights: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(symmetric-KL adversarial loss, final perturbation) of `forward` at `embeddings` against
    `clean_logits`: noise `sigma`, `steps` ascent steps of `step_size`, an L-inf ball of `epsilon`."""
    noise = torch.randn(embeddings.shape, generator=generator, dtype=torch.float32).to(embeddings)
    delta = _project(noise * sigma, epsilon)
    for _ in range(steps):
        delta = delta.detach().requires_grad_(True)
        kl = symmetric_kl(forward(embeddings.detach() + delta), clean_logits.detach(), weights)
        (grad,) = torch.autograd.grad(kl, delta)
        dims = tuple(range(1, grad.ndim))
        norm = grad.abs().amax(dim=dims, keepdim=True).clamp_min(1e-12)
        delta = _project(delta + step_size * grad / norm, epsilon)
    delta = delta.detach()
    return symmetric_kl(forward(embeddings + delta), clean_logits, weights), delta


@dataclass
class Alum:
    """Thin wrapper holding the hyperparameters (`pretrain.alum.*`); `__call__` returns alpha * loss."""

    alpha: float = 10.0
    sigma: float = 1e-5
    epsilon: float = 1e-5
    step_size: float = 1e-3
    steps: int = 1

    def __call__(self, forward: Callable[[torch.Tensor], torch.Tensor], embeddings: torch.Tensor,
                 clean_logits: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        loss, _ = alum_loss(forward, embeddings, clean_logits, sigma=self.sigma, epsilon=self.epsilon,
                            step_size=self.step_size, steps=self.steps, weights=weights)
        return self.alpha * loss

"""AdamW (or LAMB, for pretraining) without weight decay on biases and LayerNorm weights, and the paper's
slanted triangular schedule (linear warm-up over `warmup_ratio` of the steps, then linear decay to zero).

Nothing reads a number back from the device: the learning rate is a tensor the schedule writes into, so a
captured CUDA graph sees each step's rate."""

from __future__ import annotations

import torch
from torch import nn
from transformers import get_linear_schedule_with_warmup


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        # 1-d tensors are biases and LayerNorm gains: decaying them only hurts (BERT's recipe).
        (no_decay if param.ndim < 2 else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def fused_supported(model: nn.Module) -> bool:
    """Whether AdamW's fused kernel can run: all parameters floating point and all on CUDA or all on CPU."""
    params = [p for p in model.parameters() if p.requires_grad]
    if not params or not all(p.is_floating_point() for p in params):
        return False
    devices = {p.device.type for p in params}
    return devices == {"cuda"} or devices == {"cpu"}


def _with_linear_warmup(optimizer: torch.optim.Optimizer, warmup_ratio: float, total_steps: int) -> dict:
    """Lightning's `configure_optimizers` return value, the scheduler stepped every optimizer step."""
    scheduler = get_linear_schedule_with_warmup(optimizer, int(warmup_ratio * total_steps), total_steps)
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def adamw_with_linear_warmup(model: nn.Module, lr: float, weight_decay: float, warmup_ratio: float,
                             total_steps: int) -> dict:
    """AdamW at peak `lr`, warmed up over `warmup_ratio` of `total_steps`: what `configure_optimizers` returns."""
    return _with_linear_warmup(adamw(model, lr, weight_decay), warmup_ratio, total_steps)


def adamw(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW without weight decay on 1-d parameters: the fused kernel, capturable, with the learning rate a
    tensor on the parameters' device, where the parameters allow it; else for-each."""
    if not fused_supported(model):
        return torch.optim.AdamW(parameter_groups(model, weight_decay), lr=lr)
    device = next(p.device for p in model.parameters() if p.requires_grad)
    return torch.optim.AdamW(parameter_groups(model, weight_decay), lr=torch.tensor(lr, device=device),
                             fused=True, capturable=True)


def clip_gradients(parameters, max_norm: float) -> torch.Tensor:
    """Scale all gradients to a joint 2-norm of at most `max_norm`, in one for-each pass, nothing read back."""
    return torch.nn.utils.clip_grad_norm_(list(parameters), max_norm, foreach=True)


def lamb_with_linear_warmup(model: nn.Module, lr: float, weight_decay: float, warmup_ratio: float,
                            total_steps: int) -> dict:
    """LAMB, with the same arguments and schedule as `adamw_with_linear_warmup`."""
    return _with_linear_warmup(Lamb(parameter_groups(model, weight_decay), lr=lr), warmup_ratio, total_steps)


class Lamb(torch.optim.Optimizer):
    """LAMB (You et al. 2020): Adam moments, decoupled weight decay, trust ratio ||w|| / ||update||."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-6,
                 weight_decay: float = 0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            beta1, beta2 = group["betas"]
            for p in params:
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["m"] = torch.zeros_like(p)
                    state["v"] = torch.zeros_like(p)
                state["step"] += 1  # a host count: the bias corrections are host numbers
            states = [self.state[p] for p in params]
            grads, m, v = [p.grad for p in params], [s["m"] for s in states], [s["v"] for s in states]
            torch._foreach_mul_(m, beta1)
            torch._foreach_add_(m, grads, alpha=1 - beta1)
            torch._foreach_mul_(v, beta2)
            torch._foreach_addcmul_(v, grads, grads, value=1 - beta2)
            m_hat = torch._foreach_div(m, [1 - beta1 ** s["step"] for s in states])
            v_hat = torch._foreach_div(v, [1 - beta2 ** s["step"] for s in states])
            denominator = torch._foreach_sqrt(v_hat)
            torch._foreach_add_(denominator, group["eps"])
            updates = torch._foreach_div(m_hat, denominator)
            if group["weight_decay"]:
                torch._foreach_add_(updates, params, alpha=group["weight_decay"])
            # the trust ratios of all tensors at once, on the device
            w_norm, u_norm = torch.stack(torch._foreach_norm(params)), torch.stack(torch._foreach_norm(updates))
            trust = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
            torch._foreach_mul_(updates, list((trust * -group["lr"]).unbind()))
            torch._foreach_add_(params, updates)
        return loss

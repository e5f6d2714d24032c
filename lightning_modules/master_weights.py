"""`pretrain.master_weights`: bf16 parameters, with an fp32 master copy that the optimizer steps.

Under `bf16-true` the optimizer adds each update to an 8-bit mantissa, which rounds small updates away.
Mixed-precision training (Micikevicius et al. 2018; apex O2) keeps fp32 masters, here in three hooks around
an unchanged optimizer: each bf16 gradient is added to its master's once accumulated, the optimizer steps
the masters, and after each step they are rounded into the parameters. The masters travel in the
optimizer's state dict, so a resumed run continues from the fp32 values; the export is the masters.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import torch
from torch import nn

STATE_KEY = "master_weights"  # the masters' values in the optimizer's state dict


class MasterWeights:
    """The fp32 masters of a model's trainable parameters and the hooks that tie the two together."""

    def __init__(self, model: nn.Module):
        self.params = [p for p in model.parameters() if p.requires_grad]
        # a ParameterList: the optimizer factories read named_parameters() (decay by p.ndim, fused by device)
        self.masters = nn.ParameterList([nn.Parameter(p.detach().float().clone()) for p in self.params])
        for param, master in zip(self.params, self.masters):
            param.register_post_accumulate_grad_hook(self._accumulate_into(master))

    @staticmethod
    def _accumulate_into(master: nn.Parameter) -> Callable[[torch.Tensor], None]:
        def hook(param: torch.Tensor) -> None:
            if master.grad is None:
                master.grad = param.grad.float()
            else:
                master.grad.add_(param.grad)
            param.grad = None
        return hook

    @torch.no_grad()
    def copy_to_params(self, *_: Any) -> None:
        torch._foreach_copy_(self.params, list(self.masters))

    def attach(self, optimizer: torch.optim.Optimizer) -> None:
        """Round the masters into the model after every step; keep them in the state dict."""
        optimizer.register_step_post_hook(self.copy_to_params)
        optimizer.register_state_dict_post_hook(self._save)
        optimizer.register_load_state_dict_pre_hook(self._load)
        optimizer.master_weights = self  # what `master_model` reads at export

    def _save(self, optimizer: torch.optim.Optimizer, state: dict) -> dict:
        state[STATE_KEY] = [m.detach().clone() for m in self.masters]
        return state

    @torch.no_grad()
    def _load(self, optimizer: torch.optim.Optimizer, state: dict) -> dict:
        state = dict(state)
        saved = state.pop(STATE_KEY, None)
        if saved is None:
            raise ValueError("the checkpoint's optimizer state has no fp32 master weights: it was not written "
                             "with pretrain.master_weights=true")
        torch._foreach_copy_(list(self.masters), [t.to(m.device) for t, m in zip(saved, self.masters)])
        self.copy_to_params()
        return state


def with_master_weights(factory: Callable[..., Any]) -> Callable[..., Any]:
    """`factory` (of lightning_modules.optim) made to step fp32 masters of the model's bf16 parameters."""
    def build(model: nn.Module, *args: Any, **kwargs: Any) -> Any:
        masters = MasterWeights(model)
        configured = factory(masters.masters, *args, **kwargs)
        optimizer = configured["optimizer"] if isinstance(configured, dict) else configured
        masters.attach(optimizer)
        return configured
    return build


def optimized_parameters(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """The tensors `optimizer` steps, whose gradients clipping scales: the parameters or their masters."""
    return [p for group in optimizer.param_groups for p in group["params"]]


def master_model(model: nn.Module, optimizer: torch.optim.Optimizer) -> nn.Module:
    """An fp32 copy of `model` holding the masters' values where `optimizer` keeps masters; else `model`."""
    masters: MasterWeights | None = getattr(optimizer, "master_weights", None)
    if masters is None:
        return model
    copied = copy.deepcopy(model).float()
    params = [p for p in copied.parameters() if p.requires_grad]
    with torch.no_grad():
        torch._foreach_copy_(params, list(masters.masters))
    return copied

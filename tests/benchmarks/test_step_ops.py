"""benchmarks.step_ops: the dispatch-mode counter and the profiler's count agree on eager code, and both
see every kind of host-device sync the step tests and the step benchmarks look for."""

from __future__ import annotations

import pytest
import torch

from benchmarks.step_ops import OpCounter, count_ops, is_sync, profiled_ops


def step(x: torch.Tensor, read) -> None:
    y = torch.nn.functional.gelu(x @ x.T + 1)
    read(y)


# reads of a device value (`float()` and `.item()` are `_local_scalar_dense` to a dispatch mode, `item` around
# it to the profiler: one sync either way)
READS = {"float": lambda y: float(y.sum()), "item": lambda y: y.mean().item(), "if": lambda y: bool((y > 0).any()),
         "nonzero": lambda y: torch.nonzero(y > 0)}


@pytest.mark.parametrize("read", sorted(READS))
def test_both_counts_see_a_read_back_and_agree_on_the_ops(read):
    x = torch.randn(4, 4)
    dispatched, profiled = (count(lambda: step(x, READS[read])) for count in (count_ops, profiled_ops))
    assert dispatched.syncs == profiled.syncs == 1, (dispatched.sync_ops, profiled.sync_ops)
    assert dispatched.ops == profiled.ops >= 4  # matmul, add, gelu, the read (and what it reduces first)
    assert count_ops(lambda: step(x, lambda y: y.sum())).syncs == 0  # the same step, nothing read back


def test_a_step_without_a_read_back_counts_no_sync_and_every_op():
    x = torch.randn(4, 4, requires_grad=True)
    with OpCounter() as counter:
        (x @ x.T).relu().sum().backward()  # forward and backward, below autograd
    assert counter.count.syncs == 0 and counter.count.by_name["mm"] >= 3  # x @ x.T, and its two grads


def test_boolean_mask_indexing_is_a_sync_for_both_counts():
    """`t[mask]` learns its output's shape from the mask's contents, on the host."""
    x = torch.randn(8)
    dispatched, profiled = count_ops(lambda: x[x < -1]), profiled_ops(lambda: x[x < -1])
    assert dispatched.syncs == profiled.syncs == 1, (dispatched.sync_ops, profiled.sync_ops)
    assert count_ops(lambda: x[torch.tensor([0, 2])]).syncs == 0  # indexing by position reads nothing back


def test_a_blocking_copy_from_a_device_to_the_host_is_a_sync_and_a_non_blocking_one_is_not():
    """`.cpu()` and `.tolist()` of a device tensor dispatch `_to_copy` to the CPU, `copy_` into a CPU tensor
    the same: the host waits for the device. (A `meta` tensor stands for the device's: the classification
    reads only where the tensors live.)"""
    device, host = torch.empty(3, device="meta"), torch.empty(3)
    cpu = torch.device("cpu")
    assert is_sync("_to_copy", (device,), {"device": cpu})  # .cpu(), .tolist(), .to("cpu")
    assert is_sync("copy_", (host, device))  # host_tensor.copy_(device_tensor)
    assert is_sync("copy_", (host, device, True))  # non-blocking into pageable memory still waits
    assert not is_sync("_to_copy", (device,), {"device": cpu, "non_blocking": True})  # into pinned memory
    assert not is_sync("_to_copy", (host,), {"device": cpu}) and not is_sync("copy_", (device, host))  # host to device
    assert not is_sync("_to_copy", (host,), {"dtype": torch.bfloat16})  # a cast where it lives

"""What one training step asks of the device: the ATen operators it dispatches, and how many of them make
the host wait for the device (a host-device synchronization). One home for both counts, used by the
pretraining (`benchmarks.step_overhead`) and fine-tuning (`benchmarks.finetune_step_ops`) benchmarks and by
the step tests.

    with OpCounter() as counter:              # a TorchDispatchMode: below autograd, so the backward too
        step(batch)
    counter.count.ops, counter.count.sync_ops     # 401, {}
    profiled_ops(lambda: step(batch))            # the same counts from the profiler: compiled steps too

A sync operator copies a device value to the host to decide something there: `aten._local_scalar_dense`
(`.item()`, `float(t)`, `int(t)`, `bool(t)`, `if t:`), `aten.item`, `aten.nonzero`, `masked_select`,
`is_nonzero`, `equal`, and boolean-mask indexing (`t[mask]`, `t[mask] = v`: the kernel finds the mask's
true positions, a shape made from device data). So is a blocking copy from a device to the host
(`aten._to_copy` or `aten.copy_` into CPU memory from another device: `.cpu()`, `.tolist()` of a device
tensor); a non-blocking one (into pinned memory, read later) is not. On a CPU they cost little; on a GPU
each one drains the launch queue and leaves the device idle until the host catches up, which is why a
step should have none.

Under a dispatch mode `torch.compile` falls back to eager, so a compiled step is counted with the
profiler (`profiled_ops`): the ATen calls not nested in another ATen call, which is what a dispatch mode
sees; the compiler's fused loops are not ATen calls. Compare sides counted the same way. (The profiler
names no devices: a device-to-host copy is a sync there only through its `_local_scalar_dense`.)

The op count does not depend on the model's width, so at a toy width the host's time per step measures
the dispatch overhead that a GPU step pays on top of its kernels.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

SYNC_OPS = frozenset({"_local_scalar_dense", "item", "nonzero", "masked_select", "is_nonzero", "equal"})
_INDEXING = frozenset({"index", "index_put", "index_put_", "_index_put_impl_"})
_COPIES = frozenset({"_to_copy", "copy_"})


@dataclass
class OpCount:
    ops: int = 0  # every ATen operator dispatched
    by_name: Counter = field(default_factory=Counter)  # "mm" -> calls
    sync_ops: Counter = field(default_factory=Counter)  # "_local_scalar_dense" -> calls that synced

    @property
    def syncs(self) -> int:
        return sum(self.sync_ops.values())

    def add(self, name: str, sync: bool) -> None:
        self.ops += 1
        self.by_name[name] += 1
        if sync:
            self.sync_ops[name] += 1


def is_sync(name: str, args: tuple = (), kwargs: dict | None = None) -> bool:
    """Whether ATen operator `name` (its overload packet's name, e.g. `index`) called with `args` and
    `kwargs` reads a device value back to the host."""
    if name in SYNC_OPS:
        return True
    if name in _INDEXING and len(args) > 1:
        return any(torch.is_tensor(i) and i.dtype in (torch.bool, torch.uint8) for i in args[1] if i is not None)
    if name in _COPIES:
        return _device_to_host(name, args, kwargs or {})
    return False


def _device_to_host(name: str, args: tuple, kwargs: dict) -> bool:
    """A copy into CPU memory from another device that the host waits for: any but a non-blocking one
    (`_to_copy` makes its CPU output pinned then; `copy_` needs a pinned destination for it)."""
    if name == "_to_copy":
        source, device = args[0], kwargs.get("device")
        to_host = device is not None and torch.device(device).type == "cpu"
        waits = not kwargs.get("non_blocking", False)
    else:
        destination, source = args[0], args[1]
        to_host = torch.is_tensor(destination) and destination.device.type == "cpu"
        waits = not (args[2] if len(args) > 2 else kwargs.get("non_blocking", False)) or not destination.is_pinned()
    return to_host and torch.is_tensor(source) and source.device.type != "cpu" and waits


class OpCounter(TorchDispatchMode):
    """Counts the ATen operators dispatched while it is active (`with OpCounter() as c:`; `c.count`)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = OpCount()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__ if func.namespace == "aten" else str(func)
        self.count.add(name, func.namespace == "aten" and is_sync(name, args, kwargs))
        return func(*args, **(kwargs or {}))


def count_ops(fn: Callable[[], Any]) -> OpCount:
    """The operators `fn()` dispatches (its result is dropped); eager code only (see `profiled_ops`)."""
    with OpCounter() as counter:
        fn()
    return counter.count


def profiled_ops(fn: Callable[[], Any]) -> OpCount:
    """The operators of one call of `fn()` from the profiler: the ATen calls not nested in another ATen
    call, what a dispatch mode sees, for compiled code as well. A kernel's own calls inside it (a CPU kernel
    reading a CPU number) are neither ops nor syncs, except `nonzero`: boolean-mask indexing calls it inside
    `index`, and its output's shape comes from device data."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    count = OpCount()
    for event in prof.events():
        if not event.name.startswith("aten::"):
            continue
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        name = event.name.removeprefix("aten::")
        if parent is None:
            count.add(name, name in SYNC_OPS)
        elif name == "nonzero":
            count.sync_ops[name] += 1
    return count

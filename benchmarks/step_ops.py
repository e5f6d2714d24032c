"""What one training step asks of the device: the ATen operators it dispatches, and how many of them make
the host wait for the device (a host-device synchronization).

    counts = count_ops(lambda: step(batch))
    counts.ops, counts.syncs, counts.sync_ops     # 812, 0, {}

Counted below autograd (a `TorchDispatchMode`), so the backward's operators are counted too, and each
compiled region counts as the kernels it runs, not the Python it came from. The sync operators are those
that copy a device value to the host to decide something there: `aten._local_scalar_dense` (`.item()`,
`float(t)`, `int(t)`, `bool(t)`, `if t:`), `aten.item`, and `aten.nonzero` (boolean-mask indexing, whose
output size the host must learn). On a CPU they cost little; on a GPU each one drains the launch queue
and leaves the device idle until the host catches up, which is why a step should have none.

The op count does not depend on the model's width, so at a toy width the host's time per step measures
the dispatch overhead that a GPU step pays on top of its kernels.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from torch.utils._python_dispatch import TorchDispatchMode

SYNC_OPS = ("aten._local_scalar_dense", "aten.item", "aten.nonzero")


@dataclass
class OpCount:
    ops: int = 0  # every ATen operator dispatched
    by_name: Counter = field(default_factory=Counter)  # "aten.mm" -> calls

    @property
    def sync_ops(self) -> dict[str, int]:
        return {name: n for name, n in self.by_name.items() if name in SYNC_OPS}

    @property
    def syncs(self) -> int:
        return sum(self.sync_ops.values())


class OpCounter(TorchDispatchMode):
    """Counts the ATen operators dispatched while it is active (`with OpCounter() as c:`; `c.count`)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = OpCount()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = f"aten.{func._schema.name.split('::', 1)[-1]}" if func.namespace == "aten" else str(func)
        self.count.ops += 1
        self.count.by_name[name] += 1
        return func(*args, **(kwargs or {}))


def count_ops(fn: Callable[[], Any]) -> OpCount:
    """The operators `fn()` dispatches (its result is dropped)."""
    with OpCounter() as counter:
        fn()
    return counter.count


"""What each cell and column of a table cost, from the `system/compute/*` metrics its runs logged
(ablations/run/costs.py): model FLOPs, device-seconds, peak memory and the device. A column's pretraining
stages count towards it once, shown apart from its fine-tuning runs (a stage that several columns share
counts towards each). Runs logged before these metrics count as unknown, and the rows say how many of them
there are."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ablations.results import FINISHED, CellRun
from ablations.tables.stats import TableData
from bioablate_core.hardware import COMPUTE_PREFIX

FLOPS, SECONDS, MEMORY, DEVICE = (f"{COMPUTE_PREFIX}{name}" for name in ("flops", "device_seconds",
                                                                         "peak_memory_bytes", "device"))


@dataclass
class Cost:
    """Summed FLOPs and device-seconds, the largest peak memory, over the runs that logged them."""

    flops: float = 0.0
    device_seconds: float = 0.0
    peak_memory_bytes: float = 0.0
    devices: set[str] = field(default_factory=set)
    counted: int = 0  # runs (or stages) with compute metrics
    total: int = 0  # runs (or stages) finished

    def add(self, compute: dict[str, Any]) -> None:
        self.total += 1
        if FLOPS not in compute:
            return
        self.counted += 1
        self.flops += float(compute[FLOPS])
        self.device_seconds += float(compute.get(SECONDS, 0.0))
        self.peak_memory_bytes = max(self.peak_memory_bytes, float(compute.get(MEMORY, 0.0)))
        if compute.get(DEVICE):
            self.devices.add(str(compute[DEVICE]))

    @property
    def known(self) -> bool:
        return self.counted > 0


@dataclass
class ColumnCost:
    finetune: Cost
    pretrain: Cost
    stages: list[str]

    @property
    def flops(self) -> float:
        return self.finetune.flops + self.pretrain.flops


def add_costs(data: TableData, runs: Sequence[CellRun],
              stages: dict[str, list[tuple[str, dict[str, Any]]]] | None = None) -> None:
    """Each cell's cost (`cell.cost`) and each column's (`data.costs`): its fine-tuning runs, and the
    pretraining stages (`stages[column]`: (stage name, its compute metrics)) its models were trained in."""
    stages = stages or {}
    done = [r for r in runs if r.status == FINISHED]
    for (row, column), cell in data.cells.items():
        cell.cost = Cost()
        for r in done:
            if (r.row, r.column) == (row, column):
                cell.cost.add(r.compute)
    for column in data.columns:
        finetune = Cost()
        for r in done:
            if r.column == column:
                finetune.add(r.compute)
        pretrain = Cost()
        for _, compute in stages.get(column, []):
            pretrain.add(compute)
        data.costs[column] = ColumnCost(finetune, pretrain, [name for name, _ in stages.get(column, [])])


def flops_text(flops: float) -> str:
    for prefix, scale in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if flops >= scale:
            return f"{flops / scale:.3g} {prefix}FLOP"
    return f"{flops:.3g} FLOP"


def memory_text(size: float) -> str:
    return f"{size / 2 ** 30:.2f} GiB" if size >= 2 ** 30 else f"{size / 2 ** 20:.0f} MiB"


def _text(cost: Cost) -> str:
    if not cost.total:
        return "none"
    if not cost.known:
        return "unknown (runs predate compute logging)"
    text = f"{flops_text(cost.flops)}, {cost.device_seconds / 3600:.3g} device-h"
    return text + (f" ({cost.counted}/{cost.total} runs logged it)" if cost.counted < cost.total else "")


def cost_rows(data: TableData) -> list[tuple[str, list[str]]]:
    """The rows a table shows under its scores with `table.cost` / `--cost`: one text per column."""
    costs = [data.costs[c] for c in data.columns]
    rows = [("compute: fine-tuning", [_text(c.finetune) for c in costs])]
    if any(c.stages for c in costs):
        rows.append(("compute: pretraining", [_text(c.pretrain) + (f" [{', '.join(c.stages)}]" if c.stages else "")
                                              for c in costs]))
    rows.append(("peak memory", [memory_text(max(c.finetune.peak_memory_bytes, c.pretrain.peak_memory_bytes))
                                 if c.finetune.known or c.pretrain.known else "unknown" for c in costs]))
    return rows


def cost_note(data: TableData) -> str:
    devices = sorted({d for c in data.costs.values() for d in (*c.finetune.devices, *c.pretrain.devices)})
    return ("Compute: model FLOPs (6 × the encoder's weights and attention per training token, a third of that per "
            "evaluation token, padding included: lightning_modules.compute) summed over a column's runs, "
            "device-seconds (wall time × devices) in device-hours, and the largest peak memory (GPU: "
            "torch.cuda.max_memory_allocated; CPU: the process's peak resident set); pretraining stages count "
            "towards every column whose model they trained, apart from its fine-tuning. Device: "
            + ("; ".join(devices) if devices else "not recorded") + ".")


def cost_record(data: TableData, row: str, column: str) -> dict[str, Any]:
    """The CSV's cost fields of a cell: its runs' sums, and its column's pretraining."""
    cell, col = data.cells.get((row, column)), data.costs.get(column)
    cost = getattr(cell, "cost", None) if cell is not None else None
    known = cost is not None and cost.known
    return {"flops": cost.flops if known else None, "device_seconds": cost.device_seconds if known else None,
            "peak_memory_bytes": cost.peak_memory_bytes if known else None,
            "pretrain_flops": col.pretrain.flops if col is not None and col.pretrain.known else None,
            "pretrain_device_seconds": col.pretrain.device_seconds if col is not None and col.pretrain.known else None}


COST_FIELDS = ("flops", "device_seconds", "peak_memory_bytes", "pretrain_flops", "pretrain_device_seconds")

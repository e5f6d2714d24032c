"""Dataset statistics in the units of the paper's Table 3 (mentions for NER, pairs for RE, ...)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from datamodules.instances import Instance, QAInstance, TaggingInstance
from datamodules.spec import SPLITS, DatasetSpec
from datamodules.tagging import get_scheme
from datamodules.task_types import TASK_TYPES


def count(spec: DatasetSpec, instances: list[Instance]) -> int:
    """How many units of `spec.count_unit` a split holds."""
    if spec.count_unit == "mentions":
        return sum(len(x.spans) for x in instances)
    if spec.count_unit == "PICO words":  # words inside at least one P, I or O span
        return sum(len({i for s in x.spans for i in range(s.start, s.end)}) for x in instances
                   if isinstance(x, TaggingInstance))
    if spec.count_unit == "questions" and instances and isinstance(instances[0], QAInstance):
        return len({x.question_id for x in instances})  # extractive QA: one instance per question x context
    return len(instances)


@dataclass
class SplitStats:
    dataset: str
    split: str
    unit: str
    ours: int
    paper: int | None
    instances: int
    merged: int | None = None  # gold mentions that tagging in `scheme` merges into a neighbour
    scheme: str | None = None

    @property
    def diff_percent(self) -> float | None:
        if not self.paper:
            return None
        return 100.0 * (self.ours - self.paper) / self.paper


def dataset_stats(spec: DatasetSpec, data_dir: Path | None, tagging: str | None = None) -> list[SplitStats]:
    """Counts per split; with `tagging` (a scheme's name), also the gold mentions that scheme loses."""
    splits = spec.read(data_dir)
    scheme = get_scheme(tagging) if tagging is not None and TASK_TYPES.of(spec.task_type).tagged else None
    rows = []
    for split in SPLITS:
        instances = splits.get(split, [])
        merged = None if scheme is None else sum(
            len(x.spans) - len(scheme.decode(scheme.encode(x.spans, len(x.tokens)))) for x in instances)
        rows.append(SplitStats(spec.name, split, spec.count_unit, count(spec, instances),
                               spec.paper_counts.get(split), len(instances), merged, tagging))
    return rows


def render(rows: list[SplitStats], notes: dict[str, str]) -> str:
    scheme = next((r.scheme for r in rows if r.merged is not None), None)
    width = max([13, *(len(r.dataset) for r in rows)])  # the longest name (bioelectra-factoid) fits
    header = f"{'dataset':<{width}} {'split':<5} {'unit':<11} {'ours':>8} {'paper':>8} {'diff':>8} {'instances':>9}"
    header += f" {scheme + ' merges':>9}" if scheme else ""
    lines = [header, "-" * len(header)]
    for r in rows:
        diff = "" if r.diff_percent is None else ("=" if r.ours == r.paper else f"{r.diff_percent:+.2f}%")
        paper = "" if r.paper is None else str(r.paper)
        line = f"{r.dataset:<{width}} {r.split:<5} {r.unit:<11} {r.ours:>8} {paper:>8} {diff:>8} {r.instances:>9}"
        if scheme:
            line += f" {'' if r.merged is None else r.merged:>9}"
        lines.append(line)
    noted = [f"  {name}: {text}" for name, text in notes.items() if text]
    if noted:
        lines += ["", "Differences from the paper (docs/data.md explains each):", *noted]
    return "\n".join(lines)

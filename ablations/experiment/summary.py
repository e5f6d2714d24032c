"""What `bioablate run` reports when it ends (ablations/experiment/runner.py): each planned run's outcome and
the invocation's summary lines."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ablations.results import BLOCKED, COMPUTED, FAILED, HELD, REUSED

OUTCOMES = (COMPUTED, REUSED, FAILED, BLOCKED, HELD)


@dataclass
class Outcome:
    kind: str  # pretrain | finetune
    name: str  # the stage name, or model/task/variant/seed
    status: str  # one of OUTCOMES
    run_id: Optional[str] = None
    fingerprint: Optional[str] = None
    error: Optional[str] = None
    seconds: float = 0.0
    worker: Optional[int] = None  # the process that computed it (its pid)


@dataclass
class RunSummary:
    experiment: str
    profile: str
    tracking_uri: str
    parent_run_id: Optional[str]
    kind: str = "finetune"
    outcomes: list[Outcome] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def ok(self) -> bool:
        return self.count(FAILED) == 0 and self.count(BLOCKED) == 0 and self.count(HELD) == 0

    @property
    def only_held(self) -> bool:
        """Nothing failed; what was not done is held by other live processes (`--no-wait`), or blocked
        behind a held stage: try again later."""
        return self.count(HELD) > 0 and self.count(FAILED) == 0

    def lines(self) -> list[str]:
        if self.kind != "finetune":
            return [f"{self.experiment} (kind {self.kind}): no runs; computed from the staged vocabularies "
                    "and datasets"]
        stages = sum(o.kind == "pretrain" for o in self.outcomes)
        counts = ", ".join(f"{self.count(status)} {status.lower()}" for status in OUTCOMES
                           if status != HELD or self.count(HELD))
        out = [f"{self.experiment} (profile {self.profile}): {stages} pretraining, "
               f"{len(self.outcomes) - stages} fine-tuning runs: {counts}"]
        for o in self.outcomes:
            if o.status in (FAILED, BLOCKED, HELD):
                out.append(f"  {o.status} {o.kind} {o.name}: {o.error}")
        return out

"""A recorded plan: each planned run's identity as it was last resolved with the data, so that `bioablate
table` finds an experiment's runs again where no data directory is at hand (a login node, a laptop with
the tracking store but not the datasets): the fingerprints that find runs hash the data's content.

Rendering an experiment's table with the data (`bioablate run`, `run --launcher slurm --wait`, `table`)
records its plan (`record_plan`) in <work_dir>/tables/<name>/plans/, one JSON file per experiment name,
profile and command-line overrides; `recorded_plan` reads it back as the `Identities` that `plan.resolve`
uses instead of computing them. Only identities are recorded: each run's status is read from the tracking
store as it is now, so a shared tracking server sees the same runs either way. A planned run whose config
differs from the recorded one (the experiment YAML changed since) is not found in the record: it shows as
not run, with the reason, until the table is rendered with the data again.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig

from ablations.config import DRAWING_KEYS, LOCATION_KEYS, flatten
from ablations.experiment.definition import Experiment
from ablations.experiment.plan import Identities, Plan, RunIdentity
from bioablate_core.errors import ConfigError
from bioablate_core.files import write_text_atomic
from bioablate_core.fingerprints import digest

FORMAT = 1  # the record's layout; a record of another layout is not read


def record_key(experiment: Experiment) -> dict[str, Any]:
    """What a record is kept under: the experiment, its profile and its command-line overrides."""
    return {"experiment": experiment.name, "profile": experiment.profile,
            "overrides": list(experiment.cli_overrides)}


def record_path(experiment: Experiment) -> Path:
    work_dir, _ = experiment.store()
    return work_dir / "tables" / experiment.name / "plans" / f"{experiment.invocation()}.json"


def config_digest(cfg: DictConfig) -> str:
    """A planned run's config, less where it goes and what it draws (DRAWING_KEYS): equal digests, equal runs
    (given the same data)."""
    items = {k: v for k, v in flatten(cfg).items()
             if k.split(".")[0] not in LOCATION_KEYS and k not in DRAWING_KEYS}
    return digest(items)


def record_plan(experiment: Experiment, plan: Plan) -> Path:
    """Write the identity of every planned run of `plan` that has a config (a BLOCKED one has neither yet)."""
    entries = []
    for planned in [*plan.stages.values(), *plan.cells]:
        if planned.config is None:
            continue
        identity = planned.identity
        entries.append({"kind": planned.kind, "name": planned.name, "config": config_digest(planned.config),
                        "experiment_name": identity.experiment_name if identity else None,
                        "fingerprint": identity.fingerprint if identity else None,
                        "model_dir": str(identity.model_dir) if identity and identity.model_dir else None,
                        "reason": None if identity else planned.reason})
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    record = {"format": FORMAT, **record_key(experiment), "recorded_at": now, "runs": entries}
    return write_text_atomic(record_path(experiment), json.dumps(record, indent=1) + "\n")


class RecordedPlan(Identities):
    """The identities of a recorded plan, for `plan.resolve` (module docstring)."""

    def __init__(self, path: Path, record: dict[str, Any]):
        self.path = path
        self.recorded_at: str = record["recorded_at"]
        self.runs = {(entry["kind"], entry["name"]): entry for entry in record["runs"]
                     if {"config", "experiment_name", "fingerprint", "model_dir", "reason"} <= entry.keys()}

    def of(self, kind: str, name: str, cfg: DictConfig) -> tuple[Optional[RunIdentity], Optional[str]]:
        entry = self.runs.get((kind, name))
        if entry is None or entry["config"] != config_digest(cfg):
            return None, (f"not in the plan recorded at {self.recorded_at} (the experiment changed since): "
                          "render the table with --data-dir")
        if entry["fingerprint"] is None:
            return None, entry["reason"]
        model_dir = Path(entry["model_dir"]) if entry["model_dir"] else None
        return RunIdentity(kind, entry["experiment_name"], entry["fingerprint"], model_dir), None


def recorded_plan(experiment: Experiment) -> RecordedPlan:
    """The plan recorded for this experiment, profile and overrides; a one-line ConfigError if there is none."""
    path, key = record_path(experiment), record_key(experiment)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("format") != FORMAT or {k: record.get(k) for k in key} != key:
            raise ValueError("another layout or experiment")
        return RecordedPlan(path, record)
    except FileNotFoundError:
        problem = "no plan of it was recorded"
    except (OSError, ValueError, KeyError, TypeError) as e:
        problem = f"its recorded plan {path} is unreadable ({e})"
    overrides = f" with overrides {' '.join(experiment.cli_overrides)}" if experiment.cli_overrides else ""
    raise ConfigError(f"experiment '{experiment.name}' (profile {experiment.profile}{overrides}): no data "
                      f"directory was given and {problem}; pass --data-dir DIR (or set BIOABLATE_DATA), or run "
                      "the experiment first (`bioablate run` records its plan)")

"""Which invocations of an experiment -- (profile, command-line overrides) -- the tracking store holds runs
of, found without loading the experiment under any profile: `bioablate table EXPERIMENT` with no
`--profile` renders the one there is (loading the YAML under its default profile first is what failed when
that profile's model was not installed), and the report notebook lists them.

Two sources, both keyed by the experiment's `name` (read from its YAML with no validation, `experiment_header`):

- the parent runs of `bioablate run` (ablations/experiment/runner.py: tags `kind=experiment`, `experiment`, `profile`,
  `cli_overrides`; older parents only have the `cli_overrides` param, space-joined), in any MLflow experiment;
- the plans recorded when a table was rendered with the data (record.py, <work-dir>/tables/<name>/plans/),
  counted only where the store has a run of one of the recorded identities (`run --launcher slurm` jobs have
  no parent run; a table rendered for a profile that never ran records a plan too, and is no invocation).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ablations.experiment.store import PARENT_KIND, Store
from bioablate_core.packaged import resolve_config
from bioablate_core.schema import load_yaml


@dataclass
class Invocation:
    """One way an experiment was run: its profile and command-line overrides, and what the store has of it."""

    profile: str
    overrides: tuple[str, ...]
    parent_runs: list[str] = field(default_factory=list)  # MLflow run ids of its `bioablate run` parents
    recorded: Optional[Path] = None  # its recorded plan, if the store has runs of it
    newest_ms: int = 0  # when it last ran (a parent's start) or was recorded

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        return self.profile, self.overrides

    def options(self) -> str:
        """The `bioablate table` options that pick it: `--profile micro finetune.lr=1e-4`."""
        return " ".join(["--profile", self.profile, *map(shlex.quote, self.overrides)])

    def describe(self) -> str:
        runs = len(self.parent_runs)
        where = (f"{runs} `bioablate run` invocation{'s' if runs != 1 else ''}" if runs
                 else f"runs found by its recorded plan {self.recorded}")
        return f"{self.options()} ({where})"


def experiment_header(ref: str | Path) -> tuple[Path, Optional[str], str]:
    """(the YAML's path, its `name`, its `kind`) read as written: no schema, no profile, nothing resolved
    (a broken file is reported by `load_experiment` later, as usual)."""
    path = resolve_config(ref, "experiment")
    raw = load_yaml(path)
    name, kind = raw.get("name"), raw.get("kind", "finetune")
    return path, (str(name) if isinstance(name, (str, int)) else None), str(kind)


def _store_exists(tracking_uri: str) -> bool:
    """False for a SQLite store whose file does not exist yet (nothing in it; not created by looking)."""
    if not tracking_uri.startswith("sqlite:"):
        return True
    return Path(tracking_uri.split(":///", 1)[-1]).is_file()


def parent_overrides(run) -> tuple[str, ...]:
    tagged = run.data.tags.get("cli_overrides")
    if tagged is not None:
        try:
            value = json.loads(tagged)
            if isinstance(value, list):
                return tuple(str(v) for v in value)
        except ValueError:
            pass
    return tuple(run.data.params.get("cli_overrides", "").split())


def _filter_value(value: str) -> str:
    return value.replace("'", "\\'")


def stored_invocations(tracking_uri: str, work_dir: Path, name: str) -> list[Invocation]:
    """The invocations of experiment `name` the store at `tracking_uri` has runs of, newest first."""
    if not _store_exists(tracking_uri):
        return []
    store = Store(tracking_uri)
    client = store.client
    found: dict[tuple[str, tuple[str, ...]], Invocation] = {}
    ids = [e.experiment_id for e in client.search_experiments()]
    if ids:
        runs = client.search_runs(ids, f"tags.kind = '{PARENT_KIND}' and tags.experiment = '{_filter_value(name)}'",
                                  order_by=["attributes.start_time DESC"], max_results=5000)
        for run in runs:
            profile = run.data.tags.get("profile")
            if not profile:
                continue
            invocation = found.setdefault((profile, parent_overrides(run)),
                                          Invocation(profile, parent_overrides(run)))
            invocation.parent_runs.append(run.info.run_id)
            invocation.newest_ms = max(invocation.newest_ms, run.info.start_time or 0)
    for path in sorted((work_dir / "tables" / name / "plans").glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            if record.get("experiment") != name or not isinstance(record.get("profile"), str):
                continue
            key = (record["profile"], tuple(str(o) for o in record.get("overrides") or []))
            if key in found:
                continue
            if any(store.find(entry["experiment_name"], entry["fingerprint"]) is not None
                   for entry in record.get("runs", []) if entry.get("fingerprint") and entry.get("experiment_name")):
                found[key] = Invocation(*key, recorded=path, newest_ms=int(path.stat().st_mtime * 1000))
        except (OSError, ValueError, TypeError, AttributeError, KeyError):
            continue  # an unreadable record is no evidence of runs
    return sorted(found.values(), key=lambda i: -i.newest_ms)


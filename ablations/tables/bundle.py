"""A table's evidence in one open file beside it: `bundle.jsonl`, JSON Lines that any reader takes
(`pandas.read_json(path, lines=True)`, `jq`), with everything the table's files are rendered from and nothing
that needs bioablate or a tracking store to read.

Each line is one record, named by its `record` field:
- `table` (first): the experiment, profile, layout (as the YAML and the runs' configs set it), the header
  lines, what the pretraining stages cost, and the grid's cells for a vocabulary table;
- `test_set`: the ids of the test units of one task, in order, shared by the runs scored on them;
- `cell`: one planned run of one cell (results.CellRun): status, value, floor and state, or why it is missing;
- `run`: one finished run: fingerprint, MLflow experiment, name, tags, params (its resolved config), final
  metrics, start and end times, the predicted-label histogram, and its test units as the statistics resample
  them: per unit the metric's counts where they add up (entity and relation F1, accuracy...), else its golds
  and predictions (Pearson, QA).

`read_bundle` gives back the `Bundle`; `bioablate table --from DIR` renders it with no store
(publish.render_bundle), and `bioablate import DIR` puts its finished runs into a store (bundle_import.py), where a
later `bioablate run` of the experiment reuses them by fingerprint.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Sequence

from ablations.results import FINISHED, CellRun, TableLayout
from ablations.tables.scored_units import ScoredUnits, unit_values, units_from
from bioablate_core.errors import ConfigError

BUNDLE = "bundle.jsonl"
FORMAT = 1  # the records' layout; a reader refuses a bundle of another
SKIPPED_TAGS = ("mlflow.", "bioablate.claim")  # MLflow's own bookkeeping and the live claim: not evidence


@dataclass
class RunRecord:
    """A finished run as the bundle keeps it."""

    run_id: str
    fingerprint: str
    mlflow_experiment: str
    run_name: str
    tags: dict[str, str]
    params: dict[str, str]
    metrics: dict[str, float]
    start_time: int | None
    end_time: int | None
    histogram: dict[str, int] = field(default_factory=dict)
    units: ScoredUnits | None = None


@dataclass
class Bundle:
    """What a table is rendered from (module docstring)."""

    kind: str  # "finetune" | "vocab"
    name: str
    profile: str
    header: list[str]
    layout: TableLayout | None = None
    cells: list[CellRun] = field(default_factory=list)
    runs: dict[str, RunRecord] = field(default_factory=dict)
    stage_costs: dict = field(default_factory=dict)
    grid: dict | None = None  # a vocabulary table's render.Grid fields, less its figure

    def units(self) -> dict[str, ScoredUnits]:
        return {run_id: r.units for run_id, r in self.runs.items() if r.units is not None}


def run_record(run: Any, experiment_name: str, units: ScoredUnits | None) -> RunRecord:
    """A stored MLflow run as a bundle record."""
    tags = {k: v for k, v in run.data.tags.items() if not k.startswith(SKIPPED_TAGS)}
    histogram = json.loads(run.data.tags.get("test_prediction_histogram", "{}"))
    return RunRecord(run.info.run_id, run.data.tags.get("fingerprint", ""), experiment_name, run.info.run_name or "",
                     dict(sorted(tags.items())), dict(sorted(run.data.params.items())),
                     dict(sorted(run.data.metrics.items())), run.info.start_time, run.info.end_time, histogram, units)


def _layout_from(value: dict[str, Any]) -> TableLayout:
    known = {f.name: f for f in fields(TableLayout)}
    return TableLayout(**{k: tuple(v) if isinstance(v, list) else v for k, v in value.items() if k in known})


def write_bundle(path: Path, bundle: Bundle) -> Path:
    """Write `bundle` to `path` (the table's folder / BUNDLE): the same evidence gives the same bytes."""
    lines = [{"record": "table", "format": FORMAT, "kind": bundle.kind, "name": bundle.name,
              "profile": bundle.profile, "header": bundle.header,
              "layout": None if bundle.layout is None else asdict(bundle.layout),
              "stage_costs": bundle.stage_costs, "grid": bundle.grid}]
    test_sets: dict[str, str] = {}  # the ids' text -> its key
    runs = []
    for record in bundle.runs.values():
        entry = {k: v for k, v in asdict(record).items() if k != "units"}
        if record.units is not None:
            u = record.units
            ids = json.dumps([x.id for x in u.units])
            if ids not in test_sets:
                test_sets[ids] = key = f"{len(test_sets) + 1}"
                lines.append({"record": "test_set", "key": key, "task": record.tags.get("task", ""),
                              "metric": u.metric, "metric_args": u.metric_args, "unit_name": u.unit_name,
                              "ids": json.loads(ids)})
            entry["units"] = {"test_set": test_sets[ids], **unit_values(u)}
        runs.append({"record": "run", **entry})
    lines += [{"record": "cell", **asdict(c)} for c in bundle.cells]
    lines += runs
    # keys in the order they were given (a vocabulary table's columns are its records' key order); the store's
    # params, tags and metrics sorted by `run_record`, so the same evidence is the same bytes
    path.write_text("".join(json.dumps(line, ensure_ascii=False, default=list) + "\n"
                            for line in lines), encoding="utf-8")
    return path


def read_bundle(folder: Path) -> Bundle:
    """The bundle in `folder`; a ConfigError naming the file where there is none or it is not one."""
    path = Path(folder) / BUNDLE
    if not path.is_file():
        raise ConfigError(f"{path}: no table bundle there (`bioablate table` writes one beside every table it "
                          "renders); pass the folder of a rendered table")
    records: list[dict[str, Any]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}:{number}: not a JSON line ({e.msg}); the bundle is damaged: render it "
                              "again from its store") from None
    head = records[0] if records else {}
    if head.get("record") != "table" or head.get("format") != FORMAT:
        raise ConfigError(f"{path}:1: not a table bundle of format {FORMAT}; render it again with this version")
    test_sets = {r["key"]: r for r in records if r["record"] == "test_set"}
    bundle = Bundle(head["kind"], head["name"], head["profile"], head["header"],
                    None if head["layout"] is None else _layout_from(head["layout"]),
                    stage_costs=head["stage_costs"], grid=head["grid"])
    cell_fields = {f.name for f in fields(CellRun)}
    for r in records:
        if r["record"] == "cell":
            bundle.cells.append(CellRun(**{k: v for k, v in r.items() if k in cell_fields}))
        elif r["record"] == "run":
            units = r.pop("units", None)
            known = {f.name for f in fields(RunRecord)}
            record = RunRecord(**{k: v for k, v in r.items() if k in known})
            record.units = None if units is None else units_from(units, test_sets[units["test_set"]])
            bundle.runs[record.run_id] = record
    return bundle


def finished_run_ids(cells: Sequence[CellRun]) -> list[str]:
    return list(dict.fromkeys(c.run_id for c in cells if c.status == FINISHED and c.run_id))

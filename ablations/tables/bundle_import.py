"""`bioablate import DIR`: a table bundle's finished runs put into the current store (bundle.py), so that a
later `bioablate run` of the same experiment finds them by fingerprint, reuses them and computes only the rest,
on any machine. An imported run holds what the bundle holds: its tags (tag `imported_from` added), params,
final metrics, start and end times, and its test units as the artifact `test_units.json`, which the table's
statistics read where a run has no `test_predictions.jsonl`. It holds no model and no checkpoint: `bioablate
export` needs the run itself. A run whose fingerprint already has a FINISHED run in the store is left as it is.
Pretraining stages are not in a bundle: an experiment that pretrains computes its stages again, and its
fine-tuning runs then match the bundle's only where the stages' models come out the same."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ablations.tables.bundle import read_bundle
from ablations.tables.scored_units import UNITS, units_file


@dataclass(frozen=True)
class Imported:
    table: str  # the bundle's experiment
    imported: int  # runs written to the store
    present: int  # runs whose fingerprint the store had FINISHED already


def import_bundle(folder: Path, tracking_uri: str, artifact_root: Path | None = None) -> Imported:
    """Write the finished runs of the bundle in `folder` into the store at `tracking_uri`."""
    from mlflow.entities import Metric, Param, RunStatus

    from ablations.run.tracking import PARAMS_PER_BATCH, Tracker

    bundle = read_bundle(folder)
    trackers: dict[str, Tracker] = {}
    imported = present = 0
    for record in bundle.runs.values():
        if record.mlflow_experiment not in trackers:
            trackers[record.mlflow_experiment] = Tracker(tracking_uri, record.mlflow_experiment, artifact_root)
        tracker = trackers[record.mlflow_experiment]
        found = tracker.find(record.fingerprint)
        if found is not None and found.info.status == RunStatus.to_string(RunStatus.FINISHED):
            present += 1
            continue
        tags = {**record.tags, "imported_from": f"bundle of {bundle.name} ({bundle.profile})"}
        # created with the bundle's start time: a table's wall time reads the runs' start and end times
        run_id = tracker.client.create_run(tracker.experiment_id, start_time=record.start_time,
                                           run_name=record.run_name, tags=tags).info.run_id
        params = [Param(k, v) for k, v in record.params.items()]
        for start in range(0, len(params), PARAMS_PER_BATCH):
            tracker.client.log_batch(run_id, params=params[start:start + PARAMS_PER_BATCH])
        end = record.end_time or record.start_time or 0
        tracker.client.log_batch(run_id, metrics=[Metric(k, float(v), end, 0) for k, v in record.metrics.items()])
        if record.units is not None:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / UNITS
                path.write_text(json.dumps(units_file(record.units)), encoding="utf-8")
                tracker.client.log_artifact(run_id, str(path))
        tracker.client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED), end_time=record.end_time)
        imported += 1
    return Imported(bundle.name, imported, present)

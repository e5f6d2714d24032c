"""What the tracking store holds: runs found by (MLflow experiment, fingerprint), and a stored run's
status in the terms of ablations/results.py."""

from __future__ import annotations

from typing import Any, Optional

from ablations import results
from bioablate_core.console import one_line

PARENT_KIND = "experiment"  # `kind` tag of the parent run of a `bioablate run` invocation
REASON_LIMIT = 300  # characters of a stored error shown as a run's reason (tables, plan lines)


class Store:
    """The runs of a tracking store by (MLflow experiment, fingerprint), each looked up once and remembered.

    One query per planned run, not one read of the whole MLflow experiment: a store grows with every table
    and sweep it serves (thousands of runs, each read with all its metrics, params and tags), while a plan
    asks for its own few dozen or hundred. The newest run of a fingerprint wins, as in `Tracker.find`."""

    def __init__(self, tracking_uri: str):
        from mlflow.tracking import MlflowClient

        from ablations.run.tracking import SignalSafeClient, check_tracking_uri

        check_tracking_uri(tracking_uri)
        self.tracking_uri = tracking_uri
        self.client = SignalSafeClient(MlflowClient(tracking_uri))  # `bioablate run` reads while a signal may come
        self._experiment_ids: dict[str, Optional[str]] = {}
        self._runs: dict[tuple[str, str], Any] = {}

    def find(self, experiment_name: str, fingerprint: str) -> Any | None:
        from ablations.run.tracking import newest_run

        key = (experiment_name, fingerprint)
        if key not in self._runs:
            if experiment_name not in self._experiment_ids:
                experiment = self.client.get_experiment_by_name(experiment_name)
                self._experiment_ids[experiment_name] = None if experiment is None else experiment.experiment_id
            experiment_id = self._experiment_ids[experiment_name]
            self._runs[key] = None if experiment_id is None else newest_run(self.client, experiment_id, fingerprint)
        return self._runs[key]

    def forget(self, experiment_name: str) -> None:
        """Read that experiment again on the next `find` (after runs were added)."""
        self._experiment_ids.pop(experiment_name, None)
        self._runs = {key: run for key, run in self._runs.items() if key[0] != experiment_name}


def run_status(run: Any | None) -> tuple[str, Optional[str]]:
    """A stored run's results status and the reason it is not finished."""
    if run is None:
        return results.NOT_RUN, "never started: run the experiment"
    status = run.info.status  # MLflow's RunStatus name
    if status == "FINISHED":
        return results.FINISHED, None
    if status == "FAILED":
        return results.FAILED, one_line(run.data.tags.get("error", "failed (no error recorded)"), REASON_LIMIT)
    if status == "KILLED":
        return results.RUNNING, f"stopped ({run.data.tags.get('stopped', 'killed')}): rerun the experiment"
    return results.RUNNING, "started and not finished (still running, or killed: rerun the experiment)"


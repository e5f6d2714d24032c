"""What the tracking store holds: runs found by (MLflow experiment, fingerprint), and a stored run's
status in the terms of ablations/results.py."""

from __future__ import annotations

from typing import Any, Optional

from ablations import results
from bioablate_core.console import one_line

PARENT_KIND = "experiment"  # `kind` tag of the parent run of a `bioablate run` invocation
REASON_LIMIT = 300  # characters of a stored error shown as a run's reason (tables, plan lines)


class Store:
    """The runs of a tracking store by (MLflow experiment, fingerprint), read in bulk: one query per
    MLflow experiment rather than one per planned run. The newest run of a fingerprint wins, as in
    `Tracker.find`."""

    def __init__(self, tracking_uri: str):
        from mlflow.tracking import MlflowClient

        from ablations.run.tracking import SignalSafeClient, check_tracking_uri

        check_tracking_uri(tracking_uri)
        self.tracking_uri = tracking_uri
        self.client = SignalSafeClient(MlflowClient(tracking_uri))  # `bioablate run` reads while a signal may come
        self._runs: dict[str, dict[str, Any]] = {}

    def runs(self, experiment_name: str) -> dict[str, Any]:
        if experiment_name not in self._runs:
            by_fp: dict[str, Any] = {}
            experiment = self.client.get_experiment_by_name(experiment_name)
            if experiment is not None:
                token = None
                while True:
                    page = self.client.search_runs([experiment.experiment_id], "tags.fingerprint != ''",
                                                   order_by=["attributes.start_time DESC"], max_results=1000,
                                                   page_token=token)
                    for run in page:
                        by_fp.setdefault(run.data.tags["fingerprint"], run)
                    token = page.token
                    if not token:
                        break
            self._runs[experiment_name] = by_fp
        return self._runs[experiment_name]

    def find(self, experiment_name: str, fingerprint: str) -> Any | None:
        return self.runs(experiment_name).get(fingerprint)

    def forget(self, experiment_name: str) -> None:
        """Read that experiment again on the next `find` (after runs were added)."""
        self._runs.pop(experiment_name, None)


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


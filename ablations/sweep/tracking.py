"""MLflow for a sweep: one parent run per study, one child run per trial (per seed), created explicitly.

The parent is found again by study and storage (a rerun, another worker) rather than created twice; the
children are the trials' ordinary fine-tuning runs, tagged with the parent and the trial.
"""

from __future__ import annotations

import json
import time
from typing import Any, Mapping

import optuna
from mlflow.entities import Metric, Param, RunStatus, RunTag
from omegaconf import DictConfig
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.trial import FrozenTrial, TrialState

from ablations.places import resolve_tracking_uri, resolve_work_dir
from ablations.run.tracking import Tracker
from ablations.sweep.spec import SweepSpec
from ablations.sweep.storage import quiet_experimental
from bioablate_core.databases import redact

RUN_IDS_ATTR = "mlflow_run_ids"  # trial user attr: the MLflow runs of the trial, one per seed


def best_trial(study: optuna.Study) -> FrozenTrial | None:
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        return None
    pick = max if study.direction == optuna.study.StudyDirection.MAXIMIZE else min
    return pick(complete, key=lambda t: t.value)


class SweepTracking:
    """The study's parent run (found again by study and storage, or created) and its children."""

    def __init__(self, spec: SweepSpec, base: DictConfig, storage_url: str):
        work_dir = resolve_work_dir(base)
        self.spec = spec
        self.tracking_uri = resolve_tracking_uri(base, work_dir)
        self.tracker = Tracker(self.tracking_uri, spec.experiment, artifact_root=work_dir / "mlartifacts",
                               kind="finetune")  # the trials' fine-tuning runs go there too
        self.client = self.tracker.client
        self.storage = redact(storage_url)
        self.parent_id = ""

    def open_parent(self) -> str:
        """Call under the claim lock: workers starting together must find one parent, not create two."""
        query = (f"tags.kind = 'sweep' and tags.`sweep.study` = '{self.spec.study}' "
                 f"and tags.`sweep.storage` = '{self.storage}'")
        found = self.client.search_runs([self.tracker.experiment_id], query, max_results=1)
        if found:
            self.parent_id = found[0].info.run_id
            self.client.update_run(self.parent_id, status="RUNNING")
            return self.parent_id
        spec = self.spec
        tags = {"kind": "sweep", "sweep.study": spec.study, "sweep.storage": self.storage,
                "sweep.direction": spec.direction, "sweep.metric": spec.metric, "task": spec.task,
                "profile": spec.profile}
        params = {"n_trials": spec.n_trials, "seeds": list(spec.seeds), "sampler": json.dumps(spec.sampler),
                  "pruner": json.dumps(spec.pruner), "overrides": list(spec.overrides),
                  **{f"space.{d.key}": json.dumps({k: v for k, v in d.__dict__.items() if k != "key"})
                     for d in spec.space}}
        self.parent_id = self.tracker.create(f"sweep-{spec.study}", tags, params)
        return self.parent_id

    def trial_tags(self, trial: optuna.Trial, seed: int) -> dict[str, str]:
        return {"mlflow.parentRunId": self.parent_id, "sweep.study": self.spec.study,
                "sweep.trial": str(trial.number), "sweep.seed": str(seed)}

    def reuse_child(self, trial: optuna.Trial, seed: int, params: Mapping[str, Any], reused_id: str) -> str:
        """An identical config already finished (in another study, or an earlier trial of this one):
        run_finetune reused its result, and this trial still gets a child run of its own pointing to it."""
        reused = self.client.get_run(reused_id)
        run = self.client.create_run(self.tracker.experiment_id, run_name=f"trial-{trial.number}-s{seed}",
                                     tags={**self.trial_tags(trial, seed), "sweep.reused_run_id": reused_id})
        metrics = [Metric(k, v, int(time.time() * 1000), 0) for k, v in reused.data.metrics.items()
                   if k.startswith(("best_dev/", "test/"))]
        self.client.log_batch(run.info.run_id, metrics=metrics,
                              params=[Param(k, str(v)) for k, v in params.items()])
        self.client.set_terminated(run.info.run_id, RunStatus.to_string(RunStatus.FINISHED))
        return run.info.run_id

    def after_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """Optuna callback: the trial's final state and value on its child runs (a run resumed from an
        earlier, killed trial is re-parented to this one), and the best value so far on the parent."""
        for run_id in trial.user_attrs.get(RUN_IDS_ATTR, []):
            tags = [RunTag("mlflow.parentRunId", self.parent_id), RunTag("sweep.study", self.spec.study),
                    RunTag("sweep.trial", str(trial.number)), RunTag("sweep.trial_state", trial.state.name)]
            with quiet_experimental():
                retried = RetryHeartbeatStaleTrialCallback.retried_trial_number(trial)
            if retried is not None:
                tags.append(RunTag("sweep.retried_trial", str(retried)))
            metrics = ([Metric("sweep.value", float(trial.value), int(time.time() * 1000), trial.number)]
                       if trial.value is not None else [])
            self.client.log_batch(run_id, metrics=metrics, tags=tags)
        self.log_best(study)

    def log_best(self, study: optuna.Study) -> None:
        best = best_trial(study)
        if best is None:
            return
        self.client.log_batch(self.parent_id, metrics=[
            Metric("sweep.best_value", float(best.value), int(time.time() * 1000), best.number)], tags=[
            RunTag("sweep.best_trial", str(best.number)), RunTag("sweep.best_params", json.dumps(best.params))])

    def close_parent(self, study: optuna.Study, complete: bool, interrupted: bool) -> None:
        counts = {state.name.lower(): len(study.get_trials(deepcopy=False, states=(state,)))
                  for state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)}
        self.client.log_batch(self.parent_id, metrics=[
            Metric(f"sweep.n_{name}", float(n), int(time.time() * 1000), 0) for name, n in counts.items()])
        self.log_best(study)
        status = RunStatus.FINISHED if complete else RunStatus.KILLED if interrupted else RunStatus.FAILED
        self.client.set_terminated(self.parent_id, RunStatus.to_string(status))

"""Experiments: one YAML per paper table (experiments/*.yaml), what they plan, and what the tracking
store holds for them.

An experiment names the models it compares (existing ones, or pretraining stages, possibly continuing
from one another), the tasks, the fine-tuning variants to `vary`, the seeds and the table layout. It
expands into pretraining stages and fine-tuning cells (model x task x variant x seed), each identified by
the fingerprint `bioablate pretrain` / `bioablate finetune` would give it, so whatever is FINISHED in the
store is found again. The full annotated spec is in docs/experiments.md.

- `spec`: the YAML schema and `load_experiment`, over `values` (values per profile), `model_entries` (the
  models section), `layout` (the table section) and `checks` (the experiment checked whole before anything
  runs);
- `definition`: the loaded `Experiment`, its stages and `PlannedCell`s, and the config of each run;
- `store`: the tracking store read in bulk (`Store`, `run_status`);
- `plan`: each stage and cell resolved against the store into a `PlannedRun` (config, identity, status,
  reason), shared by the runner (ablations/experiment/runner.py), `plan_lines`, `collect` and the tables;
- `record`: the plan's identities recorded when a table is rendered, for rendering it again without the data;
- `invocations`: which (profile, command-line overrides) of an experiment the store has runs of, read
  without loading it (`bioablate table` with no --profile).

    experiment = load_experiment("experiments/table13_tagging.yaml", profile="micro")
    runs = collect(experiment)              # list[results.CellRun], nothing is run
"""

from ablations.experiment.definition import PRETRAIN_EXPERIMENT, Axis, Experiment, ModelDef, PlannedCell, VocabDef
from ablations.experiment.invocations import Invocation, experiment_header, stored_invocations
from ablations.experiment.plan import (
                                             FINETUNE,
                                             PRETRAIN,
                                             Identities,
                                             Plan,
                                             PlannedRun,
                                             RunIdentity,
                                             collect,
                                             plan_lines,
                                             resolve,
                                             resolve_cell,
                                             resolve_stage,
                                             stage_states,
)
from ablations.experiment.record import RecordedPlan, record_plan, recorded_plan
from ablations.experiment.spec import experiment_files, load_experiment
from ablations.experiment.store import PARENT_KIND, Store, run_status

__all__ = ["FINETUNE", "PARENT_KIND", "PRETRAIN", "PRETRAIN_EXPERIMENT", "Axis", "Experiment", "Identities",
           "Invocation", "ModelDef", "Plan", "PlannedCell", "PlannedRun", "RecordedPlan", "RunIdentity", "Store",
           "VocabDef", "collect", "experiment_files", "experiment_header", "load_experiment", "plan_lines",
           "record_plan", "recorded_plan", "resolve", "resolve_cell", "resolve_stage", "run_status", "stage_states",
           "stored_invocations"]

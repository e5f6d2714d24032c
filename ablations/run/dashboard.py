"""What a run puts into MLflow for the people browsing it, beyond its params and metric points.

- The experiment (`describe_experiment`, once per experiment, never over a user's own): a description (the
  experiment tag `mlflow.note.content`, shown on its page) saying what its runs are and where their numbers
  are, and a saved view of the runs list named `bioablate` whose columns are the runs' key metrics and tags
  (the experiment tag `mlflow.sharedViewState.bioablate`: MLflow's saved views; pick it in the runs page's
  views menu, or open `runs_url`): the runs of its kind alone (not the parent runs of experiments and
  sweeps, under which MLflow would list them collapsed), fine-tuning runs grouped by task and profile.
- The datasets a run read, as MLflow dataset inputs (`log_datasets`): one per split, named
  `<dataset>/<split>`, its digest a hash of the data's fingerprint and the examples the run used (a micro
  run's 32 training examples are another dataset than the whole split), the number of examples in its
  profile, the folder it came from as its source.
- The details of its scores (`write_details`): `metrics/details.json` (every key of every dev evaluation,
  the best one and the test scores: the counts tp / fp / fn / support... are only here, see
  `datamodules.metrics.summary_keys`) and, where the metric has per-class keys, `metrics/test_per_class.csv`
  (a table in MLflow's artifact view).
- Its name (`run_name`): task, varied choices, model, profile, seed.
- Its description (`curves_note`): the curves figure, at the top of its page.
- Where to see it (`browse_lines`): the run's page, as a URL where the store is a server, else as the
  `bioablate ui` command to start plus the page's path.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from mlflow.entities import Dataset, DatasetInput, InputTag
from mlflow.exceptions import MlflowException

from bioablate_core.databases import hide_passwords

log = logging.getLogger("bioablate")

NOTE_TAG = "mlflow.note.content"  # an experiment's (or run's) description in MLflow's UI
VIEW_NAME = "bioablate"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_NAME}"  # MLflow 3's saved views of an experiment's runs list
UI_ADDRESS = "http://127.0.0.1:5000"  # where `bioablate ui` serves by default
CONTEXT = {"train": "training", "dev": "validation", "test": "test"}  # mlflow.data.context per split

NOTES = {
    "finetune": (
        "Fine-tuning runs of bioablate: one per task, model, variant and seed (tags task, model, seed; runs "
        "of `bioablate run EXPERIMENT` are tagged experiment=EXPERIMENT and grouped under its parent run).\n\n"
        "Key metrics: test/score (the task's BLURB metric on the test split, with the weights of the best "
        "dev epoch, or of the last epoch where the dataset has no dev split: tag epoch_selection) and "
        "best_dev/score; per-class scores as test/f1_<class>. Curves: train/loss (every step), "
        "train/loss_epoch (each epoch's mean) and dev/score, dev/precision, dev/recall (each epoch). Counts "
        "(tp, fp, fn, support) and every dev evaluation: artifact metrics/details.json; figures (none where the "
        "config says figures: false, as the micro profile does): "
        "figures/curves.png, figures/confusion_matrix.png (classification tasks); predictions: "
        "test_predictions.jsonl.\n\n"
        f"The runs list with these columns: the views menu, view '{VIEW_NAME}'."),
    "pretrain": (
        "Pretraining runs of bioablate: one per corpus, vocabulary, objective, masking and seed (tags "
        "corpus, vocab, objective, masking, seed); each exports a Hugging Face model folder (tag model_dir) "
        "for `bioablate finetune --model`.\n\n"
        "Curves: train/loss and the objective's parts (train/mlm_loss, ...) at every step; figure: "
        "figures/curves.png.\n\n"
        f"The runs list with these columns: the views menu, view '{VIEW_NAME}'."),
}
COLUMNS = {
    "finetune": [("tags", "task"), ("tags", "model"), ("tags", "seed"), ("tags", "experiment"),
                 ("metrics", "test/score"), ("metrics", "best_dev/score"), ("metrics", "test/precision"),
                 ("metrics", "test/recall"), ("metrics", "train/loss_epoch")],
    "pretrain": [("tags", "corpus"), ("tags", "vocab"), ("tags", "objective"), ("tags", "masking"),
                 ("tags", "seed"), ("metrics", "train/loss"), ("tags", "model_dir")],
}

# by task and profile: a group's mean never averages a `micro` run (plumbing: numbers that mean nothing)
# with a `mini` or `base` one
GROUP_BY = {"finetune": {"aggregateFunction": "average",
                         "groupByKeys": [{"mode": "tag", "groupByData": "task"},
                                         {"mode": "tag", "groupByData": "profile"}]}}


def saved_view(kind: str, now_ms: int | None = None) -> str:
    """The `bioablate` saved view of a `kind` experiment's runs list, as MLflow stores one: an envelope
    (name, times) around the page's state, whose columns are `type.\\`name\\`` ids; the `kind` runs
    alone, newest first, fine-tuning runs grouped by task and profile."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    state = {"selectedColumns": [f"{group}.`{name}`" for group, name in COLUMNS[kind]],
             "orderByKey": "attributes.start_time", "orderByAsc": False,
             # the runs themselves, not the parent runs of experiments and sweeps they are nested under
             # (MLflow lists those collapsed, their runs hidden), grouped by task and profile (each group's
             # mean on top)
             "searchFilter": f"tags.kind = '{kind}'", "groupBy": GROUP_BY.get(kind)}
    return json.dumps({"name": VIEW_NAME, "createdAt": now_ms, "updatedAt": now_ms, "state": json.dumps(state)})


def describe_experiment(client: Any, experiment: Any, kind: str | None) -> None:
    """Give a `kind` ('finetune', 'pretrain') experiment its description and saved view where it has none
    (a description the user wrote, or a view saved over ours, is kept)."""
    if kind not in NOTES:
        return
    tags = experiment.tags or {}
    for key, value in ((NOTE_TAG, lambda: NOTES[kind]), (VIEW_TAG, lambda: saved_view(kind))):
        if key not in tags:
            try:
                client.set_experiment_tag(experiment.experiment_id, key, value())
            except MlflowException:  # another job wrote it at the same moment (a unique constraint): theirs
                log.debug("experiment tag %s of experiment %s written elsewhere", key, experiment.experiment_id)


# ---- where to see a run


def run_path(experiment_id: str, run_id: str) -> str:
    """A run's page in MLflow's UI, below the server's address."""
    return f"#/experiments/{experiment_id}/runs/{run_id}"


VARIANT_TAG = "variant"  # an experiment's run: its vary axes' labels, joined by '-' (ablations/experiment/runner.py)
MODEL_KEY_TAG = "model_key"  # an experiment's run, where it fine-tunes several models: the model's name there


def run_name(cfg: Any, spec: Any, tags: Mapping[str, str]) -> str:
    """The MLflow run's name: task, the experiment's varied choices, model, profile and seed (e.g.
    `gad-linear-general-minilm-mini-s1`), so an experiment's runs differ in name as in what they ran, and
    a `micro` run is never taken for a `mini` one."""
    model = tags.get(MODEL_KEY_TAG) or cfg.model.name_or_path.rstrip("/").rsplit("/", 1)[-1]
    parts = [spec.name, tags.get(VARIANT_TAG), model, cfg.profile, f"s{cfg.seed}"]
    return "-".join(part for part in parts if part)


def curves_note(run_id: str, artifact: str = "figures/curves.png") -> str:
    """A run's description (the run tag `mlflow.note.content`), which MLflow's run page shows first: the
    run's curves figure, read from the server that shows the page (its `get-artifact` route, a path
    relative to the page). Its Model metrics tab opens on the `best_dev/` section's one-value bars (sections
    sorted by name), with the dev curves 1,000 pixels and train/loss 2,240 pixels down."""
    return (f"![training loss and dev score per epoch](get-artifact?path={artifact}&run_uuid={run_id})\n\n"
            f"Curves: `{artifact}` under Artifacts; every point in the Model metrics tab.")


def runs_url(address: str, experiment_id: str) -> str:
    """An experiment's runs list with the `bioablate` view's columns."""
    return f"{address.rstrip('/')}/#/experiments/{experiment_id}/runs?viewStateShareKey={VIEW_NAME}"


def browse_lines(tracking_uri: str, experiment_id: str, run_id: str, work_dir: Path | None) -> list[str]:
    """The lines a command prints about where its run is: the run's page where the store is a server
    (`bioablate server`, an MLflow server), else `bioablate ui` for the store and the page's address."""
    shown = hide_passwords(tracking_uri)  # a password stays with the user (docs/tracking.md, 'Credentials')
    if tracking_uri.startswith(("http://", "https://")):
        return [f"  MLflow run: {shown.rstrip('/')}/{run_path(experiment_id, run_id)}"]
    default = work_dir is not None and tracking_uri == f"sqlite:///{work_dir / 'mlruns.db'}"
    store = f"--work-dir {work_dir}" if default else f"--tracking-uri {shown}"
    return [f"  MLflow: {shown}",
            f"  browse: bioablate ui {store}  then open {UI_ADDRESS}/{run_path(experiment_id, run_id)}"]


# ---- datasets


def split_digest(data_fingerprint: str, split: str, example_ids: Iterable[str]) -> str:
    """The digest of the examples a run used from one split of a dataset (its content fingerprint, the
    split and the examples' ids, in order)."""
    digest = hashlib.sha256(f"{data_fingerprint}\n{split}\n".encode())
    for example_id in example_ids:
        digest.update(f"{example_id}\n".encode())
    return digest.hexdigest()[:16]


def log_datasets(client: Any, run_id: str, name: str, source: str, data_fingerprint: str,
                 splits: Mapping[str, Sequence[Any]]) -> None:
    """The splits a run read (`splits`: split -> the examples it used, each with an `id`) as its MLflow
    dataset inputs, in one store write; `source`: where they lie, as `shown_place` gives it."""
    inputs = []
    for split, examples in splits.items():
        dataset = Dataset(name=f"{name}/{split}",
                          digest=split_digest(data_fingerprint, split, (str(x.id) for x in examples)),
                          source_type="local", source=json.dumps({"uri": source}),
                          profile=json.dumps({"num_rows": len(examples), "data_fingerprint": data_fingerprint}))
        inputs.append(DatasetInput(dataset, [InputTag("mlflow.data.context", CONTEXT.get(split, split))]))
    _log_inputs(client, run_id, inputs)


def log_corpus(client: Any, run_id: str, name: str, source: str, corpus_fingerprint: str, sequences: int) -> None:
    """A pretraining run's corpus (its shards; `source` as `shown_place` gives it) as its MLflow dataset input."""
    dataset = Dataset(name=f"{name}/pretraining", digest=corpus_fingerprint[:16], source_type="local",
                      source=json.dumps({"uri": source}),
                      profile=json.dumps({"num_rows": sequences, "data_fingerprint": corpus_fingerprint}))
    _log_inputs(client, run_id, [DatasetInput(dataset, [InputTag("mlflow.data.context", "training")])])


def _log_inputs(client: Any, run_id: str, inputs: list[DatasetInput], attempts: int = 3) -> None:
    """MLflow's SQL store adds a dataset it has not seen (experiment, name, digest) with a check, then an
    insert: two runs of the same examples starting at once (seeds of one experiment in parallel, jobs on
    a cluster) can both insert it, and the second write fails whole (a unique constraint). Written again,
    it finds the dataset and links it. Still failing: a warning, never a failed run (the inputs are what
    the runs list shows, not what the run computes)."""
    for attempt in range(attempts):
        try:
            client.log_inputs(run_id, datasets=inputs)
            return
        except MlflowException as error:
            if attempt == attempts - 1:
                log.warning("could not log the dataset inputs of MLflow run %s (%s)", run_id,
                            " ".join(str(error).split())[:200])
            time.sleep(0.2 * (attempt + 1))


# ---- score details


def _per_class(metrics: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """`f1_<class>`, `precision_<class>`, `recall_<class>`, `support_<class>` keys, by class."""
    rows: dict[str, dict[str, float]] = {}
    for key, value in metrics.items():
        kind, _, label = key.partition("_")
        if label and kind in ("f1", "precision", "recall", "support"):
            rows.setdefault(label, {})[kind] = value
    return rows


def write_details(out_dir: Path, dev_history: Sequence[Mapping[str, float]], best_epoch: int,
                  test: Mapping[str, float]) -> list[Path]:
    """`details.json` and, where there are per-class keys, `test_per_class.csv`, in `out_dir` (see the
    module doc); the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    details = {"test": dict(test), "best_epoch": best_epoch,
               "best_dev": dict(dev_history[best_epoch]) if dev_history else {},
               "dev": [dict(metrics) for metrics in dev_history]}
    files = [out_dir / "details.json"]
    files[0].write_text(json.dumps(details, indent=1, sort_keys=True) + "\n")
    rows = _per_class(test)
    if rows:
        files.append(out_dir / "test_per_class.csv")
        with open(files[-1], "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["class", "f1", "precision", "recall", "support"])
            for label, row in rows.items():
                writer.writerow([label, *(row.get(k, "") for k in ("f1", "precision", "recall", "support"))])
    return files

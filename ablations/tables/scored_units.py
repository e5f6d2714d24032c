"""A finished run's test predictions as the units its metric scores, for resampling.

A unit is a sentence or instance, or a whole question for the metrics that score questions (BioASQ, answer
ranking). `ScoredUnits.score(indices)` scores a draw with the task's scorer (datamodules.metrics.METRICS).
For an additive metric (`datamodules.metric_registry.ADDITIVE`) each unit's counts are computed once and a
draw sums them: the same number as rescoring, much faster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from datamodules.task_types import TASK_TYPES

PREDICTIONS = "test_predictions.jsonl"
_BLOCK = 256  # resamples summed per matrix product (`ScoredUnits.scores`), at most _WEIGHTS weights in all:
_WEIGHTS = 2_000_000  # the weights matrix's memory (16 MB as int64)
ANSWERS = "test_answers.jsonl"  # extractive QA: per question
UNITS = "test_units.json"  # a run imported from a table bundle: its units as counts (tables/bundle.py)


@dataclass
class Unit:
    """One resampling unit: its id and the (gold, prediction) pairs its metric scores together."""

    id: str
    golds: list[Any]
    predictions: list[Any]
    counts: tuple[int, ...] | None = field(default=None, repr=False, compare=False)  # the metric's, on this unit


@dataclass
class ScoredUnits:
    """A run's test set as resampling units, and the metric that scores them."""

    metric: str
    metric_args: dict[str, Any]
    units: list[Unit]
    unit_name: str  # "sentence", "question", "instance", "document": what one unit is, for the notes
    _count_rows: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    _float_rows: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)  # for products

    def __len__(self) -> int:
        return len(self.units)

    def __add__(self, other: "ScoredUnits") -> "ScoredUnits":
        return ScoredUnits(self.metric, self.metric_args, self.units + other.units, self.unit_name)

    def score(self, indices: Sequence[int], key: str = "score") -> float:
        """The metric's `key` on the units at `indices` (repeats count again, as a bootstrap draws them)."""
        from datamodules.metric_registry import ADDITIVE

        drawn = indices if isinstance(indices, np.ndarray) else np.asarray(list(indices), dtype=np.intp)
        additive = ADDITIVE.get(self.metric)
        if additive is not None and self.units:
            result = additive.finish(self._counts(additive)[drawn].sum(axis=0).tolist(), **self.metric_args)
            if key in result:
                return float(result[key])
        return float(self._rescore([self.units[i] for i in drawn.tolist()])[key])

    def scores(self, draws: np.ndarray, key: str = "score") -> np.ndarray:
        """`score` of each row of `draws` (resamples x units drawn, indices into `units`). For a metric with
        counts, a row's count sums are its draw's weights (how often each unit was drawn) times the units'
        count rows: one matrix product per block of rows instead of one indexing per row."""
        from datamodules.metric_registry import ADDITIVE

        draws = np.asarray(draws, dtype=np.intp)
        if self.metric == "pearson" and key == "score" and all(len(u.golds) == 1 for u in self.units):
            return self._pearson_scores(draws)
        additive = ADDITIVE.get(self.metric)
        if additive is None or not self.units or key not in additive.finish(
                self._counts(additive)[:1].sum(axis=0).tolist(), **self.metric_args):
            return np.array([self.score(row, key) for row in draws], dtype=float)
        if self._float_rows is None:
            self._float_rows = self._counts(additive).astype(np.float64)
        rows, size = self._float_rows, len(self.units)
        out = np.empty(len(draws))
        step = max(1, min(_BLOCK, _WEIGHTS // size))
        for start in range(0, len(draws), step):
            block = draws[start:start + step]
            offsets = (np.arange(len(block)) * size)[:, None]
            weights = np.bincount((block + offsets).ravel(), minlength=len(block) * size).reshape(len(block), size)
            sums = weights.astype(np.float64) @ rows
            if additive.exact:  # float sums of integers below 2**53 are exact: rounded back, the metric sees the counts
                sums = np.rint(sums).astype(np.int64)
            out[start:start + len(block)] = [additive.finish(s, **self.metric_args)[key] for s in sums.tolist()]
        return out

    def _pearson_scores(self, draws: np.ndarray) -> np.ndarray:
        """`scores` for Pearson's r (no counts to add up): the drawn pairs gathered a block of rows at a time
        and correlated row-wise by the metric's own code (`pearson_rows`)."""
        from datamodules.metrics import pearson_rows

        gold = np.array([u.golds[0] for u in self.units], dtype=np.float64)
        pred = np.array([u.predictions[0] for u in self.units], dtype=np.float64)
        out = np.empty(len(draws))
        step = max(1, min(_BLOCK, _WEIGHTS // max(1, draws.shape[1])))  # draws: resamples x units drawn
        for start in range(0, len(draws), step):
            block = draws[start:start + step]
            out[start:start + len(block)] = pearson_rows(gold[block], pred[block])[0]
        return out

    def count_rows(self) -> np.ndarray:
        """units x counts of an additive metric (datamodules.metric_registry.ADDITIVE): what a draw sums."""
        from datamodules.metric_registry import ADDITIVE

        return self._counts(ADDITIVE[self.metric])

    def _counts(self, additive) -> np.ndarray:
        """units x counts: each unit counted once (kept on the unit: a paired test pools the same units
        again), by the metric's own counting."""
        if self._count_rows is not None:
            return self._count_rows
        for unit in self.units:
            if unit.counts is None:
                golds, predictions, args = unit.golds, unit.predictions, self._args([unit])
                unit.counts = tuple(additive.count(golds, predictions, **args))
        dtype = np.int64 if additive.exact else np.float64
        self._count_rows = np.array([unit.counts for unit in self.units], dtype=dtype)
        return self._count_rows

    def _rescore(self, drawn: list[Unit]) -> dict[str, float]:
        from datamodules.metrics import METRICS

        golds, predictions = [], []
        for unit in drawn:
            golds += unit.golds
            predictions += unit.predictions
        return METRICS.get(self.metric)(golds, predictions, **self._args(drawn))

    def _args(self, drawn: list[Unit]) -> dict[str, Any]:
        """The metric's arguments for the units `drawn`: the dataset's, plus what depends on the draw."""
        args = dict(self.metric_args)
        if self.metric == "mean_reciprocal_rank":  # a question drawn twice is two questions
            args["groups"] = [str(position) for position, unit in enumerate(drawn) for _ in unit.golds]
        if self.metric == "pico_word_macro_f1":  # bounds the spans only: words outside every span count for nothing
            args["lengths"] = [1 + max((s.end for s in [*g, *p]), default=0)
                               for unit in drawn for g, p in zip(unit.golds, unit.predictions)]
        return args


def _spans(value: list) -> list:
    from datamodules.instances import Span

    return [Span(int(s), int(e), str(label)) for s, e, label in value]


def _instance_value(spec, value: Any, gold: bool) -> Any:
    """A JSON gold or prediction back in the form the metric takes (encoders' `to_json` inverted)."""
    if TASK_TYPES.of(spec.task_type).tagged:
        return _spans(value)
    if spec.multi_label:
        return tuple(value)
    if spec.metric == "squad_v1":
        return list(value) if gold else (value[0][0] if value else "")
    return value


def unit_of(spec) -> str:
    """What one resampling unit of dataset `spec` is, as the table's notes name it."""
    from datamodules.task_encoder import scoring_group

    if scoring_group(spec) is not None:
        return "question"
    return TASK_TYPES.of(spec.task_type).unit


class NoPredictions(ValueError):
    """A run's test units cannot be read: it logged no predictions (or not the parts its metric needs)."""


def units_from_records(spec, records: list[dict], answers: list[dict] | None = None) -> ScoredUnits:
    """The resampling units of a run of dataset `spec` from its test-prediction records (and, for BioASQ's
    extractive QA, its per-question answer records)."""
    from datamodules.task_encoder import QUESTION_LEVEL_METRICS, RANKING_METRICS

    metric, args = spec.metric, dict(spec.metric_args)
    if metric in QUESTION_LEVEL_METRICS:
        if answers is None:
            raise NoPredictions(f"no {ANSWERS}: the run predates it")
        as_gold = (lambda g: [tuple(x) for x in g]) if metric == "bioasq_list" else list
        units = [Unit(str(q["id"]), [as_gold(q["gold"])], [list(q["answers"])]) for q in answers]
        return ScoredUnits(metric, args, units, unit_of(spec))
    if metric in RANKING_METRICS:
        if any("group" not in r for r in records):
            raise NoPredictions(f"{PREDICTIONS} has no question groups: the run predates them")
        by_group: dict[str, Unit] = {}
        for r in records:
            by_group.setdefault(str(r["group"]), Unit(str(r["group"]), [], []))
            by_group[str(r["group"])].golds.append(r["gold"])
            by_group[str(r["group"])].predictions.append(float(r["prediction"]))
        return ScoredUnits(metric, args, list(by_group.values()), unit_of(spec))
    unit = unit_of(spec)
    units = [Unit(str(r["id"]), [_instance_value(spec, r["gold"], True)],
                  [_instance_value(spec, r["prediction"], False)])
             for r in records]
    return ScoredUnits(metric, args, units, unit)


def read_jsonl(path) -> list[dict]:
    import json
    from pathlib import Path

    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def load_units(tracking_uri: str, run_id: str, task: str) -> ScoredUnits:
    """A finished run's test units, read from its MLflow artifacts. NoPredictions says why they cannot be
    (no predictions logged: a run older than them)."""
    import os

    from datamodules.registry import get_dataset

    spec = get_dataset(task)
    quiet = os.environ.get("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR")
    os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"  # no progress bar per run on the terminal
    try:
        from datamodules.task_encoder import QUESTION_LEVEL_METRICS

        files = _download(tracking_uri, run_id, (PREDICTIONS, ANSWERS) if spec.metric in QUESTION_LEVEL_METRICS
                          else (PREDICTIONS,))
        if files[PREDICTIONS] is None:  # a run imported from a bundle holds its units alone
            files.update(_download(tracking_uri, run_id, (UNITS,)))
    finally:
        if quiet is None:
            os.environ.pop("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", None)
        else:
            os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = quiet
    if files[PREDICTIONS] is None and files.get(UNITS):
        return units_from_file(files[UNITS][0])
    if files[PREDICTIONS] is None:
        raise NoPredictions(f"run {run_id} has no {PREDICTIONS}")
    return units_from_records(spec, files[PREDICTIONS], files[ANSWERS])


def _download(tracking_uri: str, run_id: str, names: tuple[str, ...]) -> dict[str, list[dict] | None]:
    import tempfile

    from mlflow.artifacts import download_artifacts
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from ablations.run.tracking import preserved_tracking_env

    with tempfile.TemporaryDirectory() as tmp, preserved_tracking_env():
        # from the run's artifact location, looked up once: a `runs:/` URI looks the run up again for every
        # file, and searches its logged models (a table reads hundreds of runs)
        files: dict[str, list[dict] | None] = {ANSWERS: None, **{name: None for name in names}}
        try:  # a planned cell that never ran has no run id, a deleted run no run: no files
            root = MlflowClient(tracking_uri).get_run(run_id).info.artifact_uri.rstrip("/") if run_id else None
        except MlflowException:
            root = None
        for name in names if root else ():
            try:
                files[name] = read_jsonl(download_artifacts(artifact_uri=f"{root}/{name}", dst_path=tmp,
                                                            tracking_uri=tracking_uri))
            except (MlflowException, OSError):  # not logged: stays None
                pass
    return files


def unit_values(units: ScoredUnits) -> dict[str, Any]:
    """What a run's units score, as JSON: per unit the metric's counts where they add up, else golds and
    predictions (Pearson's r)."""
    from datamodules.metric_registry import ADDITIVE

    if ADDITIVE.get(units.metric) is not None and units.units:  # Pearson's r is the one metric without counts
        return {"counts": units.count_rows().tolist()}
    return {"golds": [u.golds for u in units.units], "predictions": [u.predictions for u in units.units]}


def units_file(units: ScoredUnits) -> dict[str, Any]:
    """A run's test units on their own, as an imported run's artifact UNITS holds them."""
    return {"metric": units.metric, "metric_args": units.metric_args, "unit_name": units.unit_name,
            "ids": [u.id for u in units.units], **unit_values(units)}


def units_from_file(value: dict[str, Any]) -> ScoredUnits:
    """`units_file` read back."""
    return units_from(value, value)


def units_from(value: dict[str, Any], test_set: dict[str, Any]) -> ScoredUnits:
    """`unit_values` read back, with the test set's ids, metric and unit name."""
    ids = test_set["ids"]
    if "counts" in value:
        units = [Unit(i, [], [], tuple(row)) for i, row in zip(ids, value["counts"])]
    else:
        units = [Unit(i, g, p) for i, g, p in zip(ids, value["golds"], value["predictions"])]
    return ScoredUnits(test_set["metric"], dict(test_set["metric_args"]), units, test_set["unit_name"])

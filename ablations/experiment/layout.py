"""An experiment's table layout (its YAML's `table:` section): the row and column axes, their order and
labels, the paper's numbers, the caption, and the metric, checked against what the experiment plans and
what its tasks report."""

from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import Any

from ablations import results
from ablations.config import PROFILES
from ablations.experiment.definition import Axis, ModelDef
from ablations.experiment.values import UNSET, per_profile
from bioablate_core.errors import ConfigError

AXES_BUILTIN = ("task", "model")
METRIC_AXIS = "metric"  # an axis of test metrics, when table.metrics names them


def axis_values(axis: str, models: dict[str, ModelDef], tasks: list[str], axes: list[Axis]) -> list[str]:
    if axis == "task":
        return list(tasks)
    if axis == "model":
        return [n for n, m in models.items() if m.finetune]
    return list(next(a for a in axes if a.name == axis).values)


def table_text(table: dict[str, Any], key: str, profile: str, path: Path) -> str:
    """`table.title` / `table.caption`: text, or per profile; a profile the mapping does not name gets ""."""
    value = per_profile(table[key], profile)
    if value is UNSET or value is None:
        return ""
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ConfigError(f"{path}: table.{key}: expected text, or text per profile "
                          f"({{mini: \"...\", default: \"...\"}}; profiles: {', '.join(PROFILES)})")
    return str(value)


def table_layout(table: dict[str, Any], name: str, models: dict[str, ModelDef], tasks: list[str], axes: list[Axis],
            path: Path, profile: str) -> results.TableLayout:
    names = [*AXES_BUILTIN, *[a.name for a in axes], *([METRIC_AXIS] if table["metrics"] else [])]
    row_axis, column_axis = table["rows"], table["columns"]

    def values(axis: str) -> list[str]:
        return list(table["metrics"]) if axis == METRIC_AXIS else axis_values(axis, models, tasks, axes)

    for key in ("rows", "columns"):
        if table[key] not in names:
            raise ConfigError(f"{path}: table.{key}: unknown axis '{table[key]}'; axes: {', '.join(names)}")
    if row_axis == column_axis:
        raise ConfigError(f"{path}: table.rows and table.columns are both '{row_axis}'")
    for axis in names:
        if axis not in (row_axis, column_axis) and len(values(axis)) > 1:
            raise ConfigError(f"{path}: axis '{axis}' has several values but is neither table.rows nor "
                              f"table.columns ({row_axis} x {column_axis})")
    rows, columns = values(row_axis), values(column_axis)
    if table["baseline"] is not None and table["baseline"] not in columns:
        raise ConfigError(f"{path}: table.baseline: '{table['baseline']}' is not a column ({', '.join(columns)})")
    for key, valid in (("row_order", rows), ("column_order", columns)):
        for value in table[key]:
            if value not in valid:
                raise ConfigError(f"{path}: table.{key}: '{value}' is not one of {', '.join(valid)}")
    paper_rows = [*rows, results.BLURB_ROW] if table["blurb_row"] else list(rows)
    if row_axis == "task":  # a task this profile does not plan (e.g. micro's subset) is left out
        from datamodules.registry import dataset_names

        table = {**table, **{key: {r: v for r, v in table[key].items() if r in paper_rows or r not in dataset_names()}
                             for key in ("paper", "paper_std")}}
    for key in ("paper", "paper_std"):
        for row, by_column in table[key].items():
            if row not in paper_rows:
                raise ConfigError(f"{path}: table.{key}: '{row}' is not a row ({', '.join(paper_rows)})")
            for column, value in by_column.items():
                if column not in columns:
                    raise ConfigError(f"{path}: table.{key}.{row}: '{column}' is not a column ({', '.join(columns)})")
                if not math.isfinite(value):  # compared against and averaged: leave out a number the paper lacks
                    raise ConfigError(f"{path}: table.{key}.{row}.{column}: {value} is not a number the paper "
                                      "printed; give its value or leave the entry out")
    if not float(table["paper_noise"]) >= 0:
        raise ConfigError(f"{path}: table.paper_noise: {table['paper_noise']} is not a gap (points >= 0); "
                          "e.g. paper_noise: 0.5")
    labels = dict(table["labels"])
    if column_axis == "model":
        labels = {**{n: m.label for n, m in models.items() if m.finetune and m.label != n}, **labels}
    for column in labels:
        if column not in columns:
            raise ConfigError(f"{path}: table.labels: '{column}' is not a column ({', '.join(columns)})")
    if table["correction"] not in results.CORRECTIONS:
        close = difflib.get_close_matches(table["correction"], list(results.CORRECTIONS), n=1)
        raise ConfigError(f"{path}: table.correction: unknown '{table['correction']}'"
                          + (f" (did you mean '{close[0]}'?)" if close else "")
                          + f"; known: {', '.join(results.CORRECTIONS)}")
    if table["blurb_row"] and row_axis != "task":
        raise ConfigError(f"{path}: table.blurb_row needs rows: task")
    for metric in table["metrics"] or [table["metric"]]:
        _check_metric(metric, tasks, path)
    return results.TableLayout(
        title=table_text(table, "title", profile, path) or name, rows=row_axis, columns=column_axis,
        metric=", ".join(table["metrics"]) or table["metric"],
        baseline=table["baseline"], row_order=tuple(table["row_order"]) or tuple(rows),
        column_order=tuple(table["column_order"]) or tuple(columns), column_labels=labels,
        paper={str(r): {str(c): float(v) for c, v in cols.items()} for r, cols in table["paper"].items()},
        blurb_row=table["blurb_row"], caption=table_text(table, "caption", profile, path),
        paper_source=table["paper_source"], metrics=tuple(table["metrics"]), correction=table["correction"],
        cost=bool(table["cost"]),
        paper_std={str(r): {str(c): float(v) for c, v in cols.items()} for r, cols in table["paper_std"].items()},
        paper_noise=float(table["paper_noise"]), differences=bool(table["differences"]))


def _check_metric(metric: str, tasks: list[str], path: Path) -> None:
    """The table's metric is one every task reports (found before anything is trained, not as a table of
    failed cells afterwards)."""
    from datamodules.metrics import metric_keys
    from datamodules.registry import get_dataset

    for task in tasks:
        spec = get_dataset(task)
        keys = metric_keys(spec.metric, spec.metric_args)
        if metric not in keys:
            close = difflib.get_close_matches(metric, sorted(keys), n=1)
            raise ConfigError(f"{path}: table.metric: {task} does not report '{metric}'"
                              + (f" (did you mean '{close[0]}'?)" if close else "")
                              + f"; it reports: {', '.join(sorted(keys))}")

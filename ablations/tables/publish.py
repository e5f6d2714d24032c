"""Publishing a table: table.md / .tex / .csv and the figure written to a folder and logged to one MLflow
run per experiment and invocation (`Experiment.invocation()`), with the cells as an MLflow table
(`mlflow.load_table` reads table.json back). A re-render of the same invocation updates its run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ablations.results import CellRun, TableLayout
from ablations.tables.pareto import FIGURE_NAME as COMPUTE_STEM
from ablations.tables.plot import FIGURE_FORMATS, plot
from ablations.tables.pretrain_curves import FILE_STEM as CURVES_STEM
from ablations.tables.provenance import file_footer, provenance, vocab_provenance
from ablations.tables.render import FILE_SUFFIX, FORMATS, Grid, records, render_data, render_grid
from ablations.tables.stats import STATUSES, TableData, table_data
from bioablate_core.files import writable_dir

TABLE_KIND = "table"  # `kind` tag of the MLflow run holding an experiment's rendered table
TABLE_MLFLOW_EXPERIMENT = "tables"
TABLE_FILES = (*(f"table.{FILE_SUFFIX[fmt]}" for fmt in FORMATS), *(f"table.{s}" for s in FIGURE_FORMATS))
TABLE_ARTIFACT = "table.json"  # the cells as an MLflow table artifact (the CSV's fields and records)


@dataclass
class Published:
    """What `publish` wrote: the folder, the MLflow table run, and the table in each format."""

    out_dir: Path
    run_id: str
    texts: dict[str, str]  # fmt -> rendered table (without the provenance header)
    header: list[str]


def _filter_value(value: str) -> str:
    return value.replace("'", "\\'")


def table_runs(tracking_uri: str, name: str) -> list:
    """Every MLflow run holding a rendered table of experiment `name` (one per invocation), newest first."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name(TABLE_MLFLOW_EXPERIMENT)
    if experiment is None:
        return []
    return list(client.search_runs([experiment.experiment_id],
                                   f"tags.kind = '{TABLE_KIND}' and tags.experiment = '{_filter_value(name)}'",
                                   order_by=["attributes.start_time DESC"], max_results=1000))


def find_table_run(tracking_uri: str, name: str, invocation: str | None = None, profile: str | None = None):
    """The MLflow run holding experiment `name`'s table as rendered for `invocation` (`Experiment.invocation()`:
    profile and command-line overrides), or None; without `invocation`, the newest of any. A run from before
    tables were kept per invocation (no `invocation` tag) is taken for its own profile."""
    runs = table_runs(tracking_uri, name)
    if invocation is None:
        return runs[0] if runs else None
    found = next((r for r in runs if r.data.tags.get("invocation") == invocation), None)
    if found is None and profile is not None:
        found = next((r for r in runs if "invocation" not in r.data.tags and r.data.tags.get("profile") == profile),
                     None)
    return found


def _replace_table(client, run_id: str, table: TableData | Grid) -> None:
    """Log the table's cells as the run's MLflow table artifact. `log_table` appends to an existing one
    (a re-render would hold the cells twice): delete it first."""
    import pandas as pd
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    if any(a.path == TABLE_ARTIFACT for a in client.list_artifacts(run_id)):
        get_artifact_repository(client.get_run(run_id).info.artifact_uri).delete_artifacts(TABLE_ARTIFACT)
        if any(a.path == TABLE_ARTIFACT for a in client.list_artifacts(run_id)):
            raise RuntimeError(f"cannot replace {TABLE_ARTIFACT} of MLflow run {run_id}: its artifact store "
                               "does not delete files")
    fields, cells = records(table)
    client.log_table(run_id, pd.DataFrame(cells, columns=fields), TABLE_ARTIFACT)


def log_table_run(tracking_uri: str, name: str, files: list[Path], table: TableData | Grid, tags: dict[str, str],
                  metrics: dict[str, float], artifact_root: Path | None, invocation: str | None = None) -> str:
    """Log the rendered files and the table's cells (TABLE_ARTIFACT) to the table run of experiment `name`
    and `invocation`: created once, updated on every re-render of that invocation (same run, artifacts
    overwritten, tags and metrics refreshed). None: one run for the experiment, whatever rendered it."""
    from mlflow.entities import RunStatus

    from ablations.run.tracking import Tracker, preserved_tracking_env

    tracker = Tracker(tracking_uri, TABLE_MLFLOW_EXPERIMENT, artifact_root=artifact_root)
    client = tracker.client
    all_tags = {"kind": TABLE_KIND, "experiment": name, **tags, **({"invocation": invocation} if invocation else {})}
    previous = find_table_run(tracking_uri, name, invocation, tags.get("profile"))
    if previous is None:
        run_id = tracker.create(f"table-{name}" + (f"-{invocation}" if invocation else ""), all_tags, {})
    else:
        run_id = previous.info.run_id
        client.update_run(run_id, status="RUNNING")
        tracker.set_tags(run_id, all_tags)
    try:
        # the client resolves a server's `mlflow-artifacts:` URIs against its own tracking URI
        with preserved_tracking_env():
            for path in files:
                client.log_artifact(run_id, str(path))
            _replace_table(client, run_id, table)
        tracker.log_metrics(run_id, metrics)
    except BaseException:
        client.set_terminated(run_id, RunStatus.to_string(RunStatus.FAILED))
        raise
    client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))
    return run_id


# every figure a table folder can hold (the table's, score against compute, the pretraining curves): a render
# without figures removes them, so that no figure of an earlier render stands beside a table it does not show
FIGURE_FILES = tuple(f"{stem}.{fmt}" for stem in ("table", COMPUTE_STEM, CURVES_STEM) for fmt in FIGURE_FORMATS)


def _write_all(out_dir: Path, texts: dict[str, str], header: list[str], figure: TableData | None,
               ylabel: str | None, figures: bool) -> list[Path]:
    from ablations.tables.pareto import plot_compute

    writable_dir(out_dir, "table folder (--out)")  # a file there: one line, not a FileExistsError
    paths = []
    for fmt, text in texts.items():
        if fmt not in FILE_SUFFIX:  # the long form (`--stats`) is printed, not written
            continue
        path = out_dir / f"table.{FILE_SUFFIX[fmt]}"
        path.write_text(text + file_footer(header, fmt), encoding="utf-8")
        paths.append(path)
    if figure is None:  # a vocabulary table from its bundle, which holds no figure's numbers: figures kept
        return paths
    if not figures:
        for name in FIGURE_FILES:
            (out_dir / name).unlink(missing_ok=True)
        return paths
    compute = plot_compute(figure, out_dir / "table") if isinstance(figure, TableData) and figure.costs else []
    return paths + plot(figure, out_dir / "table", ylabel) + compute


def publish(name: str, table: TableData | Grid, header: list[str], tracking_uri: str, out_dir: Path,
            artifact_root: Path | None, tags: dict[str, str], metrics: dict[str, float],
            invocation: str | None = None, figures: bool = True) -> Published:
    """Write table.md / .tex / .csv (with the provenance header; CSV stays plain) and, with `figures`, the
    figure (.png, .svg, .pdf) to `out_dir`, and log them and the table's cells to the experiment's MLflow
    table run."""
    texts, paths = write_files(Path(out_dir), table, header, figures)
    run_id = log_table_run(tracking_uri, name, paths, table, tags, metrics, artifact_root, invocation)
    return Published(Path(out_dir), run_id, texts, header)


def table_statistics(layout: TableLayout, runs: Sequence[CellRun], units, cache_dir: Path | None = None,
                     stage_costs: dict | None = None) -> TableData:
    """A fine-tuning table's numbers with every statistic: the cells, their intervals and tests over the runs'
    test `units` (a tracking store's URI, or the units by run id of a bundle), their cost, the agreement."""
    from ablations.tables.agreement import agreement
    from ablations.tables.cost import add_costs
    from ablations.tables.significance import annotate, pair_tester

    data = table_data(layout, runs)
    annotate(data, units, cache_dir)
    add_costs(data, runs, stage_costs)
    test = pair_tester(data, units, cache_dir)
    data.agreement = agreement(data, test)
    if test.cache.pending:  # the pairs not cached yet, on every core; then again, from the results
        test.cache.run_pending()
        data.agreement = agreement(data, test)
    return data


def render_texts(table: TableData | Grid) -> dict[str, str]:
    """The table in every format (and, for a fine-tuning table, `--stats`'s long form)."""
    if isinstance(table, Grid):
        return {fmt: render_grid(table, fmt) for fmt in FORMATS}
    from ablations.tables.long_form import long_form

    return {**{fmt: render_data(table, fmt) for fmt in FORMATS}, "stats": long_form(table)}


def write_files(out_dir: Path, table: TableData | Grid, header: list[str],
                figures: bool = True) -> tuple[dict[str, str], list[Path]]:
    """The table's files in `out_dir` (table.md / .tex / .csv with the header; with `figures`, its figures)."""
    texts = render_texts(table)
    figure, ylabel = (table.figure_data, table.ylabel) if isinstance(table, Grid) else (table, None)
    setup = [table.layout.setup] if isinstance(table, TableData) and table.layout.setup else []
    return texts, _write_all(Path(out_dir), texts, [*header, *setup], figure, ylabel, figures)


def render_bundle(folder: Path, out_dir: Path, fmt: str = "markdown", figures: bool = True) -> str:
    """The table of the bundle in `folder` (bundle.py), with no store: its files (and a copy of the bundle)
    written to `out_dir`, the table returned in `fmt`. The same bundle gives the same table.md, .tex and .csv."""
    from ablations.tables.bundle import BUNDLE, read_bundle, write_bundle
    from ablations.tables.render import check_format

    if fmt != "stats":
        check_format(fmt)
    bundle = read_bundle(folder)
    if bundle.kind == "vocab":
        table = Grid(**bundle.grid)
    else:
        table = table_statistics(bundle.layout, bundle.cells, bundle.units(), None, bundle.stage_costs)
    texts, _ = write_files(out_dir, table, bundle.header, figures=figures)
    if Path(folder).resolve() != Path(out_dir).resolve():
        write_bundle(Path(out_dir) / BUNDLE, bundle)
    return texts.get(fmt, texts["markdown"])


def publish_runs(name: str, layout: TableLayout, runs: Sequence[CellRun], tracking_uri: str, out_dir: Path,
                 artifact_root: Path | None = None, profile: str | None = None,
                 tags: dict[str, str] | None = None,
                 stages: Sequence[tuple[str, str, str | None]] = (),
                 invocation: str | None = None, cache_dir: Path | None = None,
                 stage_costs: dict | None = None, figures: bool = True) -> Published:
    """A fine-tuning table from its cell runs, rendered, plotted and logged to `invocation`'s table run.
    `stages` (name, status, run id) are its pretraining stages, `stage_costs` what they cost per column, and
    `cache_dir` holds the prediction statistics."""
    from ablations.run.tracking import git_commit

    data = table_statistics(layout, runs, tracking_uri, cache_dir, stage_costs)
    header = provenance(name, profile, runs, tracking_uri, stages)
    counts = {status: sum(r.status == status for r in runs) for status in STATUSES}
    cells = [c for _, row_cells in data.body_rows() for c in row_cells]
    metrics = {"runs_planned": len(runs), **{f"runs_{s.lower()}": n for s, n in counts.items()},
               "cells": len(cells), "cells_with_values": sum(c.mean is not None for c in cells)}
    all_tags = {"profile": profile or "", "title": layout.title, "git_commit": git_commit(),
                "table_kind": "finetune", **(tags or {})}
    return publish(name, data, header, tracking_uri, out_dir, artifact_root, all_tags, metrics,
                   invocation, figures)


def publish_grid(name: str, grid: Grid, tracking_uri: str, out_dir: Path, artifact_root: Path | None = None,
                 profile: str | None = None, tags: dict[str, str] | None = None,
                 seconds: float | None = None, invocation: str | None = None,
                 datasets: Sequence[str] = (), figures: bool = True) -> Published:
    """A vocabulary table (Table 1 or 8), computed in `seconds` (over `datasets`, Table 8's): rendered,
    plotted and logged like a fine-tuning table."""
    from ablations.run.tracking import git_commit

    all_tags = {"profile": profile or "", "title": grid.title, "git_commit": git_commit(), "table_kind": "vocab",
                **(tags or {})}
    return publish(name, grid, vocab_provenance(name, seconds, profile, datasets), tracking_uri, out_dir, artifact_root,
                   all_tags,
                   {"rows": len(grid.body)}, invocation, figures)

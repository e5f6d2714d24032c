"""The report notebook, executed on a python3 kernel against a real store holding a micro experiment's
runs and its rendered table: no cell errors, and the table, its numbers and its plot are in the outputs."""

from __future__ import annotations

import base64
import csv
import io
from pathlib import Path

import nbformat
import pytest
from mlflow.tracking import MlflowClient
from nbclient import NotebookClient

from ablations.config import REPO_ROOT
from ablations.experiment import collect, load_experiment
from ablations.finetune import run_finetune
from ablations.results import FINISHED
from ablations.table import TABLE_KIND, TABLE_MLFLOW_EXPERIMENT, find_table_run, render_experiment

NOTEBOOK = REPO_ROOT / "notebooks" / "ablation_report.ipynb"
EXPERIMENT = """
name: micro-lr
models:
  rb: {name_or_path: random-bert}
tasks: [biosses, gad]
vary:
  lr: {key: finetune.lr, values: {high: 5.0e-4, low: 1.0e-4}}
seeds: 2
overrides:
  finetune: {max_train_examples: 32, max_eval_examples: 32, epochs: 1, max_length: 64}
table:
  title: Micro learning rates
  rows: task
  columns: lr
  baseline: high
  labels: {high: lr 5e-4, low: lr 1e-4}
  paper: {biosses: {high: 92.30}}
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory, data_dir):
    """A micro experiment (2 learning rates x 2 seeds on BIOSSES run for real, GAD's cells never run),
    its table rendered from the store twice (a re-render)."""
    work = tmp_path_factory.mktemp("report")
    spec = work / "micro-lr.yaml"
    spec.write_text(EXPERIMENT)
    uri = f"sqlite:///{work / 'mlruns.db'}"
    experiment = load_experiment(spec, data_dir=str(data_dir), work_dir=str(work), tracking_uri=uri)
    for cell in experiment.cells():
        if cell.task == "biosses":
            run_finetune(experiment.finetune_config(cell, "random-bert"))
    render_experiment(experiment)
    first = find_table_run(uri, "micro-lr").info.run_id
    markdown = render_experiment(experiment)
    return uri, work, collect(experiment), first, markdown


def test_rerendering_updates_the_one_table_run(store):
    uri, work, runs, first, _ = store
    assert [r.status for r in runs].count(FINISHED) == 4
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(TABLE_MLFLOW_EXPERIMENT)
    table_runs = client.search_runs([experiment.experiment_id], f"tags.kind = '{TABLE_KIND}'")
    assert [r.info.run_id for r in table_runs] == [first]
    run = table_runs[0]
    assert run.info.status == "FINISHED" and run.data.tags["experiment"] == "micro-lr"
    assert run.data.metrics["runs_finished"] == 4 and run.data.metrics["runs_not_run"] == 4
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"table.md", "table.tex", "table.csv",
                                                                        "table.png"}
    md = (work / "tables" / "micro-lr" / "table.md").read_text()
    assert md.startswith("- experiment: micro-lr\n- profile: micro\n- runs: 8 planned (4 finished, 4 not run)")
    assert "wall time:" in md and "machine (rendering host):" in md and "commit" in md
    rows = list(csv.DictReader(io.StringIO((work / "tables" / "micro-lr" / "table.csv").read_text())))
    biosses_high = next(r for r in rows if r["row"] == "biosses" and r["column"] == "high")
    expected = 100 * sum(r.value for r in runs if r.column == "high" and r.task == "biosses") / 2
    assert float(biosses_high["mean"]) == pytest.approx(expected, abs=1e-5)


def test_report_notebook_shows_every_table_and_plot(store):
    uri, work, runs, table_run, markdown = store
    nb = nbformat.read(NOTEBOOK, as_version=4)
    parameters = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    parameters.source = f"TRACKING_URI = {uri!r}"
    NotebookClient(nb, kernel_name="python3", timeout=180,
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    shown = "\n".join(o.get("data", {}).get("text/markdown", "") for o in outputs)
    assert "micro-lr" in shown and table_run in shown
    assert markdown in shown  # the rendered table itself, numbers and footnotes
    high = [r.value for r in runs if r.column == "high" and r.task == "biosses"]
    assert f"{100 * sum(high) / 2:.2f}" in shown and "(not run [" in shown and "paper 92.30" in shown
    pngs = [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 1 and base64.b64decode(pngs[0])[:8] == b"\x89PNG\r\n\x1a\n"
    assert Path(work / "tables" / "micro-lr" / "table.png").read_bytes() == base64.b64decode(pngs[0])

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

from ablations.config import REPO_ROOT, build_config
from ablations.finetune import run_finetune
from ablations.results import FINISHED, NOT_RUN, CellRun, TableLayout
from ablations.table import TABLE_KIND, TABLE_MLFLOW_EXPERIMENT, publish_runs

NOTEBOOK = REPO_ROOT / "notebooks" / "ablation_report.ipynb"
FAST = ["finetune.max_train_examples=32", "finetune.max_eval_examples=32", "finetune.epochs=1",
        "finetune.max_length=64", "trainer.progress_bar=false"]
LAYOUT = TableLayout(title="Micro learning rates", rows="task", columns="lr", baseline="high",
                     column_order=("high", "low"), column_labels={"high": "lr 5e-4", "low": "lr 1e-4"},
                     paper={"biosses": {"high": 92.30}})


@pytest.fixture(scope="module")
def store(tmp_path_factory, data_dir):
    """Real micro fine-tuning runs (2 learning rates x 2 seeds on BIOSSES, plus a cell never run), the
    experiment's table published into the store twice (a re-render)."""
    work = tmp_path_factory.mktemp("report")
    uri = f"sqlite:///{work / 'mlruns.db'}"
    runs = []
    for column, lr in (("high", "5e-4"), ("low", "1e-4")):
        for seed in (1, 2):
            cfg = build_config("micro", [*FAST, f"finetune.lr={lr}"], task="biosses", seed=seed,
                               data_dir=str(data_dir), work_dir=str(work), tracking_uri=uri)
            result = run_finetune(cfg)
            runs.append(CellRun("biosses", column, "biosses", seed, FINISHED, result.test["score"],
                                run_id=result.run_id, fingerprint=result.fingerprint))
    runs.append(CellRun("gad", "high", "gad", 1, NOT_RUN))
    runs.append(CellRun("gad", "low", "gad", 1, NOT_RUN))
    first = publish_runs("micro-lr", LAYOUT, runs, uri, work / "tables" / "micro-lr", work / "mlartifacts",
                         profile="micro")
    published = publish_runs("micro-lr", LAYOUT, runs, uri, work / "tables" / "micro-lr", work / "mlartifacts",
                             profile="micro")
    return uri, work, runs, first, published


def test_rerendering_updates_the_one_table_run(store):
    uri, work, runs, first, published = store
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(TABLE_MLFLOW_EXPERIMENT)
    table_runs = client.search_runs([experiment.experiment_id], f"tags.kind = '{TABLE_KIND}'")
    assert [r.info.run_id for r in table_runs] == [first.run_id] == [published.run_id]
    run = table_runs[0]
    assert run.info.status == "FINISHED" and run.data.tags["experiment"] == "micro-lr"
    assert run.data.metrics["runs_finished"] == 4 and run.data.metrics["runs_not_run"] == 2
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"table.md", "table.tex", "table.csv",
                                                                        "table.png"}
    md = (work / "tables" / "micro-lr" / "table.md").read_text()
    assert md.startswith("- experiment: micro-lr\n- profile: micro\n- runs: 6 planned (4 finished, 2 not run)")
    assert "wall time:" in md and "machine (rendering host):" in md and "commit" in md
    rows = list(csv.DictReader(io.StringIO((work / "tables" / "micro-lr" / "table.csv").read_text())))
    biosses_high = next(r for r in rows if r["row"] == "biosses" and r["column"] == "high")
    expected = 100 * sum(r.value for r in runs if r.column == "high" and r.task == "biosses") / 2
    assert float(biosses_high["mean"]) == pytest.approx(expected, abs=1e-5)


def test_report_notebook_shows_every_table_and_plot(store):
    uri, work, runs, _, published = store
    nb = nbformat.read(NOTEBOOK, as_version=4)
    parameters = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    parameters.source = f"TRACKING_URI = {uri!r}"
    NotebookClient(nb, kernel_name="python3", timeout=180,
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    shown = "\n".join(o.get("data", {}).get("text/markdown", "") for o in outputs)
    assert "micro-lr" in shown and published.run_id in shown
    assert published.texts["markdown"] in shown  # the rendered table itself, numbers and footnotes
    high = [r.value for r in runs if r.column == "high" and r.task == "biosses"]
    assert f"{100 * sum(high) / 2:.2f}" in shown and "(not run [" in shown and "paper 92.30" in shown
    pngs = [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 1 and base64.b64decode(pngs[0])[:8] == b"\x89PNG\r\n\x1a\n"
    assert Path(work / "tables" / "micro-lr" / "table.png").read_bytes() == base64.b64decode(pngs[0])

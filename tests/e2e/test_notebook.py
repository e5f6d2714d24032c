"""The report notebook, executed on a python3 kernel against a real store holding a micro experiment's
runs and its rendered table: no cell errors, and the table, its numbers and its plot are in the outputs."""

from __future__ import annotations

import base64
import csv
import io

import nbformat
import pytest
from mlflow.tracking import MlflowClient
from nbclient import NotebookClient

from ablations.config import REPO_ROOT
from ablations.experiment import collect, load_experiment
from ablations.experiment.runner import run_experiment
from ablations.results import FINISHED
from ablations.tables import TABLE_KIND, TABLE_MLFLOW_EXPERIMENT, find_table_run, render_experiment

pytestmark = [pytest.mark.slow]

NOTEBOOK = REPO_ROOT / "notebooks" / "ablation_report.ipynb"
EXPERIMENT = """
name: {name}
models:
  rb: {{name_or_path: random-bert}}
tasks: {tasks}
vary:
  lr: {{key: finetune.lr, values: {{high: 5.0e-4, low: 1.0e-4}}}}
seeds: 2
overrides:
  figures: true  # the report shows each table's figures (the micro profile draws none)
  finetune: {{max_train_examples: 32, max_eval_examples: 32, epochs: 1, max_length: 64}}
table:
  title: Micro learning rates
  rows: task
  columns: lr
  baseline: high
  labels: {{high: lr 5e-4, low: lr 1e-4}}
  paper: {{biosses: {{high: 92.30}}}}
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory, data_dir):
    """`micro-lr` (2 learning rates x 2 seeds on BIOSSES) run by the experiment runner and rendered twice
    (a re-render); `micro-lr-gad`, the same plus GAD, only rendered: its BIOSSES cells are micro-lr's runs,
    found by fingerprint, its GAD cells were never run."""
    work = tmp_path_factory.mktemp("report")
    uri = f"sqlite:///{work / 'mlruns.db'}"
    experiments = {}
    for name, tasks in (("micro-lr", "[biosses]"), ("micro-lr-gad", "[biosses, gad]")):
        (work / f"{name}.yaml").write_text(EXPERIMENT.format(name=name, tasks=tasks))
        experiments[name] = load_experiment(work / f"{name}.yaml", data_dir=str(data_dir), work_dir=str(work),
                                            tracking_uri=uri)
    assert run_experiment(experiments["micro-lr"], echo=lambda _: None).ok
    render_experiment(experiments["micro-lr"])
    first = find_table_run(uri, "micro-lr").info.run_id
    markdown = {name: render_experiment(experiment) for name, experiment in experiments.items()}
    # another invocation of micro-lr (other overrides, never run): a table run of its own
    longer = load_experiment(work / "micro-lr.yaml", overrides=["finetune.epochs=2"], data_dir=str(data_dir),
                             work_dir=str(work), tracking_uri=uri)
    markdown["micro-lr epochs=2"] = render_experiment(longer, out_dir=work / "tables" / "micro-lr-epochs")
    return uri, work, collect(experiments["micro-lr-gad"]), first, markdown


def test_rerendering_updates_the_one_table_run(store):
    uri, work, runs, first, _ = store
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(TABLE_MLFLOW_EXPERIMENT)
    table_runs = client.search_runs([experiment.experiment_id], f"tags.kind = '{TABLE_KIND}'")
    assert sorted((r.data.tags["experiment"], r.data.tags["cli_overrides"]) for r in table_runs) == [
        ("micro-lr", ""), ("micro-lr", "finetune.epochs=2"), ("micro-lr-gad", "")]  # one per invocation
    run = next(r for r in table_runs if r.data.tags["experiment"] == "micro-lr" and not r.data.tags["cli_overrides"])
    assert run.info.run_id == first and run.info.status == "FINISHED"
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"table.md", "table.tex", "table.csv",
                                                                        "table.png", "table.svg", "table.pdf",
                                                                        "table.json"}  # two columns: no compute figure
    gad = next(r for r in table_runs if r.data.tags["experiment"] == "micro-lr-gad")
    assert gad.data.metrics["runs_finished"] == 4 and gad.data.metrics["runs_not_run"] == 4
    md = (work / "tables" / "micro-lr-gad-micro" / "table.md").read_text()
    header = md.split("\n---\n", 1)[1].strip().splitlines()  # the provenance footer
    assert header[:3] == ["- experiment: micro-lr-gad", "- profile: micro",
                          "- runs: 8 fine-tuning runs planned (4 finished, 4 not run)"]
    assert header[3].startswith("- wall time: ") and "summed over 4 runs" in header[3]
    assert header[4].startswith("- machine (rendering host): ") and "- code: rendered at commit " in md
    rows = list(csv.DictReader(io.StringIO((work / "tables" / "micro-lr-gad-micro" / "table.csv").read_text())))
    biosses_high = next(r for r in rows if r["row"] == "biosses" and r["column"] == "high")
    assert [r.status for r in runs].count(FINISHED) == 4
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
    # the experiments list, one row per invocation: micro-lr was run once (one parent run), micro-lr-gad and
    # micro-lr with finetune.epochs=2 only rendered
    assert f"| micro-lr | micro | (none) | 1 | FINISHED | `{table_run}` |" in shown
    assert "| micro-lr | micro | finetune.epochs=2 | 0 |  | `" in shown
    assert "| micro-lr-gad | micro | (none) | 0 |" in shown
    assert "profile `micro`, overrides `finetune.epochs=2`, rendered" in shown
    for text in markdown.values():
        assert text in shown  # each rendered table itself, numbers and footnotes
    high = [r.value for r in runs if r.column == "high" and r.task == "biosses"]
    assert f"{100 * sum(high) / 2:.1f}" in shown and "(not run [" in shown and "| *paper* | 92.3" in shown
    # the statistics: 2 seeds against the baseline, so never marked (the intervals are in the CSV)
    assert "never marked below 3 seeds, as here" in shown and "Holm-corrected" in shown
    pngs = [base64.b64decode(o["data"]["image/png"]) for o in outputs if "image/png" in o.get("data", {})]
    folders = {"micro-lr": "micro-lr-micro", "micro-lr-gad": "micro-lr-gad-micro",
               "micro-lr epochs=2": "micro-lr-epochs"}
    # each table's bars, and its score-vs-compute figure where its runs logged their compute
    figures = [work / "tables" / folders[name] / f for name in markdown for f in ("table.png", "compute.png")]
    assert sorted(pngs) == sorted(path.read_bytes() for path in figures if path.is_file())
    assert not (work / "tables" / "micro-lr-micro" / "compute.png").exists()  # a front of two points says nothing

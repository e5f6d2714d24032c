"""Publishing a table: every file written and logged to the MLflow table run of the experiment and invocation
(profile, command-line overrides), including the cells as an MLflow table artifact that reads back with the
CSV's cells, also after a re-render; another invocation keeps a table run of its own."""

from __future__ import annotations

import csv
import io
import math

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from ablations.results import FAILED, FINISHED, CellRun, TableLayout
from ablations.tables.publish import TABLE_ARTIFACT, TABLE_FILES, find_table_run, publish_grid, publish_runs, table_runs
from ablations.tables.vocab_compare import Table8Row
from ablations.tables.vocab_grids import table8_grid

LAYOUT = TableLayout(title="Tagging schemes", rows="task", columns="tagging", baseline="bio",
                     column_order=("bio", "io"), paper={"bc5-chem": {"bio": 93.33}})
RUNS = ([CellRun("bc5-chem", "bio", "bc5-chem", s, FINISHED, v) for s, v in enumerate([0.90, 0.91, 0.92])]
        + [CellRun("bc5-chem", "io", "bc5-chem", s, FINISHED, v) for s, v in enumerate([0.93, 0.935, 0.945])]
        + [CellRun("gad", "bio", "gad", 0, FINISHED, 0.8), CellRun("gad", "io", "gad", 0, FAILED, reason="OOM")])


def as_csv(field: str, value) -> str:
    """A value read back from the MLflow table, written as table.csv writes it. JSON has no nullable
    boolean: pandas reads a true/false/null column back as 1.0/0.0/NaN."""
    value = value.item() if hasattr(value, "item") else value  # numpy scalars
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool) or field in ("significant", "best", "n_too_small", "fixed_model_significant"):
        return str(bool(value)).lower()
    return repr(round(value, 6)) if isinstance(value, float) else str(value)


def cells(table) -> list[dict[str, str]]:
    return [{k: as_csv(k, v) for k, v in row.items()} for row in table.to_dict("records")]


def load_table(uri: str, run_id: str):
    """`load_table` finds the runs through the fluent API's store: point it at this one, then unset it
    (None: no store set, as before the test; `store` removed $MLFLOW_TRACKING_URI, restored after)."""
    client = MlflowClient(uri)
    mlflow.set_tracking_uri(uri)
    try:
        return client.load_table(client.get_run(run_id).info.experiment_id, TABLE_ARTIFACT, run_ids=[run_id])
    finally:
        mlflow.set_tracking_uri(None)


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return f"sqlite:///{tmp_path / 'mlruns.db'}", tmp_path


@pytest.mark.slow
def test_the_table_run_holds_every_file_and_the_cells_as_an_mlflow_table(store):
    uri, tmp = store
    out = tmp / "tables" / "tagging"
    first = publish_runs("tagging", LAYOUT, RUNS, uri, out, tmp / "mlartifacts")
    again = publish_runs("tagging", LAYOUT, RUNS, uri, out, tmp / "mlartifacts")  # a re-render: the same run
    assert again.run_id == first.run_id == find_table_run(uri, "tagging").info.run_id
    assert sorted(p.name for p in out.iterdir()) == sorted(TABLE_FILES)
    logged = {a.path for a in MlflowClient(uri).list_artifacts(first.run_id)}
    assert logged == {*TABLE_FILES, TABLE_ARTIFACT}

    expected = list(csv.DictReader(io.StringIO((out / "table.csv").read_text())))
    table = load_table(uri, first.run_id)
    assert list(table.columns) == list(expected[0])
    assert cells(table) == expected  # once
    io_row = next(r for r in expected if (r["row"], r["column"]) == ("bc5-chem", "io"))
    assert io_row["p_value"] != "" and io_row["significant"] == "true"  # the test's numbers are in it too


@pytest.mark.slow
def test_a_vocabulary_table_logs_its_records(store):
    uri, tmp = store
    rows = [Table8Row("biosses", 78.2, 64.6, 80.7, 61.6), Table8Row("hoc", 360.9, 294.5, None, None)]
    grid = table8_grid(rows, "bert-base-uncased", "pubmedbert-uncased")
    published = publish_grid("lengths", grid, uri, tmp / "out", tmp / "mlartifacts", seconds=1.5)
    table = load_table(uri, published.run_id)
    expected = list(csv.DictReader(io.StringIO((tmp / "out" / "table.csv").read_text())))
    assert cells(table) == expected
    assert [(r["row"], r["column"], r["mean"]) for r in expected][:2] == [
        ("biosses", "bert-base-uncased", "78.2"), ("biosses", "pubmedbert-uncased", "64.6")]
    markdown = (tmp / "out" / "table.md").read_text()  # the title first, what produced it in the footer
    assert markdown.startswith("**Table 8") and "\n---\n\n- experiment: lengths\n" in markdown


def artifact_text(uri: str, run_id: str, name: str, tmp) -> str:
    from mlflow.artifacts import download_artifacts

    return open(download_artifacts(run_id=run_id, artifact_path=name, dst_path=str(tmp), tracking_uri=uri)).read()


@pytest.mark.slow
def test_each_invocation_keeps_its_own_table_run(store):
    """Rendering another profile (or other overrides) no longer overwrites the experiment's table run: each
    invocation has its run, with its own profile tag, counts and files; re-rendering one updates only it."""
    uri, tmp = store
    micro = publish_runs("tagging", LAYOUT, RUNS, uri, tmp / "micro", tmp / "mlartifacts", profile="micro",
                         invocation="micro-e3b0c442")
    not_run = [CellRun(r.row, r.column, r.task, r.seed, "NOT_RUN") for r in RUNS]
    mini = publish_runs("tagging", LAYOUT, not_run, uri, tmp / "mini", tmp / "mlartifacts", profile="mini",
                        tags={"cli_overrides": "finetune.lr=1e-4"}, invocation="mini-1234abcd")
    again = publish_runs("tagging", LAYOUT, RUNS, uri, tmp / "micro", tmp / "mlartifacts", profile="micro",
                         invocation="micro-e3b0c442")
    assert again.run_id == micro.run_id != mini.run_id
    runs = {r.info.run_id: r for r in table_runs(uri, "tagging")}
    assert set(runs) == {micro.run_id, mini.run_id}
    assert [(runs[i].data.tags["profile"], runs[i].data.tags["invocation"]) for i in (micro.run_id, mini.run_id)] \
        == [("micro", "micro-e3b0c442"), ("mini", "mini-1234abcd")]
    assert runs[mini.run_id].data.tags["cli_overrides"] == "finetune.lr=1e-4"
    assert runs[micro.run_id].data.metrics["runs_finished"] == 7 and runs[mini.run_id].data.metrics["runs_not_run"] == 8
    assert "91.0 ± 1.0" in artifact_text(uri, micro.run_id, "table.md", tmp)
    assert "91.0 ±" not in artifact_text(uri, mini.run_id, "table.md", tmp)
    assert find_table_run(uri, "tagging", "mini-1234abcd").info.run_id == mini.run_id
    assert find_table_run(uri, "tagging", "base-e3b0c442", "base") is None


@pytest.mark.slow
def test_a_table_run_from_before_invocations_is_taken_over_by_its_profile(store):
    """A store whose table run has no `invocation` tag (rendered before tables were kept per invocation):
    the next rendering of that profile updates it rather than adding a second run for the same table."""
    uri, tmp = store
    old = publish_runs("tagging", LAYOUT, RUNS, uri, tmp / "out", tmp / "mlartifacts", profile="micro")
    assert "invocation" not in find_table_run(uri, "tagging").data.tags
    other = publish_runs("tagging", LAYOUT, RUNS, uri, tmp / "out", tmp / "mlartifacts", profile="mini",
                         invocation="mini-e3b0c442")
    now = publish_runs("tagging", LAYOUT, RUNS, uri, tmp / "out", tmp / "mlartifacts", profile="micro",
                       invocation="micro-e3b0c442")
    assert now.run_id == old.run_id != other.run_id
    assert find_table_run(uri, "tagging", "micro-e3b0c442").data.tags["invocation"] == "micro-e3b0c442"
    assert len(table_runs(uri, "tagging")) == 2

"""Tables from cell runs, checked by hand: means and stds, bolding, the paired t-test, the BLURB row, missing
cells with their reasons, and that all three formats parse."""

from __future__ import annotations

import csv
import io
import math
import re

import pytest

from ablations.results import BLOCKED, FAILED, FINISHED, NOT_RUN, RUNNING, CellRun, TableLayout
from ablations.tables.plot import bar_figure, plot
from ablations.tables.render import render
from ablations.tables.stats import table_data
from bioablate_core.errors import ConfigError, UnknownNameError
from datamodules.metrics import blurb_score

LAYOUT = TableLayout(
    title="Tagging schemes", rows="task", columns="tagging", baseline="bio",
    column_order=("bio", "bioul", "io"), column_labels={"bio": "BIO", "bioul": "BIOUL", "io": "IO"},
    paper={"bc5-chem": {"bio": 93.33, "bioul": 93.37, "io": 93.11}})


def finished(row, column, seed, value, task=None):
    return CellRun(row, column, task or row, seed, FINISHED, value, run_id=f"{row}-{column}-{seed}")


def rows_of(csv_text: str) -> dict[tuple[str, str], dict[str, str]]:
    return {(r["row"], r["column"]): r for r in csv.DictReader(io.StringIO(csv_text))}


def md_cell(markdown: str, row: str, column_index: int) -> str:
    for line in markdown.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if cells and cells[0] in (row, f"**{row}**"):
            return cells[1 + column_index]
    raise AssertionError(f"row {row} not in\n{markdown}")


# bio 90, 91, 92; bioul 85, 86, 88; io 93, 93.5, 94.5 (×100 of the values below)
RUNS = ([finished("bc5-chem", "bio", s, v) for s, v in enumerate([0.90, 0.91, 0.92])]
        + [finished("bc5-chem", "bioul", s, v) for s, v in enumerate([0.85, 0.86, 0.88])]
        + [finished("bc5-chem", "io", s, v) for s, v in enumerate([0.93, 0.935, 0.945])])


def test_mean_and_sample_std_over_seeds_times_100():
    table = rows_of(render(LAYOUT, RUNS, "csv"))
    bio, bioul = table[("bc5-chem", "bio")], table[("bc5-chem", "bioul")]
    assert float(bio["mean"]) == pytest.approx(91.0) and float(bio["std"]) == pytest.approx(1.0)
    # 85, 86, 88: mean 86.333, squared deviations 1.778 + 0.111 + 2.778 = 4.667, / (3 - 1) -> std 1.5275
    assert float(bioul["mean"]) == pytest.approx(86.3333, abs=1e-4)
    assert float(bioul["std"]) == pytest.approx(math.sqrt(4.6667 / 2), abs=1e-4)
    assert bio["n"] == "3" and bio["paper"] == "93.33"
    md = render(LAYOUT, RUNS, "markdown")
    assert md_cell(md, "bc5-chem", 0) == "91.0 ± 1.0" and md_cell(md, "*paper*", 0) == "93.3"
    assert "mean ± sd over 3 seeds" in md  # one n for every cell: said once, in the caption


def test_best_per_row_bold_ties_both_bold():
    md = render(LAYOUT, RUNS, "markdown")
    assert md_cell(md, "bc5-chem", 2).startswith("**93.7 ± 0.8**")
    assert "**" not in md_cell(md, "bc5-chem", 0) and "**" not in md_cell(md, "bc5-chem", 1)
    assert r"\textbf{93.7 $\pm$ 0.8}" in render(LAYOUT, RUNS, "latex")
    tie = [finished("t", c, s, 0.5 + 0.01 * s) for c in ("bio", "io") for s in range(2)]
    layout = TableLayout(title="tie", rows="task", columns="x", column_order=("bio", "io"))
    cells = table_data(layout, [CellRun(r.row, r.column, "bc5-chem", r.seed, r.status, r.value) for r in tie])
    assert cells.cell("t", "bio").best and cells.cell("t", "io").best


def test_paired_t_test_against_the_baseline_matches_the_hand_computation():
    # bioul - bio per seed: -5, -5, -4 -> mean -4.667, sd 0.5774, t = mean / (sd / sqrt 3) = -14.0, df 2;
    # for 2 degrees of freedom P(|T| > t) = 1 - t / sqrt(t^2 + 2)
    table = rows_of(render(LAYOUT, RUNS, "csv"))
    t = 14.0
    assert float(table[("bc5-chem", "bioul")]["p_value"]) == pytest.approx(1 - t / math.sqrt(t * t + 2), abs=1e-6)
    assert table[("bc5-chem", "bioul")]["significant"] == "true"
    # io - bio: 3, 2.5, 2.5 -> t = 2.667 / (0.2887 / sqrt 3) = 16.0
    assert float(table[("bc5-chem", "io")]["p_value"]) == pytest.approx(1 - 16 / math.sqrt(258), abs=1e-6)
    assert table[("bc5-chem", "bio")]["p_value"] == ""  # the baseline is not tested against itself
    md = render(LAYOUT, RUNS, "markdown")
    assert "±" in md_cell(md, "bc5-chem", 1) and "†" in md_cell(md, "bc5-chem", 1)
    assert "†" not in md_cell(md, "bc5-chem", 0)
    assert "paired t-test over seeds" in md and "p < 0.05" in md
    assert md_cell(md, "bc5-chem", 3) == "-4.7" and md_cell(md, "*paper*", 3) == "+0.0"  # Δ BIOUL: ours, the paper's


def test_no_mark_above_threshold_and_no_test_below_two_paired_seeds():
    runs = [finished("gad", "bio", s, v) for s, v in enumerate([0.80, 0.82, 0.81])]
    # io - bio: 1, -2, 2 -> mean 0.333, sd sqrt(8.667 / 2) = 2.082, t = 0.333 / (2.082 / sqrt 3) = 0.2774
    runs += [finished("gad", "io", s, v) for s, v in enumerate([0.81, 0.80, 0.83])]
    runs += [finished("gad", "bioul", 0, 0.99), CellRun("gad", "bioul", "gad", 1, NOT_RUN)]
    data = table_data(LAYOUT, runs)
    t = (1 / 3) / (math.sqrt(26 / 3 / 2) / math.sqrt(3))
    assert data.cell("gad", "io").p_value == pytest.approx(1 - t / math.sqrt(t * t + 2), abs=1e-6)
    assert not data.cell("gad", "io").significant
    assert data.cell("gad", "bioul").p_value is None
    md = render(LAYOUT, runs, "markdown")
    assert "†" not in md.split("\n\n")[2]  # the table itself: no mark anywhere
    bioul = md_cell(md, "gad", 1)
    footnotes = dict(re.findall(r"^\[(\d+)\] (.*)$", md, re.M))
    assert any("fewer than 2 seeds finished in both" in footnotes[n] for n in re.findall(r"\[(\d+)\]", bioul))


def test_blurb_row_equals_blurb_score_of_the_per_task_means():
    layout = TableLayout(title="BLURB", rows="task", columns="model", baseline="a", blurb_row=True)
    values = {  # task -> column -> per-seed values; two NER tasks and one RE task, one QA task
        "bc5-chem": {"a": [0.90, 0.92], "b": [0.91, 0.95]},
        "ncbi-disease": {"a": [0.80, 0.84], "b": [0.82, 0.86]},
        "chemprot": {"a": [0.70, 0.74], "b": [0.60, 0.66]},
        "pubmedqa": {"a": [0.50, 0.60], "b": [0.55, 0.56]},
    }
    runs = [finished(t, c, s, v) for t, cols in values.items() for c, vs in cols.items() for s, v in enumerate(vs)]
    types = {"bc5-chem": "ner", "ncbi-disease": "ner", "chemprot": "re", "pubmedqa": "qa"}
    table = rows_of(render(layout, runs, "csv"))
    for column in ("a", "b"):
        means = {t: 100 * sum(cols[column]) / 2 for t, cols in values.items()}
        expected = blurb_score(means, types)["score"]
        assert float(table[("BLURB score", column)]["mean"]) == pytest.approx(expected, abs=1e-5)
    # by hand for a: ner (91 + 82) / 2 = 86.5, re 72, qa 55 -> (86.5 + 72 + 55) / 3 = 71.1667
    assert float(table[("BLURB score", "a")]["mean"]) == pytest.approx(71.1667, abs=1e-4)
    # per-seed BLURB for a: seed 0 (85 + 70 + 50) / 3 = 68.333, seed 1 (88 + 74 + 60) / 3 = 74.0
    assert float(table[("BLURB score", "a")]["std"]) == pytest.approx(abs(74 - 68.3333) / math.sqrt(2), abs=1e-3)
    assert "**BLURB score**" in render(layout, runs, "markdown")
    with pytest.raises(ConfigError, match="blurb_row needs `rows: task`"):
        table_data(TableLayout(title="x", rows="model", columns="task", blurb_row=True), runs)


def test_missing_cells_are_shown_with_their_reasons():
    runs = [finished("ddi", "bio", 0, 0.5), finished("ddi", "bio", 1, 0.6),
            finished("ddi", "bioul", 0, 0.7),
            CellRun("ddi", "bioul", "ddi", 1, FAILED, reason="RuntimeError: CUDA out of memory"),
            CellRun("ddi", "io", "ddi", 0, RUNNING), CellRun("ddi", "io", "ddi", 1, BLOCKED,
                                                              reason="pretraining stage 'pubmed-wwm' unfinished"),
            CellRun("gad", "bio", "gad", 0, NOT_RUN), CellRun("gad", "bioul", "gad", 0, NOT_RUN),
            CellRun("gad", "io", "gad", 0, NOT_RUN)]
    md = render(LAYOUT, runs, "markdown")
    footnotes = dict(re.findall(r"^\[(\d+)\] (.*)$", md, re.M))
    text = "\n".join(footnotes.values())
    assert "FAILED: RuntimeError: CUDA out of memory" in text
    assert "NOT_RUN: never started" in text and "RUNNING: started but not finished" in text
    assert "BLOCKED: pretraining stage 'pubmed-wwm' unfinished" in text
    assert re.search(r"\[\d\]", md_cell(md, "ddi", 1)) and md_cell(md, "ddi", 5) == "2, 1/2"  # the n column
    io_cell = md_cell(md, "ddi", 2)
    assert io_cell.startswith("— (") and "running" in io_cell and "blocked" in io_cell
    assert md_cell(md, "gad", 0).startswith("— (not run")
    table = rows_of(render(LAYOUT, runs, "csv"))
    assert len(table) == 6  # every planned cell is a row, none dropped
    assert table[("ddi", "bioul")]["n"] == "1" and table[("ddi", "bioul")]["n_planned"] == "2"
    assert "FAILED: RuntimeError: CUDA out of memory" in table[("ddi", "bioul")]["missing"]
    assert table[("gad", "io")]["mean"] == "" and "NOT_RUN" in table[("gad", "io")]["missing"]
    latex = render(LAYOUT, runs, "latex")
    assert "CUDA out of memory" in latex and "not run" in latex


def test_tasks_sharing_a_row_label_are_averaged_per_seed():
    layout = TableLayout(title="NER", rows="task", columns="head", column_order=("linear",))
    runs = [finished("NER", "linear", 0, 0.8, "bc5-chem"), finished("NER", "linear", 0, 0.6, "ncbi-disease"),
            finished("NER", "linear", 1, 0.9, "bc5-chem"), CellRun("NER", "linear", "ncbi-disease", 1, NOT_RUN)]
    data = table_data(layout, runs)
    cell = data.cell("NER", "linear")
    assert cell.values == {0: pytest.approx(70.0)} and cell.n_planned == 2  # seed 1 lacks ncbi-disease
    md = render(layout, runs, "markdown")
    assert md_cell(md, "NER", 0).startswith("70.0") and md_cell(md, "NER", 1) == "1/2"
    assert "combines 2 tasks (bc5-chem, ncbi-disease)" in md


def test_all_three_formats_parse():
    runs = RUNS + [CellRun("gad", "io", "gad", 0, FAILED, reason="ValueError: a & b_c 50% {x} | y")]
    runs += [finished("gad", "bio", 0, 0.8), finished("gad", "bioul", 0, 0.75)]
    md = render(LAYOUT, runs, "markdown")
    table_lines = [line for line in md.splitlines() if line.startswith("|")]
    assert len(table_lines) == 2 + 3  # header and rule, bc5-chem and its paper row, gad
    assert {len(re.findall(r"(?<!\\)\|", line)) for line in table_lines} == {8}  # 3 schemes, 2 Δ, n

    rows = list(csv.reader(io.StringIO(render(LAYOUT, runs, "csv"))))
    assert rows[0][:7] == ["row", "column", "tasks", "metric", "mean", "std", "n"]
    assert "p_value" in rows[0] and "paper" in rows[0]
    assert len(rows) == 1 + 6 and {len(r) for r in rows} == {len(rows[0])}

    latex = render(LAYOUT, runs, "latex")
    assert latex.count(r"\begin{tabular}") == latex.count(r"\end{tabular}") == 1
    assert re.findall(r"\\begin\{(\w+)\}", latex) == ["table", "tabular", "minipage"]
    assert re.findall(r"\\end\{(\w+)\}", latex) == ["tabular", "minipage", "table"]
    depth = 0
    for ch in re.sub(r"\\[{}]", "", latex):  # escaped braces are text
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0
    assert depth == 0
    body = latex.split(r"\begin{tabular}")[1].split(r"\end{tabular}")[0]
    spec = re.match(r"\{@\{\}(\w+)@\{\}\}", body).group(1)
    assert spec == "lrrrrrr"  # one column per scheme, a Δ per variant, n; the paper's numbers in a row of their own
    data_rows = [line for line in body.splitlines() if line.endswith(r"\\")]
    for line in data_rows:  # the header included: every row has every column
        assert len(re.findall(r"(?<!\\)&", line)) == len(spec) - 1, line
    assert data_rows[1].split(" & ") == ["task", "BIO", "BIOUL", "IO", "BIOUL", r"$\Delta$ IO", "n \\\\"]
    assert r"{\scriptsize\itshape paper} & {\scriptsize 93.3} & {\scriptsize 93.4} & {\scriptsize 93.1}" in latex
    assert r"a \& b\_c 50\% \{x\} | y" in latex


def test_user_mistakes_are_one_line_errors():
    with pytest.raises(UnknownNameError, match="unknown table format 'html'; known: csv, latex, markdown"):
        render(LAYOUT, RUNS, "html")
    with pytest.raises(ConfigError, match="baseline 'crf' is not one of the table's columns"):
        render(TableLayout(title="x", rows="task", columns="head", baseline="crf"), RUNS)


def test_plot_has_one_bar_per_cell_with_a_value(tmp_path):
    from matplotlib.image import imread

    runs = RUNS + [CellRun("gad", "io", "gad", 0, NOT_RUN), finished("gad", "bio", 0, 0.8)]
    data = table_data(LAYOUT, runs)
    ax = bar_figure(data).axes[0]
    heights = sorted(round(p.get_height(), 4) for p in ax.patches)
    assert heights == sorted([91.0, round(86.3333333, 4), round(93.6666667, 4), 80.0])  # gad: bio only
    assert [t.get_text() for t in ax.get_xticklabels()] == ["bc5-chem\n(entity F1)", "gad\n(F1)"]  # and its measure
    path = plot(data, tmp_path / "t.png")[0]
    assert path.name == "t.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width, _ = imread(path).shape
    assert width > 400 and height > 300
    assert "— (no runs [" in md_cell(render(LAYOUT, runs, "markdown"), "gad", 1)


# ---------------------------------------------------------------------------------------------------
# `bioablate table`


def test_table_command_user_mistakes_are_one_line_errors(capsys, tmp_path):
    from ablations.cli import main

    assert main(["table", str(tmp_path / "nowhere.yaml"), "--format", "html"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("bioablate: error: unknown table format 'html'; known: csv")
    assert main(["table", str(tmp_path / "nowhere.yaml"), "--work-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(tmp_path / "nowhere.yaml") in err


@pytest.mark.slow
def test_table_command_renders_a_vocab_experiment(capsys, tmp_path, data_dir):
    """Table 1 from the staged vocabularies: printed, written in every format, logged to one MLflow run."""
    from mlflow.tracking import MlflowClient

    from ablations.cli import main
    from ablations.tables import find_table_run

    spec = tmp_path / "terms.yaml"
    spec.write_text("name: terms\nkind: vocab\nvocab: {table: terms, vocabs: [bert-base-uncased, "
                    "pubmedbert-uncased]}\ntable: {title: 'Table 1: term splits'}\n")
    work = tmp_path / "work"
    folder = work / "tables" / "terms-micro"
    texts = ["bundle.jsonl", "table.csv", "table.md", "table.tex"]  # the bundle: what --from renders from
    without = ["table", str(spec), "--work-dir", str(work), "--data-dir", str(data_dir), "--format", "csv"]
    assert main(without) == 0  # the micro profile draws no figure
    assert sorted(p.name for p in folder.iterdir()) == texts
    assert "no figures (figures=false)" in capsys.readouterr().err
    argv = [*without, "figures=true"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = {(r["row"], r["column"]): r for r in csv.DictReader(io.StringIO(out))}
    assert rows[("lymphoma", "bert-base-uncased")]["ours"] == "l-ym-ph-oma"
    assert rows[("lymphoma", "bert-base-uncased")]["match"] == "true"
    assert rows[("lymphoma", "pubmedbert-uncased")]["pieces"] == "1"
    assert sorted(p.name for p in folder.iterdir()) == sorted([*texts, "table.pdf", "table.png", "table.svg"])
    md = (folder / "table.md").read_text()
    assert "- experiment: terms" in md and "| lymphoma | disease | l-ym-ph-oma | ✓ |" in md
    # the y tick labels, as drawn (the SVG keeps text as <text> elements)
    y_ticks = re.compile(r'<g id="ytick_\d+">.*?<text[^>]*>([^<]*)</text>', re.DOTALL)
    assert y_ticks.findall((folder / "table.svg").read_text())[0] == "0"  # bars start at 0 (1 to 7 pieces)
    assert main(argv) == 0  # re-render: the same MLflow run
    uri = f"sqlite:///{work / 'mlruns.db'}"
    run = find_table_run(uri, "terms")  # the newest: this invocation's (figures=true)
    runs = MlflowClient(uri).search_runs([run.info.experiment_id], "tags.cli_overrides = 'figures=true'")
    assert [r.info.run_id for r in runs] == [run.info.run_id] and run.data.tags["table_kind"] == "vocab"
    assert main(without) == 0  # without figures again: none of the earlier render's is left beside the table
    assert sorted(p.name for p in folder.iterdir()) == texts


def test_with_tasks_as_columns_the_best_variant_of_each_task_is_bold():
    layout = TableLayout(title="Relation encodings", rows="encoding", columns="task")
    runs = [finished(row, task, 0, v, task) for row, task, v in [
        ("dummify/cls", "chemprot", 0.77), ("dummify/cls", "ddi", 0.82),
        ("markers/cls", "chemprot", 0.78), ("markers/cls", "ddi", 0.81)]]
    data = table_data(layout, runs)
    assert [data.cell(r, c).best for r in data.rows for c in data.columns] == [False, True, True, False]
    md = render(layout, runs, "markdown")
    assert "**Bold**: the best mean of its column." in md and "combines" not in md

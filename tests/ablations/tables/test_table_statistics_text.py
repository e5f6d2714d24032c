"""How the statistics and the cost show in a rendered table (issues 35 and 38): LaTeX in booktabs, BIOSSES
named only where the table has it, cost rows with `table.cost`, the Pareto front of the score-vs-compute
figure, and one-line errors for an unknown correction on the command line and in the YAML."""

from __future__ import annotations

import csv
import dataclasses
import io

import pytest

from ablations.cli import main
from ablations.experiment import load_experiment
from ablations.results import FINISHED, CellRun, TableLayout
from ablations.tables.cost import add_costs
from ablations.tables.pareto import column_points, pareto_front, plot_compute
from ablations.tables.render import render_data
from ablations.tables.stats import table_data
from bioablate_core.errors import ConfigError

LAYOUT = TableLayout(title="t", rows="task", columns="head", baseline="linear", column_order=("linear", "lstm"))


def run(task, column, seed, value, flops=None):
    compute = {} if flops is None else {"system/compute/flops": flops, "system/compute/device_seconds": 10.0 * seed,
                                        "system/compute/peak_memory_bytes": 2.0 ** 30 * seed,
                                        "system/compute/device": "CPU X"}
    return CellRun(task, column, task, seed, FINISHED, value, run_id=f"{task}{column}{seed}", compute=compute)


RUNS = [run(t, c, s, 0.5 + 0.01 * s + (0.02 if c == "lstm" else 0), 1e12 * (2 if c == "lstm" else 1))
        for t in ("bc5-chem", "gad") for c in ("linear", "lstm") for s in (1, 2, 3)]


def test_latex_uses_booktabs_rules_not_hline():
    tex = render_data(table_data(LAYOUT, RUNS), "latex")
    assert r"\toprule" in tex and r"\midrule" in tex and r"\bottomrule" in tex and r"\hline" not in tex
    assert "booktabs" in tex


def test_biosses_is_named_only_where_the_table_has_it():
    assert "BIOSSES" not in render_data(table_data(LAYOUT, RUNS))
    with_biosses = RUNS + [run("biosses", c, s, 0.8, 1e12) for c in ("linear", "lstm") for s in (1, 2, 3)]
    assert "Pearson for BIOSSES" in render_data(table_data(LAYOUT, with_biosses))


def test_cost_rows_sum_each_column_and_count_its_pretraining_apart():
    from dataclasses import replace

    data = table_data(replace(LAYOUT, cost=True), RUNS)
    stage = {"system/compute/flops": 5e15, "system/compute/device_seconds": 3600.0,
             "system/compute/peak_memory_bytes": 2.0 ** 31}
    add_costs(data, RUNS, {"lstm": [("pubmed", stage)]})
    md = render_data(data)
    # linear: 6 runs x 1 TFLOP, device-seconds 10 + 20 + 30 per task -> 120 s; lstm: 12 TFLOP and a 5 PFLOP stage
    assert "| *compute: fine-tuning* | 6 TFLOP, 0.0333 device-h | 12 TFLOP, 0.0333 device-h |" in md
    assert "| *compute: pretraining* | none | 5 PFLOP, 1 device-h [pubmed] |" in md
    assert "| *peak memory* | 3.00 GiB | 3.00 GiB |" in md and "Device: CPU X." in md
    rows = {(r["row"], r["column"]): r for r in csv.DictReader(io.StringIO(render_data(data, "csv")))}
    assert float(rows[("gad", "lstm")]["flops"]) == 6e12 and float(rows[("gad", "lstm")]["pretrain_flops"]) == 5e15
    assert rows[("gad", "linear")]["pretrain_flops"] == ""
    # without table.cost the rows stay out of the markdown, the CSV keeps the numbers
    plain = table_data(LAYOUT, RUNS)
    add_costs(plain, RUNS)
    assert "compute: fine-tuning" not in render_data(plain) and "flops" in render_data(plain, "csv")


def test_pareto_front_keeps_the_columns_nothing_beats_on_both(tmp_path):
    points = [("a", 1.0, 50.0), ("b", 2.0, 60.0), ("c", 3.0, 55.0), ("d", 4.0, 70.0), ("e", 2.0, 40.0)]
    assert [p[0] for p in pareto_front(points)] == ["a", "b", "d"]
    data = table_data(LAYOUT, RUNS)
    add_costs(data, RUNS, {"lstm": [("pubmed", {"system/compute/flops": 5e15})]})
    assert [(label, flops) for label, flops, _ in column_points(data)] == [("linear", 6e12), ("lstm", 12e12 + 5e15)]
    (tmp_path / "compute.png").write_bytes(b"an earlier render's")
    assert plot_compute(data, tmp_path / "table") == [] and not list(tmp_path.iterdir())  # a front of two points
    three = dataclasses.replace(LAYOUT, column_order=("linear", "lstm", "crf"))
    runs = RUNS + [run(t, "crf", s, 0.4, 3e12) for t in ("bc5-chem", "gad") for s in (1, 2, 3)]
    data = table_data(three, runs)
    add_costs(data, runs, {})
    assert [p.name for p in plot_compute(data, tmp_path / "table")] == ["compute.png", "compute.svg", "compute.pdf"]


def test_an_unknown_correction_is_one_line(capsys, tmp_path):
    assert main(["table", "quickstart", "--correction", "holmm", "--work-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holmm" in err[0] and "holm" in err[0]


def test_an_unknown_table_correction_in_the_yaml_names_file_and_key(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("name: e\nmodels:\n  rb: {name_or_path: random-bert}\ntasks: [gad]\nseeds: 1\n"
                    "table: {rows: task, columns: model, correction: holmm}\n")
    with pytest.raises(ConfigError) as error:
        load_experiment(path, profile="micro")
    assert str(error.value).startswith(f"{path}: table.correction: unknown 'holmm' (did you mean 'holm'?)")


def test_the_compute_figure_keeps_its_labels_inside_and_apart():
    """Table 9's shape: four long column names, points close in compute (under a decade: linear ticks):
    each label inside the axes, clear of the other labels, the points and the front's line; x tick labels
    apart; the title without a word alone on a line."""
    from matplotlib.transforms import Bbox

    from ablations.tables.pareto import compute_figure

    labels = {"a": "Wiki+Books → PubMed, Wiki+Books vocab", "b": "Wiki+Books → PubMed, PubMed vocab",
              "c": "PubMed (half time)", "d": "PubMed"}
    layout = TableLayout(title="Table 9 (proxy): pretraining corpora and time, one dataset per task type",
                         rows="task", columns="model", column_order=tuple(labels), column_labels=labels)
    scores = {"a": 0.1545, "b": 0.1552, "c": 0.1439, "d": 0.1524}
    flops = {"a": 2.5e14, "b": 2.17e14, "c": 1.67e14, "d": 1.58e14}
    runs = [run("bc5-chem", c, s, scores[c], 1e9) for c in labels for s in (1, 2, 3)]
    data = table_data(layout, runs)
    add_costs(data, runs, {c: [("stage", {"system/compute/flops": f})] for c, f in flops.items()})
    fig = compute_figure(data)
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    ax = fig.axes[0]
    axes = ax.get_window_extent(renderer)
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert len(boxes) == 4 and all(axes.x0 <= b.x0 and b.x1 <= axes.x1 and axes.y0 <= b.y0 and b.y1 <= axes.y1
                                   for b in boxes)
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    [front] = [line for line in ax.lines if line.get_label() == "Pareto front"]
    xy = front.get_transform().transform(front.get_xydata())
    along = [a + (b - a) * t / 50 for a, b in zip(xy, xy[1:]) for t in range(51)]
    assert not [b for b in boxes for x, y in along if b.overlaps(Bbox.from_extents(x - 1, y - 1, x + 1, y + 1))]
    ticks = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text()]
    assert len(ticks) >= 2 and not any(a.overlaps(b) for a, b in zip(ticks, ticks[1:]))
    assert all(len(line.split()) >= 2 for line in ax.get_title().split("\n"))

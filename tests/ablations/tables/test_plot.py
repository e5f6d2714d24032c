"""A table's figure for papers: PNG (300 dpi), SVG and PDF (vector), a y axis that spans the data unless
zero-based is asked for, and both axes labelled."""

from __future__ import annotations

import pytest

from ablations.results import FINISHED, NOT_RUN, CellRun, TableLayout
from ablations.tables.plot import bar_figure, plot, y_limits
from ablations.tables.stats import table_data

LAYOUT = TableLayout(title="Tagging schemes", rows="task", columns="tagging", column_order=("bio", "io"),
                     metric="f1", paper={"bc5-chem": {"bio": 93.33}})
# bio 90, 91, 92 (mean 91, std 1); io 93, 94, 95 (mean 94, std 1); paper 93.33; gad io never ran
RUNS = ([CellRun("bc5-chem", "bio", "bc5-chem", s, FINISHED, v) for s, v in enumerate([0.90, 0.91, 0.92])]
        + [CellRun("bc5-chem", "io", "bc5-chem", s, FINISHED, v) for s, v in enumerate([0.93, 0.94, 0.95])]
        + [CellRun("gad", "bio", "gad", 0, FINISHED, 0.88), CellRun("gad", "io", "gad", 0, NOT_RUN)])


def test_the_figure_is_written_as_png_svg_and_pdf_the_last_two_vector(tmp_path):
    from matplotlib.image import imread

    paths = plot(table_data(LAYOUT, RUNS), tmp_path / "table")
    assert [p.name for p in paths] == ["table.png", "table.svg", "table.pdf"]
    png, svg, pdf = (p.read_bytes() for p in paths)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    height, width, _ = imread(paths[0]).shape
    assert (width, height) == (6 * 300, int(4.5 * 300))  # 6 x 4.5 inches at 300 dpi
    assert b"<svg" in svg and b"<path" in svg and b"<image" not in svg  # drawn, not a bitmap inside
    assert pdf.startswith(b"%PDF") and b"/Subtype /Image" not in pdf


def test_the_y_axis_spans_the_data_not_zero():
    ax = bar_figure(table_data(LAYOUT, RUNS)).axes[0]
    low, high = ax.get_ylim()
    # the data: 90..92 (bio), 93..95 (io), 88 (gad bio), the paper's 93.33
    assert 80.0 < low < 88.0 and 95.0 < high < 100.0
    assert (low, high) == pytest.approx(y_limits(table_data(LAYOUT, RUNS)))
    missing = [line for line in ax.lines if line.get_marker() == "x"]
    assert [list(line.get_ydata()) for line in missing] == [[low]]  # the missing cell's mark is on the axis


def test_zero_based_starts_the_y_axis_at_zero():
    low, high = bar_figure(table_data(LAYOUT, RUNS), zero_based=True).axes[0].get_ylim()
    assert low == 0.0 and 95.0 < high < 110.0


def test_both_axes_are_labelled():
    ax = bar_figure(table_data(LAYOUT, RUNS)).axes[0]
    assert ax.get_xlabel() == "task"
    assert ax.get_ylabel() == "test f1 ×100 (mean ± std over seeds)"
    assert bar_figure(table_data(LAYOUT, RUNS), ylabel="word pieces").axes[0].get_ylabel() == "word pieces"


def test_a_single_value_still_gets_a_range():
    runs = [CellRun("gad", "bio", "gad", 0, FINISHED, 0.5)]
    low, high = y_limits(table_data(LAYOUT, runs))
    assert low < 50.0 < high and low > 0.0
    assert y_limits(table_data(LAYOUT, [CellRun("gad", "bio", "gad", 0, NOT_RUN)])) is None

"""A table's figure for papers: PNG (300 dpi), SVG and PDF (vector), a y axis from 0, the table's title,
both axes labelled (the metric named), and what journals check: no text over other text, the legend or a
line (measured on the laid-out figure), value labels readable on hatched bars, TrueType fonts in the PDF,
text as text in the SVG, series told apart in grayscale."""

from __future__ import annotations

import csv
import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from matplotlib.container import BarContainer

from ablations.results import FINISHED, NOT_RUN, CellRun, TableLayout
from ablations.tables.plot import bar_figure, luminance, plot, y_limits
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


def test_the_bars_start_at_zero_however_close_the_values():
    """Bars from 90 to 95 on an axis from 80 read as a doubling: a bar's height is its value."""
    ax = bar_figure(table_data(LAYOUT, RUNS)).axes[0]
    low, high = ax.get_ylim()
    # the data: 90..92 (bio), 93..95 (io), 88 (gad bio), the paper's 93.33
    assert low == 0.0 and 95.0 < high < 101.0
    assert (low, high) == pytest.approx(y_limits(table_data(LAYOUT, RUNS)))
    bars = [patch for c in ax.containers if isinstance(c, BarContainer) for patch in c.patches]
    assert bars and all(bar.get_y() == 0.0 for bar in bars)
    missing = [line for line in ax.lines if line.get_marker() == "x"]
    assert [list(line.get_ydata()) for line in missing] == [[0.0]]  # the missing cell's mark is on the axis


def test_negative_values_take_the_axis_below_zero_and_a_line_marks_zero():
    runs = [CellRun("biosses", c, "biosses", s, FINISHED, v + 0.01 * s) for c, v in (("bio", -0.3), ("io", 0.4))
            for s in range(2)]
    ax = bar_figure(table_data(LAYOUT, runs)).axes[0]
    low, high = ax.get_ylim()
    assert low < -30.0 < 40.0 < high < 50.0
    assert [line.get_ydata()[0] for line in ax.lines if line.get_linestyle() == "-"] == [0.0]


def test_every_value_label_lies_within_its_bar_below_its_error_bar_and_the_papers_line():
    """Issue 38: a value label drawn above the paper's line ("71.1" at 93) reads as the paper's number."""
    from matplotlib.transforms import Bbox

    fig = bar_figure(table_data(REALISTIC, _realistic_runs()))
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    bars = [patch for c in ax.containers if isinstance(c, BarContainer) for patch in c.patches]
    labels = list(ax.texts)
    assert len(labels) >= len(bars) // 2  # most bars keep theirs
    axes = ax.get_window_extent(renderer)
    lines = _line_boxes(fig)
    for label in labels:
        box = label.get_window_extent(renderer)
        [bar] = [b for b in bars if b.get_x() <= label.xy[0] <= b.get_x() + b.get_width()]
        drawn = Bbox.intersection(bar.get_window_extent(renderer), axes)
        assert drawn.x0 <= box.x0 and box.x1 <= drawn.x1
        inside = drawn.y0 - 1 <= box.y0 and box.y1 <= drawn.y1 + 1
        assert inside or box.y0 >= drawn.y1, label.get_text()  # in its bar, or above it (a short bar)
        assert float(label.get_text()) == pytest.approx(bar.get_height(), abs=0.05)
        assert not [line for line in lines if box.overlaps(line)], label.get_text()


def test_std_bars_stop_at_zero_and_a_single_seed_says_no_mean_and_std():
    runs = [CellRun("gad", "bio", "gad", s, FINISHED, v) for s, v in enumerate([0.0, 0.01, 0.2])]
    ax = bar_figure(table_data(LAYOUT, runs)).axes[0]
    [errors] = [c for c in ax.collections if c.get_segments()]
    assert min(y for segment in errors.get_segments() for _, y in segment) == pytest.approx(0.0)
    single = bar_figure(table_data(LAYOUT, [CellRun("gad", "bio", "gad", 0, FINISHED, 0.5)])).axes[0]
    assert "mean" not in single.get_ylabel() and "std" not in single.get_ylabel()


def test_a_long_y_label_fits_on_two_lines():
    layout = dataclasses.replace(REALISTIC, metric="score")
    fig = bar_figure(table_data(layout, _realistic_runs()))
    fig.set_size_inches(6, 3)  # a short axis: more wrapping
    label = bar_figure(table_data(layout, _realistic_runs())).axes[0].get_ylabel()
    assert label.count("\n") <= 1, label


def test_both_axes_are_labelled():
    fig = bar_figure(table_data(LAYOUT, RUNS))
    ax = fig.axes[0]
    assert ax.get_xlabel() == "task"
    assert ax.get_ylabel() == "test f1 ×100"  # one metric; what the bars are, the legend says
    assert "mean ± std over seeds" in [t.get_text() for t in fig.legends[0].get_texts()]
    assert bar_figure(table_data(LAYOUT, RUNS), ylabel="word pieces").axes[0].get_ylabel() == "word pieces"


def test_a_single_value_still_gets_a_range():
    runs = [CellRun("gad", "bio", "gad", 0, FINISHED, 0.5)]
    low, high = y_limits(table_data(LAYOUT, runs))
    assert low == 0.0 and 50.0 < high < 60.0
    assert y_limits(table_data(LAYOUT, [CellRun("gad", "bio", "gad", 0, FINISHED, 0.0)])) == (0.0, 0.05)
    assert y_limits(table_data(LAYOUT, [CellRun("gad", "bio", "gad", 0, NOT_RUN)])) is None


# ------------------------------------------------------------------------------- what a journal checks

MODELS = {"bert-uncased": "BERT uncased (Wikipedia + BookCorpus)", "biobert": "BioBERT v1.1 (PubMed, continued)",
          "scibert": "SciBERT uncased, SciVocab", "bluebert": "BlueBERT (PubMed + MIMIC-III)",
          "pubmedbert": "PubMedBERT (PubMed abstracts, from scratch)"}
TASKS = ("bc5-chem", "ncbi-disease", "chemprot", "biosses", "hoc", "pubmedqa")
# Long title, long legend entries, every cell with a spread (error bars), the paper's numbers above some
# bars and inside others, one cell missing, the BLURB row: what a Table 6 figure holds.
REALISTIC = TableLayout(
    title="Table 6: published pretrained models on BLURB (test, standard task-specific models, mean of three "
          "seeds; the paper's numbers as black lines)",
    rows="task", columns="model", column_order=tuple(MODELS), column_labels=MODELS, blurb_row=True,
    paper={"bc5-chem": {m: 86.0 + 2 * i for i, m in enumerate(MODELS)}, "biosses": {"pubmedbert": 92.3}})


def _realistic_runs() -> list[CellRun]:
    runs = []
    for i, task in enumerate(TASKS):
        for j, model in enumerate(MODELS):
            if (task, model) == ("hoc", "biobert"):
                runs.append(CellRun(task, model, task, 0, NOT_RUN))
                continue
            base = 0.78 + 0.02 * ((3 * i + 5 * j) % 7)
            runs += [CellRun(task, model, task, s, FINISHED, base + d) for s, d in enumerate((-0.02, 0.0, 0.025))]
    return runs


def _drawn_text_boxes(fig) -> list[tuple[str, object]]:
    """(what, display box) of every text drawn and of the legend: the axes' title and labels, the tick
    labels inside the view (matplotlib keeps a spare tick outside it, not drawn), the value labels, and
    the legend as one box (its entries are inside it)."""
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    ax = fig.axes[0]
    texts = [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts, *fig.texts]
    for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        texts += [t for loc, t in zip(axis.get_ticklocs(), axis.get_ticklabels()) if low <= loc <= high]
    boxes = [(f"text {t.get_text()!r}", t.get_window_extent(renderer))
             for t in texts if t.get_visible() and t.get_text().strip()]
    return boxes + [("legend", legend.get_window_extent(renderer)) for legend in [*fig.legends, ax.get_legend()]
                    if legend is not None]


def _line_boxes(fig) -> list[object]:
    """A display box around each segment of the axes' line collections: the error bars (with their caps'
    width) and the paper's lines (with their white rim)."""
    from matplotlib.collections import LineCollection
    from matplotlib.transforms import Bbox

    ax = fig.axes[0]
    pad = 2.0 * fig.dpi / 72  # the caps reach 2 points either side; the paper's rim 1.75 points
    ends = [ax.transData.transform(segment) for collection in ax.collections
            if isinstance(collection, LineCollection) for segment in collection.get_segments()]
    return [Bbox([points.min(axis=0) - pad, points.max(axis=0) + pad]) for points in ends]


def test_nothing_overlaps_in_a_realistic_figure():
    fig = bar_figure(table_data(REALISTIC, _realistic_runs()))
    boxes = _drawn_text_boxes(fig)
    lines = _line_boxes(fig)
    ax = fig.axes[0]
    bars = sum(len(c.patches) for c in ax.containers if isinstance(c, BarContainer))
    assert bars >= len(MODELS) * len(TASKS) - 1 and len(ax.texts) >= bars // 2  # value labels inside the bars
    assert len(lines) >= len(MODELS) * len(TASKS)  # the error bars are there to collide with
    clashes = [(a, b) for i, (a, box_a) in enumerate(boxes) for b, box_b in boxes[i + 1:] if box_a.overlaps(box_b)]
    clashes += [(a, "a line") for a, box in boxes for line in lines if box.overlaps(line)]
    assert clashes == []
    page = fig.bbox
    assert [a for a, box in boxes if box.x0 < page.x0 or box.y0 < page.y0 or box.x1 > page.x1 or box.y1 > page.y1] == []


def test_narrow_bars_drop_their_value_labels_and_long_row_names_wrap():
    """Nine models over 14 groups: bars narrower than a label's text get none (the numbers are in the
    table); long group names wrap to their group instead of running into the next one."""
    models = {f"m{j}": f"model {j} with a long label" for j in range(9)}
    tasks = ["bc5-chem", "bc5-disease", "ncbi-disease", "bc2gm", "jnlpba", "ebm-pico", "chemprot", "ddi", "gad",
             "biosses", "hoc", "pubmedqa", "bioasq"]
    layout = TableLayout(title="Table 6", rows="task", columns="model", column_order=tuple(models),
                         column_labels=models, blurb_row=True)
    runs = [CellRun(t, m, t, s, FINISHED, 0.6 + 0.01 * ((i * 7 + j * 3 + s) % 30))
            for i, t in enumerate(tasks) for j, m in enumerate(models) for s in range(2)]
    fig = bar_figure(table_data(layout, runs))
    boxes = _drawn_text_boxes(fig)
    assert len(fig.axes[0].texts) == 0
    assert [(a, b) for i, (a, box_a) in enumerate(boxes) for b, box_b in boxes[i + 1:] if box_a.overlaps(box_b)] == []
    rows = TableLayout(title="Long row names", rows="model", columns="tagging", column_order=("bio", "io"))
    names = ["pubmedbert-abstract-fulltext-uncased", "biobert v1.1 cased, PubMed", "scibert scivocab uncased",
             "bluebert pubmed mimic uncased L-12"]
    runs = [CellRun(n, c, "bc5-chem", s, FINISHED, 0.8 + 0.01 * s) for n in names for c in ("bio", "io")
            for s in range(3)]
    fig = bar_figure(table_data(rows, runs))
    ticks = [box for what, box in _drawn_text_boxes(fig) if any(part in what for part in ("pubmedbert", "biobert",
                                                                                          "scibert", "bluebert"))]
    assert len(ticks) == 4 and not any(a.overlaps(b) for a, b in zip(ticks, ticks[1:]))


def test_each_group_names_its_tasks_metric_where_the_rows_differ():
    """One metric per y label: "score" where the rows' metrics differ, each group's under its name."""
    layout = dataclasses.replace(REALISTIC, metric="score")
    ax = bar_figure(table_data(layout, _realistic_runs())).axes[0]
    assert ax.get_ylabel() == "test score ×100"
    ticks = {" ".join(t.get_text().split()) for t in ax.get_xticklabels()}
    # bc5-chem, ncbi-disease: entity F1; chemprot, hoc: micro F1; biosses: Pearson; pubmedqa: accuracy
    for name in ("bc5-chem (entity F1)", "chemprot (micro F1)", "biosses (Pearson r)", "pubmedqa (accuracy)",
                 "BLURB score"):
        assert name in ticks, (name, ticks)
    one_task = [CellRun("bc5-chem", c, "bc5-chem", s, FINISHED, 0.9) for c in ("bio", "io") for s in range(2)]
    shared = dataclasses.replace(LAYOUT, metric="score")
    assert bar_figure(table_data(shared, one_task)).axes[0].get_ylabel() == "test entity F1 ×100"


def test_pdf_embeds_truetype_fonts_and_svg_keeps_text_as_text(tmp_path):
    import matplotlib

    before = (matplotlib.rcParams["pdf.fonttype"], matplotlib.rcParams["svg.fonttype"])
    png, svg, pdf = plot(table_data(REALISTIC, _realistic_runs()), tmp_path / "table")
    pdf_bytes = pdf.read_bytes()
    # Type 42: the TrueType font file itself is embedded (/FontFile2); Type 3 fonts are what matplotlib
    # writes by default and what submission systems reject
    assert b"/FontFile2" in pdf_bytes or b"/Subtype /TrueType" in pdf_bytes
    assert b"/Type3" not in pdf_bytes
    if shutil.which("pdffonts"):  # poppler-utils (.ci/run installs it): what a submission system runs
        fonts = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True).stdout
        assert "TrueType" in fonts and "Type 3" not in fonts, fonts
    svg_text = svg.read_text(encoding="utf-8")
    assert svg_text.count("<text") >= len(MODELS) + len(TASKS)  # legend entries and group names, at least
    assert "PubMedBERT (PubMed abstracts, from scratch)" in svg_text  # searchable, editable words
    # set while saving only: a notebook's own settings are left alone
    assert (matplotlib.rcParams["pdf.fonttype"], matplotlib.rcParams["svg.fonttype"]) == before


def _lightness(rgba) -> float:
    """CIE L* (0 black .. 100 white) of an sRGB colour: how light it prints in grayscale."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    y = 0.2126 * linear(rgba[0]) + 0.7152 * linear(rgba[1]) + 0.0722 * linear(rgba[2])
    return 116 * y ** (1 / 3) - 16 if y > 0.008856 else 903.3 * y


@pytest.mark.parametrize("n_models", [2, 5, 9])
def test_series_stay_apart_in_grayscale(n_models):
    models = {f"m{j}": f"model {j}" for j in range(n_models)}
    layout = TableLayout(title="Grayscale", rows="task", columns="model", column_order=tuple(models))
    runs = [CellRun("bc5-chem", m, "bc5-chem", 0, FINISHED, 0.9) for m in models]
    ax = bar_figure(table_data(layout, runs)).axes[0]
    bars = [c.patches[0] for c in ax.containers if isinstance(c, BarContainer)]
    assert len(bars) == n_models
    lightness = sorted(_lightness(bar.get_facecolor()) for bar in bars)
    assert min(b - a for a, b in zip(lightness, lightness[1:])) >= 5.0, lightness  # distinct greys
    assert len({bar.get_hatch() for bar in bars}) == n_models  # and distinct hatches besides


# ----------------------------------------------------- every packaged table's figure, as a paper needs it

EXPERIMENTS = Path(__file__).resolve().parents[3] / "experiments"
RESULTS = Path(__file__).resolve().parents[3] / "docs" / "results"
# short bars (0, 0.4) beside tall ones: where labels used to be dropped
PATTERN = (0.0, 0.004, 0.35, 0.62, 0.81, 0.93, 0.12)


def _finetune_tables() -> list[tuple[str, object]]:
    """(experiment, TableData) of every packaged fine-tuning experiment: its planned cells (its layout,
    labels, paper numbers, title), with synthetic values over three seeds and its last cell not run."""
    from ablations.experiment import load_experiment

    out = []
    for path in sorted(EXPERIMENTS.glob("*.yaml")):
        experiment = load_experiment(path, max_runs=None)
        cells = list(dict.fromkeys((c.row, c.column, c.task) for c in experiment.cells()))
        if not cells:
            continue
        runs = [CellRun(row, column, task, s, FINISHED, PATTERN[k % len(PATTERN)] + (0.01 * s if k % 3 else 0.0),
                        run_id=f"{k}-{s}") for k, (row, column, task) in enumerate(cells[:-1]) for s in range(3)]
        row, column, task = cells[-1]
        runs.append(CellRun(row, column, task, 0, NOT_RUN))
        # no baseline: the figure shows no test, and the seeds-needed solver would cost a minute
        out.append((path.stem, table_data(dataclasses.replace(experiment.layout, baseline=None), runs)))
    return out


def _vocabulary_tables() -> list[tuple[str, object, str]]:
    """(name, figure data, y label) of Tables 1 and 8, from their shipped CSVs through the same grids."""
    from ablations.tables.vocab_compare import Table1Row, Table8Row
    from ablations.tables.vocab_grids import table1_grid, table8_grid

    terms: dict[str, Table1Row] = {}
    with open(RESULTS / "table1_vocab_terms" / "table.csv", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            terms.setdefault(r["row"], Table1Row(r["row"], r["category"], {}, {})).splits[r["column"]] = r["ours"]
    lengths: dict[str, dict] = {}
    with open(RESULTS / "table8_input_length" / "table.csv", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            lengths.setdefault(r["row"], {})[r["column"]] = (float(r["mean"]),
                                                             float(r["paper"]) if r["paper"] else None)
    general, domain = "bert-base-uncased", "pubmedbert-uncased"
    table8 = table8_grid([Table8Row(d, v[general][0], v[domain][0], v[general][1], v[domain][1])
                          for d, v in lengths.items()], general, domain)
    table1 = table1_grid(list(terms.values()))
    return [("table1_vocab_terms", table1.figure_data, table1.ylabel),
            ("table8_input_length", table8.figure_data, table8.ylabel)]


def _unwrapped(text: str) -> str:
    """A wrapped label joined back: a line that ends in a hyphen continues the word, else a space."""
    return re.sub(r"-\n", "-", text).replace("\n", " ")


def _marker_boxes(fig) -> list[object]:
    """A display box per marker of the axes' markers-only lines (the error bars' caps, the missing cells'
    'x'), and per drawn line (the axis break's slashes): a line of markers is as wide as its series."""
    from matplotlib.transforms import Bbox

    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    out = []
    for line in ax.lines:
        if not line.get_xydata().size:
            continue
        if line.get_linestyle() not in ("None", "none", ""):
            out.append(line.get_window_extent(renderer))
            continue
        half = (line.get_markersize() / 2 + line.get_markeredgewidth()) * fig.dpi / 72
        for x, y in line.get_transform().transform(line.get_xydata()):
            out.append(Bbox.from_extents(x - half, y - half, x + half, y + half))
    return out


CLEAR = 1.0  # points of a label's box left clear of hatching around its text


def _contrast(a, b) -> float:
    """WCAG contrast ratio of two colours (1 .. 21; text wants 4.5)."""
    from matplotlib.colors import to_rgba

    light, dark = sorted((luminance(to_rgba(a)), luminance(to_rgba(b))), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def _readable(label, bar, ax, renderer) -> bool:
    """A value label over its bar stands on an opaque box, drawn over the bar, that covers its text and
    contrasts with it (the hatching cannot run through the digits); one above its bar contrasts with the
    axes' background."""
    box = label.get_window_extent(renderer)
    if not box.overlaps(bar.get_window_extent(renderer)):
        return _contrast(label.get_color(), ax.get_facecolor()) >= 4.5
    patch = label.get_bbox_patch()
    if patch is None or patch.get_facecolor()[3] < 1.0 or label.get_zorder() <= bar.get_zorder():
        return False
    cover = patch.get_window_extent(renderer)
    clear = CLEAR * renderer.points_to_pixels(1.0)
    covers = cover.x0 + clear <= box.x0 and cover.y0 + clear <= box.y0 and box.x1 <= cover.x1 - clear and \
        box.y1 <= cover.y1 - clear
    return covers and _contrast(label.get_color(), patch.get_facecolor()) >= 4.5


def _figure_faults(fig, data) -> list[str]:
    """What a journal would send back: a value label over any other artist, a bar wide enough for its
    label without one, a label unreadable on its (hatched) bar, a group label broken inside a word, a y
    label of more than one line or metric, a title other than the table's or with a word alone on a line,
    a count written as a fraction."""
    from matplotlib.transforms import Bbox

    from ablations.tables.plot import VALUE_FONT, group_labels, value_format

    faults = []
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    ax = fig.axes[0]
    boxes = _drawn_text_boxes(fig)
    faults += [f"{a} over {b}" for i, (a, box_a) in enumerate(boxes) for b, box_b in boxes[i + 1:]
               if box_a.overlaps(box_b)]
    bars = [patch for c in ax.containers if isinstance(c, BarContainer) for patch in c.patches]
    others = [("a line", box) for box in _line_boxes(fig)]
    others += [(f"the {name} spine", spine.get_window_extent(renderer)) for name, spine in ax.spines.items()
               if spine.get_visible()]
    others += [("a marker", box) for box in _marker_boxes(fig)]
    labelled = set()
    for label in ax.texts:
        box = label.get_window_extent(renderer)
        [bar] = [b for b in bars if b.get_x() <= label.xy[0] <= b.get_x() + b.get_width()]
        labelled.add(id(bar))
        faults += [f"value {label.get_text()} over {what}" for what, other in others if box.overlaps(other)]
        faults += [f"value {label.get_text()} over another bar" for b in bars
                   if b is not bar and box.overlaps(Bbox.intersection(b.get_window_extent(renderer),
                                                                     ax.get_window_extent(renderer)) or Bbox.null())]
        if not _readable(label, bar, ax, renderer):
            faults.append(f"value {label.get_text()} unreadable on its bar")
        if value_format(data) == "{:.0f}" and "." in label.get_text():
            faults.append(f"count written {label.get_text()}")
    room = 1.4 * VALUE_FONT * fig.dpi / 72  # a bar this wide holds a vertical label in its box
    faults += [f"a bar of {bar.get_height():.3g} without its value" for bar in bars
               if id(bar) not in labelled and bar.get_window_extent(renderer).width >= room]
    for tick, expected in zip(ax.get_xticklabels(), group_labels(data)):
        if _unwrapped(tick.get_text()) != _unwrapped(expected):
            faults.append(f"group label {tick.get_text()!r} broken inside a word")
    if "\n" in ax.get_ylabel() or " / " in ax.get_ylabel() or ax.yaxis.label.get_fontsize() < 8:
        faults.append(f"y label {ax.get_ylabel()!r} ({ax.yaxis.label.get_fontsize()}pt)")
    if _unwrapped(ax.get_title()) != data.layout.title:
        faults.append(f"title {ax.get_title()!r}, not the table's {data.layout.title!r}")
    lines = ax.get_title().split("\n")
    if len(lines) > 1 and min(len(line.split()) for line in lines) < 2:
        faults.append(f"a word alone in the title {lines}")
    return faults


@pytest.mark.slow
def test_every_packaged_table_s_figure_is_ready_for_a_paper():
    """Every experiment under experiments/ (synthetic runs over its planned cells, short bars among them)
    and both vocabulary tables (their shipped numbers), through the figure the table command writes."""
    tables = [(name, data, None) for name, data in _finetune_tables()] + _vocabulary_tables()
    assert len(tables) >= 20
    faults = {}
    for name, data, ylabel in tables:
        found = _figure_faults(bar_figure(data, ylabel), data)
        if found:
            faults[name] = found
    assert faults == {}


def test_table_1_s_counts_are_integers_and_its_terms_whole():
    """Word pieces are counts ("2", not "2.0"); a term too long for its group is set smaller, never split
    ("hyperten/sion", "acetyltr/ansferas/e")."""
    [(_, data, ylabel), _] = _vocabulary_tables()
    fig = bar_figure(data, ylabel)
    ax = fig.axes[0]
    assert ax.texts and all(t.get_text().isdigit() for t in ax.texts)
    assert {t.get_text() for t in ax.get_xticklabels()} >= {"hypertension", "acetyltransferase"}
    assert _figure_faults(fig, data) == []


def test_short_bars_keep_their_value_above_them():
    """Table 9's floor: a bar of 0.0 to 2 points under the paper's 77 keeps its number, above its error bar."""
    runs = [CellRun("chemprot", c, "chemprot", s, FINISHED, v + 0.001 * s) for c, v in (("bio", 0.0), ("io", 0.02))
            for s in range(3)]
    runs += [CellRun("gad", c, "gad", s, FINISHED, 0.6 + 0.01 * s) for c in ("bio", "io") for s in range(3)]
    layout = dataclasses.replace(LAYOUT, paper={"chemprot": {"bio": 77.24, "io": 76.14}})
    data = table_data(layout, runs)
    fig = bar_figure(data)
    assert sorted(t.get_text() for t in fig.axes[0].texts) == ["0.1", "2.1", "61.0", "61.0"]
    assert _figure_faults(fig, data) == []

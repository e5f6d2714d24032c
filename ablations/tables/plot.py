"""A table's figure: grouped bars (a group per row, a bar per column, std as error bars, the paper's number
as a black line), written as PDF, SVG and 300-dpi PNG.

The y axis starts at 0 (or below, for negative values), so a bar's height is proportional to its value.
Nothing overlaps: the title and group labels wrap to their width (never inside a word), the legend sits
beside the axes, and each value label stands inside its bar, else above it, else is dropped. Fonts are
embedded as TrueType and SVG text stays text (`SAVE_RC`, only while saving); cividis and distinct hatches
keep the series apart in grayscale.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ablations.results import BLURB_ROW
from ablations.tables.figure_text import wrap_text
from ablations.tables.stats import TableData
from datamodules.metrics import METRIC_NAMES

FIGURE_FORMATS = ("png", "svg", "pdf")
PNG_DPI = 300
MARGIN = 0.05  # of the data's span, below the lowest value where it is under 0
LABEL_ROOM = 0.05  # of the span, above the highest value
SAVE_RC = {"pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "none"}
HATCHES = ("", "///", "...", "xxx", "\\\\\\", "ooo", "---", "+++", "***", "|||")
VALUE_FONT = 6  # points
TITLE_FONT = 11  # points
LABEL_PAD = 2  # points between a value label and its bar's foot, error bar or the paper's line
BOX_PAD = 0.2  # of the value font's size: the white box behind a value label, within LABEL_PAD
MIN_TICK_FONT = 7  # points: group labels shrink to this before they turn vertical
MIN_YLABEL_FONT = 8  # points: the y label shrinks to this before it takes a second line


def y_limits(data: TableData) -> tuple[float, float] | None:
    """The y range, from 0 (or below it, with a margin) to the highest value with a margin; None if empty."""
    values = []
    for _, cells in data.body_rows():
        for cell in cells:
            if cell.mean is not None:
                values += [cell.mean - lower_error(cell.mean, cell.std), cell.mean + (cell.std or 0.0)]
            if cell.paper is not None:
                values.append(cell.paper)
    if not values:
        return None
    low, high = min(0.0, *values), max(0.0, *values)
    span = high - low or 1.0
    return (0.0 if low == 0.0 else low - MARGIN * span), high + LABEL_ROOM * span


def lower_error(mean: float, std: float | None) -> float:
    """How far an error bar reaches below its mean: the std, stopping at 0 for a non-negative mean."""
    std = std or 0.0
    return min(std, mean) if mean >= 0 else std


def row_metrics(data: TableData) -> dict[str, str]:
    """Each row's metric name: the layout's, or for "score" the metrics of the row's tasks."""
    from datamodules.registry import DATASETS

    out = {}
    for row, cells in data.body_rows():
        if data.layout.metrics:  # a `metric` axis: the groups or the legend name each metric
            out[row] = "score"
            continue
        if data.layout.metric != "score":
            out[row] = data.layout.metric
            continue
        tasks = sorted({task for cell in cells for task in cell.tasks})
        names = ["BLURB score"] if row == BLURB_ROW else list(dict.fromkeys(
            METRIC_NAMES.get(DATASETS.get(t).metric, DATASETS.get(t).metric) if t in DATASETS else "score"
            for t in tasks))
        out[row] = " / ".join(names) if names else "score"
    return out


def _shared_metric(data: TableData) -> str | None:
    """The one metric every row (the BLURB row aside) shows, or None where they differ."""
    metrics = {m for row, m in row_metrics(data).items() if row != BLURB_ROW}
    return metrics.pop() if len(metrics) == 1 else None


def metric_label(data: TableData) -> str:
    """The y label: one metric, the rows' shared one, else "score" (each group names its own)."""
    return f"test {_shared_metric(data) or 'score'} ×100"


def group_labels(data: TableData) -> list[str]:
    """Each group's label (unwrapped): the row, with its metric where the rows' metrics differ."""
    metrics, shared = row_metrics(data), _shared_metric(data)
    return [row if shared is not None or row == BLURB_ROW else f"{row}\n({metrics[row]})"
            for row, _ in data.body_rows()]


def _spread(data: TableData) -> bool:
    return any(cell.n > 1 for _, cells in data.body_rows() for cell in cells)


def value_format(data: TableData) -> str:
    """How a value label is written: counts (every plotted value a whole number) as integers."""
    means = [c.mean for _, cells in data.body_rows() for c in cells if c.mean is not None]
    return "{:.0f}" if means and all(float(m).is_integer() for m in means) else "{:.1f}"


def series_styles(n: int) -> list[tuple[tuple[float, float, float, float], str]]:
    """(colour, hatch) per series: cividis dark to light, so grayscale greys differ too."""
    from matplotlib import colormaps

    cmap = colormaps["cividis"]
    points = [0.5] if n == 1 else [0.05 + 0.9 * j / (n - 1) for j in range(n)]
    return [(cmap(p), HATCHES[j % len(HATCHES)]) for j, p in enumerate(points)]


def luminance(color) -> float:
    """Relative luminance (WCAG) of an RGB(A) colour: what it becomes in grayscale."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (linear(c) for c in color[:3])
    return float(0.2126 * r + 0.7152 * g + 0.0722 * b)


def bar_figure(data: TableData, ylabel: str | None = None):
    """Grouped bars, one group per row, one bar per column; a missing cell gets an 'x' at the axis' foot.
    Uses matplotlib's object API (Agg canvas), so pyplot's backend in a notebook is left alone."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patheffects import withStroke

    groups = data.body_rows()
    n_cols = len(data.columns)
    width = 0.8 / max(n_cols, 1)
    fig_width = min(16.0, max(6.0, 0.3 * len(groups) * max(n_cols, 1) + 2))
    fig = Figure(figsize=(fig_width, 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    limits = y_limits(data)
    bottom = 0.0 if limits is None else limits[0]
    labelled = {"missing": False, "paper": False}
    value_labels: list[_ValueLabel] = []
    number = value_format(data)
    for j, (column, (color, hatch)) in enumerate(zip(data.columns, series_styles(n_cols))):
        xs, heights, errors, missing_xs, paper_xs, papers, ceilings, stds = [], [], [], [], [], [], [], []
        for i, (_, cells) in enumerate(groups):
            x = i + (j - (n_cols - 1) / 2) * width
            cell = cells[j]
            if cell.paper is not None:
                paper_xs.append(x)
                papers.append(cell.paper)
            if cell.mean is None:
                missing_xs.append(x)
                continue
            xs.append(x)
            heights.append(cell.mean)
            errors.append((lower_error(cell.mean, cell.std), cell.std or 0.0))
            stds.append(cell.std)
            # the label stands in the bar, below its error bar and the paper's line where that crosses it
            ceilings.append(min([cell.mean - lower_error(cell.mean, cell.std)] +
                                ([cell.paper] if cell.paper is not None and cell.paper < cell.mean else [])))
        # a light edge on dark bars, a dark one on light bars: the hatch is drawn in the edge colour
        edge = "white" if luminance(color) < 0.25 else "black"
        yerr = list(zip(*errors)) if any(e for pair in errors for e in pair) else None
        bars = ax.bar(xs, heights, width, yerr=yerr, color=color, hatch=hatch,
                      edgecolor=edge, linewidth=0.4, label=data.column_label(column),
                      error_kw={"capsize": 2, "elinewidth": 0.8, "ecolor": "black"})
        for bar, height, ceiling, cell_std in zip(bars.patches, heights, ceilings, stds):
            # at the bar's foot, growing towards its end, black on a white box: the hatching does not run
            # through the digits, and one text colour reads on every bar
            label = ax.annotate(number.format(height), (bar.get_x() + bar.get_width() / 2, 0.0),
                                xytext=(0, LABEL_PAD if height >= 0 else -LABEL_PAD), textcoords="offset points",
                                rotation=90, ha="center", va="bottom" if height >= 0 else "top",
                                fontsize=VALUE_FONT, color="black", annotation_clip=False,
                                bbox={"boxstyle": f"square,pad={BOX_PAD}", "facecolor": "white", "edgecolor": "none"})
            # how far the label may reach: up to `ceiling` (a bar above 0), down to its error bar (below 0);
            # where it is too short, the label may stand above its error bar instead
            value_labels.append(_ValueLabel(label, bar, ceiling if height >= 0 else
                                            min(0.0, height + (cell_std or 0.0)), height + (cell_std or 0.0)))
        if missing_xs:
            ax.plot(missing_xs, [bottom] * len(missing_xs), "x", color=color, markeredgecolor="black",
                    markersize=8, clip_on=False, label=None if labelled["missing"] else "missing (see table)")
            labelled["missing"] = True
        if paper_xs:  # black with a white rim: visible over dark and light bars alike
            ax.hlines(papers, [x - width / 2 for x in paper_xs], [x + width / 2 for x in paper_xs],
                      color="black", linewidth=2, label=None if labelled["paper"] else "paper",
                      path_effects=[withStroke(linewidth=3.5, foreground="white")])
            labelled["paper"] = True
    ax.set_xticks(range(len(groups)), group_labels(data))
    ax.set_xlabel(data.layout.rows)
    ax.set_ylabel(ylabel or metric_label(data))
    if _spread(data):  # the legend says what the bars and error bars are (the y label names the metric only)
        ax.errorbar([], [], yerr=[], fmt="none", ecolor="black", elinewidth=0.8, capsize=2,
                    label="mean ± std over seeds")
    if groups:
        ax.set_xlim(-0.5, len(groups) - 0.5)
    ax.set_title(data.layout.title, fontsize=TITLE_FONT)  # `_fit` wraps it to the axes' width
    if limits is not None:
        ax.set_ylim(*limits)
        if limits[0] < 0.0:  # bars grow both ways from 0
            ax.axhline(0.0, color="black", linewidth=0.5)
    fig.legend(loc="outside right upper", fontsize="small")  # beside the axes: never over a bar
    _fit(fig, ax, value_labels, width)
    return fig


@dataclass
class _ValueLabel:
    """A bar's value label: it may go inside the bar up to `reach`, or above `top` (its error bar)."""

    text: object  # matplotlib Annotation
    bar: object  # its Rectangle
    reach: float
    top: float


def _one_line(ax, ylabel: str, height_pt: float) -> None:
    """The y label in one line, in a smaller font down to MIN_YLABEL_FONT before it takes a second."""
    size = 10.0
    while size > MIN_YLABEL_FONT and len(ylabel) * 0.6 * size > height_pt:
        size -= 0.5
    ax.set_ylabel(wrap_text(ylabel, height_pt, size, balanced=True), fontsize=size)


def _fit_groups(fig, ax, groups: list[str], width_pt: float, renderer) -> bool:
    """Group labels wrapped to their group's width, shrunk down to MIN_TICK_FONT, else vertical.
    True where the figure is as last drawn."""
    size = ax.get_xticklabels()[0].get_fontsize() if ax.get_xticklabels() else 10.0
    while True:
        ax.set_xticks(range(len(groups)), [wrap_text(g, width_pt / len(groups) * 0.9, size) for g in groups],
                      fontsize=size)
        fig.draw_without_rendering()
        boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels()]
        group_px = ax.get_window_extent(renderer).width / len(groups)
        if all(b.width <= group_px * 0.95 for b in boxes) or size <= MIN_TICK_FONT:
            break
        size -= 0.5
    if any(a.overlaps(b) for a, b in zip(boxes, boxes[1:])):  # still colliding: vertical, never touching
        ax.set_xticks(range(len(groups)), groups, fontsize=size)
        ax.tick_params(axis="x", labelrotation=90)
        return False
    return True


def _fit(fig, ax, value_labels: list[_ValueLabel], bar_width: float) -> None:
    """Wrap the title, y label and group labels to the laid-out axes, then place the value labels."""
    renderer = fig.canvas.get_renderer()
    to_pt = 72.0 / fig.dpi
    title, ylabel = ax.get_title(), ax.get_ylabel()
    groups = [t.get_text() for t in ax.get_xticklabels()]
    # Each wrap changes the layout, and so the room for the next: wrap the original texts again to the
    # new axes until their size settles (long unwrapped labels first squeeze the axes).
    size, drawn = None, False  # drawn: the figure is laid out as it stands (a draw would change nothing)
    for _ in range(4):
        if not drawn:  # each full draw runs the constrained layout again: the dearest step of a table
            fig.draw_without_rendering()
        box = ax.get_window_extent(renderer)
        if size is not None and abs(box.width - size[0]) < 1 and abs(box.height - size[1]) < 1:
            break
        size = (box.width, box.height)
        width_pt, height_pt = box.width * to_pt, box.height * to_pt
        # the title over the axes only: the legend beside them reaches as high as the title
        ax.set_title(wrap_text(title, width_pt * 0.95, TITLE_FONT, balanced=True), fontsize=TITLE_FONT)
        _one_line(ax, ylabel, height_pt * 0.95)
        drawn = bool(groups) and _fit_groups(fig, ax, groups, width_pt, renderer)
    if value_labels:
        _place_values(fig, ax, value_labels, renderer, drawn)


def _line_boxes(fig, ax) -> list:
    """A box, LABEL_PAD wide, around each segment of the axes' line collections (error bars, paper lines)."""
    from matplotlib.collections import LineCollection
    from matplotlib.transforms import Bbox

    pad = LABEL_PAD * fig.dpi / 72
    out = []
    for collection in ax.collections:
        if isinstance(collection, LineCollection):
            for segment in collection.get_segments():
                (x0, y0), (x1, y1) = ax.transData.transform(segment)
                out.append(Bbox.from_extents(min(x0, x1) - pad, min(y0, y1) - pad, max(x0, x1) + pad,
                                             max(y0, y1) + pad))
    return out


def _place_values(fig, ax, value_labels: list[_ValueLabel], renderer, drawn: bool = False) -> None:
    """Each value label inside its bar, below its error bar and the paper's line; else above a positive
    bar where nothing else is, the y axis raised to hold it; else dropped."""
    from matplotlib.transforms import Bbox

    if not drawn:
        fig.draw_without_rendering()
    low, high = ax.get_ylim()
    pad = LABEL_PAD * fig.dpi / 72 - 0.5  # (half a pixel of rounding)
    axes = ax.get_window_extent(renderer)
    above = []
    for item in value_labels:
        label, bar = item.text, item.bar
        box = label.get_window_extent(renderer)
        cover = label.get_bbox_patch().get_window_extent(renderer)  # its white box: inside the bar too
        drawn = Bbox.intersection(bar.get_window_extent(renderer), axes)  # the part inside the axes
        limit = ax.transData.transform((0, min(max(item.reach, low), high)))[1]
        positive = bar.get_height() >= 0
        across = drawn is not None and drawn.x0 <= cover.x0 and cover.x1 <= drawn.x1
        fits = across and (drawn.y0 - 0.5 <= box.y0 and box.y1 <= min(limit, drawn.y1) - pad if positive
                           else max(limit, drawn.y0) + pad <= box.y0 and box.y1 <= drawn.y1 + 0.5)
        if fits:
            continue
        if positive and 1.1 * box.width <= bar.get_window_extent(renderer).width:
            label.xy = (label.xy[0], max(item.top, bar.get_height(), low))
            label.xyann = (0, 2 * LABEL_PAD)  # clear of the error bar's cap and its padded box
            label.set_color("black")
            label.set_bbox(None)
            above.append(item)
        else:
            label.remove()
    if not above:
        return
    # raise the axis until every label above its bar is inside it (each raise moves them all)
    for _ in range(3):
        fig.draw_without_rendering()
        top = max(item.text.get_window_extent(renderer).y1 for item in above)
        axes = ax.get_window_extent(renderer)
        if top <= axes.y1 - pad:
            break
        low, high = ax.get_ylim()
        ax.set_ylim(low, high + (top - axes.y1 + 2 * pad) / axes.height * (high - low) * 1.1)
    fig.draw_without_rendering()
    axes = ax.get_window_extent(renderer)
    lines = _line_boxes(fig, ax)
    bars = [item.bar.get_window_extent(renderer) for item in value_labels]
    kept = [item.text.get_window_extent(renderer) for item in value_labels
            if item not in above and item.text in ax.texts]
    for item in above:  # a label over a line, a bar or another label: dropped
        box = item.text.get_window_extent(renderer)
        own = item.bar.get_window_extent(renderer)
        clash = box.y1 > axes.y1 or any(box.overlaps(b) for b in lines + kept) or \
            any(box.overlaps(b) for b in bars if b.bounds != own.bounds)
        if clash:
            item.text.remove()
        else:
            kept.append(box)


def plot(data: TableData, path: Path, ylabel: str | None = None) -> list[Path]:
    """`bar_figure` saved with each of FIGURE_FORMATS' suffixes; returns the files written. `ylabel` replaces
    the metric's label. Every axis starts at 0, so a bar's height is its value."""
    from matplotlib import rc_context

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = bar_figure(data, ylabel)
    paths = [path.with_suffix(f".{suffix}") for suffix in FIGURE_FORMATS]
    with rc_context(SAVE_RC):
        for out in paths:
            fig.savefig(out, dpi=PNG_DPI)  # dpi only matters for the PNG: PDF and SVG are vector
    return paths

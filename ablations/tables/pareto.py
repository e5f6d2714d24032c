"""Score against compute: one point per column of a table (its score: the BLURB score where the table has
that row, else the mean of its rows' means; its compute: the FLOPs of its fine-tuning runs plus its
pretraining stages, cost.py), on a log x axis, the Pareto front (no other column both cheaper and better)
joined and its points filled. Written beside the table as compute.png / .svg / .pdf where at least
MIN_POINTS columns have both: a front through two points says no more than the table."""

from __future__ import annotations

import statistics
from pathlib import Path

from ablations.results import BLURB_ROW
from ablations.tables.plot import FIGURE_FORMATS, PNG_DPI, SAVE_RC
from ablations.tables.stats import TableData

FIGURE_NAME = "compute"
MIN_POINTS = 3


def column_points(data: TableData) -> list[tuple[str, float, float]]:
    """(column label, FLOPs, score) of every column with a score and a known compute."""
    points = []
    for column in data.columns:
        cost = data.costs.get(column)
        if cost is None or not (cost.finetune.known or cost.pretrain.known):
            continue
        if data.blurb is not None and data.blurb[column].mean is not None:
            score = data.blurb[column].mean
        else:
            means = [data.cells[(r, column)].mean for r in data.rows if data.cells[(r, column)].mean is not None]
            if not means:
                continue
            score = statistics.fmean(means)
        points.append((data.column_label(column), cost.flops, score))
    return points


def pareto_front(points: list[tuple[str, float, float]]) -> list[tuple[str, float, float]]:
    """The points no other point dominates (at most as much compute and at least as good, one strictly),
    by compute."""
    return sorted((p for p in points if not any(q[1] <= p[1] and q[2] >= p[2] and (q[1], q[2]) != (p[1], p[2])
                                                 for q in points)), key=lambda p: p[1])


# where a point's label may go, tried in turn (offset in points, horizontal alignment): the first inside
# the axes and clear of the other labels and points is taken
LABEL_PLACES = (((5, 5), "left"), ((5, -5), "left"), ((-5, 5), "right"), ((-5, -5), "right"),
                ((0, 8), "center"), ((0, -8), "center"))
LABEL_WIDTH = 110  # points: a longer label takes two lines (balanced)
MARKER_ROOM = 4  # points around a marker's centre that a label keeps clear of


def compute_figure(data: TableData):
    """Score against compute (None when fewer than MIN_POINTS columns have a known cost): each point
    labelled beside it, inside the axes and clear of the other labels and points; x ticks in FLOPs at 1, 2
    and 5 of each decade (a range under a decade still gets some), never overlapping; the legend under the
    axes; the title wrapped in lines of even length."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter, LogLocator, NullFormatter
    from matplotlib.transforms import Bbox

    from ablations.tables.figure_text import wrap_text

    points = column_points(data)
    if len(points) < MIN_POINTS:
        return None
    front = pareto_front(points)
    fig = Figure(figsize=(5.0, 3.8), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    others = [p for p in points if p not in front]
    ax.scatter([p[1] for p in others], [p[2] for p in others], facecolors="none", edgecolors="0.3", label="dominated")
    ax.plot([p[1] for p in front], [p[2] for p in front], "o-", color="0.0", label="Pareto front")
    ax.set_xscale("log")
    ax.margins(x=0.25, y=0.2)  # room for the labels beside the outermost points
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(EngFormatter())  # "200 T": the axis label says FLOPs
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("compute (model FLOPs, pretraining + fine-tuning)")
    ax.set_ylabel(f"{BLURB_ROW if data.blurb is not None else 'mean score'} ×100")
    ax.set_title(wrap_text(f"{data.layout.title}: score vs compute", 5.0 * 72 * 0.9, 9, balanced=True), fontsize=9)
    fig.legend(fontsize=7, loc="outside lower center", ncols=2)
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    _thin_ticks(fig, ax, renderer)
    room = MARKER_ROOM * fig.dpi / 72
    # the points, and the front's line sampled every few pixels: a label is kept clear of both
    xy = ax.transData.transform([(p[1], p[2]) for p in front])
    along = [a + (b - a) * t / 20 for a, b in zip(xy, xy[1:]) for t in range(21)]
    taken = [Bbox.from_extents(x - room, y - room, x + room, y + room)
             for x, y in [*ax.transData.transform([(p[1], p[2]) for p in points]), *along]]
    for label, x, y in points:
        text = ax.annotate(wrap_text(label, LABEL_WIDTH, 7, balanced=True), (x, y), textcoords="offset points",
                           xytext=(5, 5), fontsize=7)
        for offset, ha in LABEL_PLACES:
            text.xyann = offset
            text.set_ha(ha)
            text.set_va("bottom" if offset[1] > 0 else "top")
            box = text.get_window_extent(renderer)
            inside = ax.get_window_extent(renderer)
            if inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1 \
                    and not any(box.overlaps(t) for t in taken):
                break
        taken.append(text.get_window_extent(renderer))
    return fig


def _thin_ticks(fig, ax, renderer) -> None:
    """Every k-th x tick only, the smallest k whose labels do not touch (a log axis of under a decade
    falls back to linear ticks, as dense as they are long)."""
    low, high = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if low <= t <= high]
    for step in range(1, len(ticks) + 1):
        ax.set_xticks(ticks[::step])
        fig.draw_without_rendering()
        boxes = [t.get_window_extent(renderer).padded(2) for t in ax.get_xticklabels() if t.get_text()]
        if not any(a.overlaps(b) for a, b in zip(boxes, boxes[1:])):
            break
    ax.set_xlim(low, high)


def plot_compute(data: TableData, stem: Path) -> list[Path]:
    """The figure, written as `<stem>.png/.svg/.pdf`; nothing (and an earlier render's removed) when fewer
    than MIN_POINTS columns have a known cost."""
    from matplotlib import rc_context

    fig = compute_figure(data)
    if fig is None:
        for fmt in FIGURE_FORMATS:
            stem.with_name(f"{FIGURE_NAME}.{fmt}").unlink(missing_ok=True)
        return []
    paths = []
    with rc_context(SAVE_RC):
        for fmt in FIGURE_FORMATS:
            path = stem.with_name(f"{FIGURE_NAME}.{fmt}")
            fig.savefig(path, dpi=PNG_DPI if fmt == "png" else None)
            paths.append(path)
    return paths

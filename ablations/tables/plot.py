"""A table's figure for a paper: grouped bars (one group per row, one bar per column, std as error bars, the
paper's number as a black line), written as PDF and SVG (vector) and PNG (300 dpi).

The y axis spans the data -- means, their error bars and the paper's numbers -- with a small margin, so that
differences of a point or two are visible; `zero_based=True` starts it at 0 instead (or below, for negative
values), as bar heights are then proportional to the values.
"""

from __future__ import annotations

from pathlib import Path

from ablations.tables.stats import TableData

FIGURE_FORMATS = ("png", "svg", "pdf")
PNG_DPI = 300
MARGIN = 0.05  # of the data's span, below the lowest value and above the highest
LABEL_ROOM = 0.12  # more of the span above the highest value, for the bars' value labels


def y_limits(data: TableData, zero_based: bool = False) -> tuple[float, float] | None:
    """The y axis range: the data's min..max with a margin (None when there is nothing to plot)."""
    values = []
    for _, cells in data.body_rows():
        for cell in cells:
            if cell.mean is not None:
                values += [cell.mean - (cell.std or 0.0), cell.mean + (cell.std or 0.0)]
            if cell.paper is not None:
                values.append(cell.paper)
    if not values:
        return None
    low, high = min(values), max(values)
    if zero_based:
        low, high = min(0.0, low), max(0.0, high)
    span = high - low or abs(high) or 1.0
    return (low if zero_based and low == 0.0 else low - MARGIN * span), high + LABEL_ROOM * span


def bar_figure(data: TableData, ylabel: str | None = None, zero_based: bool = False):
    """Grouped bars, one group per row (the BLURB row included), one bar per column, std as error bars.
    Missing cells get no bar and an 'x' at the bottom of the axis. Uses matplotlib's object API (Agg canvas)
    so it neither needs a display nor changes pyplot's backend in a notebook."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    groups = data.body_rows()
    n_cols = len(data.columns)
    width = 0.8 / max(n_cols, 1)
    fig = Figure(figsize=(min(16.0, max(6.0, 0.3 * len(groups) * max(n_cols, 1) + 2)), 4.5),
                 layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    limits = y_limits(data, zero_based)
    bottom = 0.0 if limits is None else limits[0]
    labelled = {"missing": False, "paper": False}
    for j, column in enumerate(data.columns):
        xs, heights, errors, missing_xs, paper_xs, papers = [], [], [], [], [], []
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
            errors.append(cell.std or 0.0)
        bars = ax.bar(xs, heights, width, yerr=errors if any(errors) else None, capsize=2, color=f"C{j}",
                      label=data.column_label(column))
        ax.bar_label(bars, fmt="%.1f", fontsize=6, rotation=90, padding=2)  # a 0.0 bar is not a missing one
        if missing_xs:
            ax.plot(missing_xs, [bottom] * len(missing_xs), "x", color=f"C{j}", markersize=8, clip_on=False,
                    label=None if labelled["missing"] else "missing (see table)")
            labelled["missing"] = True
        if paper_xs:
            ax.hlines(papers, [x - width / 2 for x in paper_xs], [x + width / 2 for x in paper_xs],
                      color="black", linewidth=2, label=None if labelled["paper"] else "paper")
            labelled["paper"] = True
    ax.set_xticks(range(len(groups)), [row for row, _ in groups], rotation=30, ha="right")
    ax.set_xlabel(data.layout.rows)
    ax.set_ylabel(ylabel or f"test {data.layout.metric} ×100 (mean ± std over seeds)")
    ax.set_title(data.layout.title)
    if limits is not None:
        ax.set_ylim(*limits)
        if limits[0] <= 0.0 <= limits[1]:
            ax.axhline(0.0, color="black", linewidth=0.5)
    fig.legend(loc="outside right upper", fontsize="small")  # beside the axes: never over a bar
    return fig


def plot(data: TableData, path: Path, ylabel: str | None = None, zero_based: bool = False) -> list[Path]:
    """`bar_figure` saved as `path` with each of FIGURE_FORMATS' suffixes (table.png, table.svg,
    table.pdf for `path` table or table.png); returns the files written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = bar_figure(data, ylabel, zero_based)
    paths = [path.with_suffix(f".{suffix}") for suffix in FIGURE_FORMATS]
    for out in paths:
        fig.savefig(out, dpi=PNG_DPI)  # dpi only matters for the PNG: PDF and SVG are vector
    return paths

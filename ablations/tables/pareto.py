"""Score against compute: one point per column of a table (its score: the BLURB score where the table has
that row, else the mean of its rows' means; its compute: the FLOPs of its fine-tuning runs plus its
pretraining stages, cost.py), on a log x axis, the Pareto front (no other column both cheaper and better)
joined and its points filled. Written beside the table as compute.png / .svg / .pdf."""

from __future__ import annotations

import statistics
from pathlib import Path

from ablations.results import BLURB_ROW
from ablations.tables.plot import FIGURE_FORMATS, PNG_DPI, SAVE_RC
from ablations.tables.stats import TableData

FIGURE_NAME = "compute"


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


def plot_compute(data: TableData, stem: Path) -> list[Path]:
    """The figure, written as `<stem>.png/.svg/.pdf`; nothing when fewer than one column has a known cost."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = column_points(data)
    if not points:
        return []
    front = pareto_front(points)
    fig, ax = plt.subplots(figsize=(5.0, 3.4))
    try:
        others = [p for p in points if p not in front]
        ax.scatter([p[1] for p in others], [p[2] for p in others], facecolors="none", edgecolors="0.3",
                   label="dominated")
        ax.plot([p[1] for p in front], [p[2] for p in front], "o-", color="0.0", label="Pareto front")
        for label, x, y in points:
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        ax.set_xscale("log")
        ax.set_xlabel("compute (model FLOPs, pretraining + fine-tuning)")
        ax.set_ylabel(f"{BLURB_ROW if data.blurb is not None else 'mean score'} ×100")
        ax.set_title(f"{data.layout.title}: score vs compute", fontsize=9, wrap=True)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        paths = []
        with matplotlib.rc_context(SAVE_RC):
            for fmt in FIGURE_FORMATS:
                path = stem.with_name(f"{FIGURE_NAME}.{fmt}")
                fig.savefig(path, dpi=PNG_DPI if fmt == "png" else None)
                paths.append(path)
        return paths
    finally:
        plt.close(fig)

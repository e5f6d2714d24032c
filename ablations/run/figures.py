"""A run's figures, logged as its artifacts under `figures/` (PNG, matplotlib's Agg canvas as the tables'
figures use it, ablations/tables/plot.py):

- `curves.png` (`curves_figure`): the training loss at every step (and each epoch's mean), and beside it
  the dev score of each epoch with the best one marked; read back from the store, so a run resumed from a
  checkpoint draws its whole history.
- `confusion_matrix.png` (`confusion_figure`): for a single-label classification task (relations, document
  classes, QA answers), test examples by gold (rows) and predicted (columns) label, counts in the cells.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Sequence

DPI = 110
# The run's figures are laid out by hand, not by matplotlib's constrained layout: every fine-tuning run draws
# them, and the layout engine's extra drawing passes were more than half their cost (curves 0.44 s against
# 0.20 s, confusion matrix 0.36 s against 0.20 s on 2 CPU cores; a micro run is ~2 s). The margins, in inches,
# go around what is measured from the fonts (the tick labels, `_text_width`); the text stays inside the figure
# and clear of its neighbours (tests/ablations/run/test_figures.py).
CURVES_MARGINS = {"label": 0.3, "right": 0.15, "bottom": 0.5, "top": 0.45}
TICK_FONT = 10.0  # matplotlib's default tick label size, in points


def _figure(width: float, height: float) -> Any:
    """An Agg figure without a layout engine: its callers place their axes themselves."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(figure)
    return figure


def _text_width(texts: Sequence[str], size: float) -> float:
    """The widest of `texts` at font size `size`, in inches, measured from the font without drawing."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import text_to_path

    font = FontProperties(size=size)
    return max((text_to_path.get_text_width_height_descent(t, font, ismath=False)[0] for t in texts),
               default=0.0) / 72


def _tick_label_width(ax) -> float:
    """The widest of the y tick labels `ax` will draw, in inches."""
    low, high = ax.get_ylim()
    ticks = [t for t in ax.get_yticks() if low <= t <= high]
    return _text_width(ax.yaxis.get_major_formatter().format_ticks(ticks), TICK_FONT)


def curves_figure(path: Path, history: dict[str, list[tuple[int, float]]], title: str, score_name: str = "score",
                  best_step: int | None = None) -> Path | None:
    """`history`: metric key -> (step, value) points, of `train/loss`, `train/loss_epoch` and `dev/score`
    (whichever the run has). None (nothing written) when it has none of them."""
    from matplotlib.ticker import MaxNLocator

    loss, means, dev = (sorted(history.get(k, [])) for k in ("train/loss", "train/loss_epoch", "dev/score"))
    if not (loss or dev):
        return None
    panels = [p for p, points in (("loss", loss or means), ("dev", dev)) if points]
    width, height = 4.2 * len(panels) + 0.6, 3.2
    figure = _figure(width, height)
    axes = [figure.add_axes((0, 0, 1, 1)) for _ in panels]  # placed below, once their tick labels are known
    figure.suptitle(title, fontsize=10)
    for ax, panel in zip(axes, panels):
        if panel == "loss":
            if loss:
                ax.plot(*zip(*loss), color="#9ab", linewidth=1, marker="." if len(loss) < 50 else None,
                        label="every step")
            if means:
                ax.plot(*zip(*means), color="#124", linewidth=1.5, marker="o", label="epoch mean")
            ax.set_ylabel("training loss")
            ax.legend(fontsize=8, frameon=False)
        else:
            ax.plot(*zip(*dev), color="#a40", linewidth=1.5, marker="o")
            if best_step is not None and any(step == best_step for step, _ in dev):
                best = dict(dev)[best_step]
                ax.plot([best_step], [best], marker="*", markersize=14, color="#a40", linestyle="none",
                        label=f"best: {best:.4f}")
                ax.legend(fontsize=8, frameon=False)
            ax.set_ylabel(f"dev {score_name}")
        ax.set_xlabel("step")
        steps = [step for line in ax.get_lines() for step in line.get_xdata()]
        if max(steps) - min(steps) < 2:  # one or two steps: whole steps on the axis, not 1.900, 1.925, ...
            ax.set_xlim(min(steps) - 1, max(steps) + 1)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    margins = CURVES_MARGINS
    lefts = [margins["label"] + _tick_label_width(ax) + 0.1 for ax in axes]  # y label, tick labels, ticks
    panel = (width - sum(lefts) - margins["right"] * len(axes)) / len(axes)
    x = 0.0
    for ax, left in zip(axes, lefts):
        x += left
        ax.set_position((x / width, margins["bottom"] / height, panel / width,
                         (height - margins["bottom"] - margins["top"]) / height))
        x += panel + margins["right"]
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    return path


def confusion_figure(path: Path, gold: Sequence[Any], predicted: Sequence[Any], labels: Sequence[str],
                     title: str) -> Path | None:
    """The confusion matrix of single-label predictions over `labels` (any other label seen is added at
    the end). None (nothing written) when an answer is not a single label or there are no examples."""
    if not gold or not all(isinstance(x, str) for x in (*gold, *predicted)):
        return None
    order = list(dict.fromkeys([*labels, *sorted(set(gold) | set(predicted))]))
    counts = Counter(zip(gold, predicted))
    matrix = [[counts[(g, p)] for p in order] for g in order]
    # laid out by hand, as the curves figure: the margins fit the labels, measured (the x labels at 45 degrees)
    label, line = _text_width(order, 8), 8 * 1.2 / 72
    side = 0.55 * len(order)  # the matrix
    left, bottom, top = 0.35 + label + 0.1, 0.35 + 0.71 * (label + line) + 0.1, 0.55
    bar = 0.15  # the colour bar, right of the matrix, its tick labels right of it
    needed = left + side + 0.2 + bar + 0.6
    width = max(needed, _text_width(title.splitlines(), 9) + 0.3, 4.5)
    left += (width - needed) / 2  # centred under a wider title
    height = bottom + side + top
    figure = _figure(width, height)
    ax = figure.add_axes((left / width, bottom / height, side / width, side / height))
    image = ax.imshow(matrix, cmap="Blues")
    top_count = max(max(row) for row in matrix) or 1
    for i, row in enumerate(matrix):
        for j, value in enumerate(row):
            ax.text(j, i, str(value), ha="center", va="center", fontsize=8,
                    color="white" if value > top_count / 2 else "black")
    ax.set_xticks(range(len(order)), order, rotation=45, ha="right", rotation_mode="anchor", fontsize=8)
    ax.set_yticks(range(len(order)), order, fontsize=8)
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    figure.suptitle(title, fontsize=9)
    scale = figure.add_axes(((left + side + 0.2) / width, (bottom + 0.1 * side) / height, bar / width,
                             0.8 * side / height))
    figure.colorbar(image, cax=scale)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    return path


def log_run_figures(run, out: Path, evaluations: int, best_epoch: int, title: str, spec,
                    confusion: tuple[Sequence[Any], Sequence[Any], Any]) -> None:
    """A fine-tuning run's figures, logged to its MLflow run: the curves of its logged train loss and dev
    score (the best epoch marked), and for a single-label classification task the test split's confusion
    matrix (`confusion`: golds, predictions, and the task encoder, whose `labels` only such tasks have). The
    run's page opens on the curves (its note)."""
    from ablations.run.dashboard import NOTE_TAG, curves_note
    from datamodules.metrics import METRIC_NAMES
    from datamodules.task_kinds import kind_of

    client, steps = run.tracker.client, {}
    history = {key: [(m.step, m.value) for m in client.get_metric_history(run.run_id, key)]
               for key in ("train/loss", "train/loss_epoch", "dev/score")}
    if len(history["dev/score"]) == evaluations:  # the steps of the dev evaluations, in order
        steps = dict(enumerate(sorted(step for step, _ in history["dev/score"])))
    figures = [curves_figure(out / "curves.png", history, title, METRIC_NAMES.get(spec.metric, "score"),
                             steps.get(best_epoch))]
    if kind_of(spec).one_class:
        golds, predicted, encoder = confusion
        figures.append(confusion_figure(out / "confusion_matrix.png", golds, predicted, encoder.labels,
                                        f"{title}\ntest split"))
    run.log_artifacts([path for path in figures if path is not None], "figures")
    if figures[0] is not None:  # the run's page opens on the curves, not on the best dev scores' single bars
        run.set_tags({NOTE_TAG: curves_note(run.run_id)})

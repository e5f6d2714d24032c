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


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def curves_figure(path: Path, history: dict[str, list[tuple[int, float]]], title: str, score_name: str = "score",
                  best_step: int | None = None) -> Path | None:
    """`history`: metric key -> (step, value) points, of `train/loss`, `train/loss_epoch` and `dev/score`
    (whichever the run has). None (nothing written) when it has none of them."""
    from matplotlib.ticker import MaxNLocator

    loss, means, dev = (sorted(history.get(k, [])) for k in ("train/loss", "train/loss_epoch", "dev/score"))
    if not (loss or dev):
        return None
    panels = [p for p, points in (("loss", loss or means), ("dev", dev)) if points]
    figure = _figure(4.2 * len(panels) + 0.6, 3.2)
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
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
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
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
    size = 1.6 + 0.55 * len(order)
    figure = _figure(max(size + 1.2, 4.5), size + 0.4)
    ax = figure.subplots()
    image = ax.imshow(matrix, cmap="Blues")
    top = max(max(row) for row in matrix) or 1
    for i, row in enumerate(matrix):
        for j, value in enumerate(row):
            ax.text(j, i, str(value), ha="center", va="center", fontsize=8,
                    color="white" if value > top / 2 else "black")
    ax.set_xticks(range(len(order)), order, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(order)), order, fontsize=8)
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    figure.suptitle(title, fontsize=9)
    figure.colorbar(image, ax=ax, shrink=0.8)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    return path


def log_run_figures(run, out: Path, evaluations: int, best_epoch: int, title: str, spec,
                    confusion: tuple[Sequence[Any], Sequence[Any], Any]) -> None:
    """A fine-tuning run's figures, logged to its MLflow run: the curves of its logged train loss and dev
    score (the best epoch marked), and for a single-label classification task the test split's confusion
    matrix (`confusion`: golds, predictions, and the task encoder, whose `labels` only such tasks have). The run's page opens on the curves (its note)."""
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
        run.set_tag(NOTE_TAG, curves_note(run.run_id))

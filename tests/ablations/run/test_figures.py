"""A run's figures, laid out by hand: the curves figure keeps every text inside the figure and clear of the
other panel and of its neighbours, whatever the scale of its values, and its step axis has whole steps; the
confusion matrix keeps its labels, however long, inside the figure and clear of the matrix and its scale."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.figure import Figure

from ablations.run import figures

HISTORIES = {
    "mini": {"train/loss": [(i, 2.5 / (i + 1)) for i in range(1, 300)],
             "train/loss_epoch": [(100, 0.2), (200, 0.1), (299, 0.05)],
             "dev/score": [(100, 0.5), (200, 0.7123), (299, 0.71)]},
    "tiny-loss-one-step": {"train/loss": [(1, 0.000123), (2, 0.0001)], "dev/score": [(2, -0.5)]},
    "huge-loss": {"train/loss": [(i, 123456.7 * i) for i in range(1, 40)], "dev/score": [(20, 0.1), (39, 0.2)]},
    "loss-only": {"train/loss": [(i, 1.0 / i) for i in range(1, 10)]},
    "dev-only": {"dev/score": [(5, 12345.678), (10, -0.001)]},
}


def kept_figures(monkeypatch) -> list[Figure]:
    """The figures `ablations.run.figures` makes from now on, kept for inspection once saved."""
    kept = []
    original = figures._figure

    def keep(*args, **kwargs):
        kept.append(original(*args, **kwargs))
        return kept[-1]

    monkeypatch.setattr(figures, "_figure", keep)
    return kept


def drawn(monkeypatch, history: dict, tmp_path: Path) -> Figure:
    """The figure `curves_figure` saved."""
    kept = kept_figures(monkeypatch)
    path = figures.curves_figure(tmp_path / "curves.png", history, "bc5-chem-pubmedbert-bilstm-bioul-s3-mini",
                                 "F1", best_step=max(s for s, _ in history.get("dev/score", [(0, 0)])))
    assert path is not None and path.stat().st_size > 0
    return kept[0]


def inside(box, whole) -> bool:
    return whole.x0 <= box.x0 and box.x1 <= whole.x1 and whole.y0 <= box.y0 and box.y1 <= whole.y1


def shown_tick_labels(ax, which: str) -> list:
    """The tick labels drawn on `which` ("x" or "y") axis: those of ticks within its limits."""
    low, high = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
    labels = ax.get_xticklabels() if which == "x" else ax.get_yticklabels()
    at = 0 if which == "x" else 1
    return [t for t in labels if t.get_text() and low <= t.get_position()[at] <= high]


@pytest.mark.parametrize("name", HISTORIES)
def test_the_curves_figure_keeps_its_text_inside_and_apart(name, monkeypatch, tmp_path):
    figure = drawn(monkeypatch, HISTORIES[name], tmp_path)
    renderer = figure.canvas.get_renderer()
    whole = figure.bbox
    axes = figure.axes
    texts = [figure._suptitle]
    for ax in axes:
        texts += [ax.yaxis.label, ax.xaxis.label, *shown_tick_labels(ax, "y"), *shown_tick_labels(ax, "x")]
    for text in texts:
        if not text.get_visible() or not text.get_text():
            continue
        box = text.get_window_extent(renderer)
        assert inside(box, whole), (name, text.get_text(), box, whole)
    for ax in axes:
        ticks = [t.get_window_extent(renderer) for t in shown_tick_labels(ax, "y")]
        label = ax.yaxis.label.get_window_extent(renderer)
        assert not [t for t in ticks if t.overlaps(label)], name  # the y label beside its tick labels
        others = [other.get_window_extent(renderer) for other in axes if other is not ax]
        assert not [t for t in ticks + [label] for o in others if t.overlaps(o)], name  # not into the next panel
        shown = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert shown and all(float(t).is_integer() for t in shown), (name, shown)


LABELS = {
    "chemprot": (["CPR:3", "CPR:4", "CPR:5", "CPR:6", "CPR:9", "false"], "chemprot-pubmedbert-dummify-cls-s1-mini"),
    "pubmedqa": (["yes", "no", "maybe"], "pubmedqa-random-bert-s1-micro"),
    "long-labels": (["a label of many words, as a user's dataset may have", "b"], "x"),
}


@pytest.mark.parametrize("name", LABELS)
def test_the_confusion_matrix_keeps_its_labels_inside_and_apart(name, monkeypatch, tmp_path):
    labels, title = LABELS[name]
    kept = kept_figures(monkeypatch)
    gold = [labels[i % len(labels)] for i in range(20)]
    predicted = [labels[(i * 7) % len(labels)] for i in range(20)]
    assert figures.confusion_figure(tmp_path / "m.png", gold, predicted, labels, f"{title}\ntest split")
    [figure] = kept
    renderer = figure.canvas.get_renderer()
    matrix, scale = figure.axes
    texts = [figure._suptitle, matrix.xaxis.label, matrix.yaxis.label, *shown_tick_labels(matrix, "x"),
             *shown_tick_labels(matrix, "y"), *shown_tick_labels(scale, "y")]
    boxes = [t.get_window_extent(renderer) for t in texts]
    assert all(inside(box, figure.bbox) for box in boxes), name
    square = matrix.get_window_extent(renderer)
    assert not [t for t in texts[1:] if t.get_window_extent(renderer).overlaps(square)], name
    assert not scale.get_window_extent(renderer).overlaps(square)
    for axis, label in (("x", matrix.xaxis.label), ("y", matrix.yaxis.label)):
        ticks = [t.get_window_extent(renderer) for t in shown_tick_labels(matrix, axis)]
        assert not [a for i, a in enumerate(ticks) for b in ticks[i + 1:] if a.overlaps(b)], (name, axis)
        assert not [t for t in ticks if t.overlaps(label.get_window_extent(renderer))], (name, axis)

"""The pretraining curves of a table's columns: each column's masked-language-model loss against the tokens
it has seen, one line per column in one figure, read from the tracking store.

A column pretrained in several stages (Table 9's general domain then PubMed) is the chain of its stages: a
continued stage's curve starts where the stage it continues from ended, so columns of equal compute end at
the same x, and a labelled vertical line marks where the corpus changes (`switch_label`). Tokens are
sequence slots (steps x batch x accumulation x sequence length x devices): the pretraining data is packed
into full sequences, so slots are tokens seen.

    chains = [StageChain("PubMed", [StageSegment(run_id, tokens_per_step)]), ...]
    paths = write_pretraining_curves(chains, tracking_uri, out_dir, title="Table 9")
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ablations.tables.figure_text import wrap_text
from ablations.tables.plot import FIGURE_FORMATS, PNG_DPI, SAVE_RC

LOSS_METRIC = "train/mlm_loss"  # what every objective logs for the masked-token loss (ELECTRA: its generator's)
FALLBACK_METRIC = "train/loss"
FILE_STEM = "pretraining"
SMOOTHING = 25  # logged steps in the running mean drawn (one step's loss is one batch's: noisy)


@dataclass(frozen=True)
class StageSegment:
    """One pretraining stage's run, and the tokens one of its optimizer steps consumes."""

    run_id: str
    tokens_per_step: int
    name: str = ""


@dataclass(frozen=True)
class StageChain:
    """A table column's pretraining, stage by stage (the first from scratch, each next continuing it)."""

    label: str
    segments: tuple[StageSegment, ...]


def tokens_per_step(params: dict[str, str]) -> int:
    """Sequence slots per optimizer step, from a pretraining run's logged params."""
    value = 1
    for key in ("pretrain.batch_size", "pretrain.accumulate", "pretrain.seq_len"):
        value *= int(params.get(key, 1))
    return value * max(1, int(params.get("trainer.devices", 1) or 1))


def chain_curve(client, chain: StageChain) -> tuple[list[float], list[float], list[float]]:
    """(tokens seen, loss, the x where each continued stage starts) along the chain's stages."""
    xs: list[float] = []
    ys: list[float] = []
    starts: list[float] = []
    offset = 0.0
    for i, segment in enumerate(chain.segments):
        history = client.get_metric_history(segment.run_id, LOSS_METRIC) or \
            client.get_metric_history(segment.run_id, FALLBACK_METRIC)
        points = sorted((m.step, m.value) for m in history)
        if i:
            starts.append(offset)
        for step, value in points:
            xs.append(offset + (step + 1) * segment.tokens_per_step)
            ys.append(value)
        if points:
            offset += (points[-1][0] + 1) * segment.tokens_per_step
    return xs, ys, starts


def switch_label(client, before: StageSegment, after: StageSegment) -> str:
    """What changes where `after` continues `before`: their corpora (the runs' `corpus` tags; the stage's
    name where a run has none), and the vocabulary where it is a new one."""
    def tags(segment: StageSegment) -> dict[str, str]:
        return client.get_run(segment.run_id).data.tags

    old, new = tags(before), tags(after)
    label = f"{old.get('corpus', before.name or 'stage 1')} → {new.get('corpus', after.name or 'next stage')}"
    vocab = new.get("vocab")
    return label + (", new vocabulary" if vocab not in (None, "init", old.get("vocab")) else "")


def running_mean(values: Sequence[float], window: int) -> list[float]:
    """The mean of each value and the (up to) `window - 1` before it."""
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value - (values[i - window] if i >= window else 0.0)
        out.append(total / min(i + 1, window))
    return out


def write_pretraining_curves(chains: Sequence[StageChain], tracking_uri: str, out_dir: Path,
                             title: str = "") -> list[Path]:
    """The figure as PNG, SVG and PDF in `out_dir` (nothing when no chain has a logged point)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    curves = [(chain, *chain_curve(client, chain)) for chain in chains]
    curves = [c for c in curves if c[1]]
    if not curves:
        return []
    fig, ax = plt.subplots(figsize=(6.4, 3.9), layout="constrained")
    styles = ("-", "--", "-.", ":")
    switches: dict[float, list[str]] = {}  # x -> what changes there, each once however many columns share it
    for i, (chain, xs, ys, starts) in enumerate(curves):
        line, = ax.plot([x / 1e6 for x in xs], running_mean(ys, SMOOTHING), styles[i % len(styles)],
                        linewidth=1.2, label=chain.label)
        for start, before, after in zip(starts, chain.segments, chain.segments[1:]):
            ax.axvline(start / 1e6, color=line.get_color(), linewidth=0.6, alpha=0.5)
            label = switch_label(client, before, after)
            if label not in switches.setdefault(start / 1e6, []):
                switches[start / 1e6].append(label)
    # along the line from the axes' top, left of it: a stage ends on its plateau, below where the curves
    # start, while the next stage's loss may jump up right of the line
    for x, labels in switches.items():
        for k, text in enumerate(labels):
            ax.annotate(text, (x, 1.0), xycoords=("data", "axes fraction"), xytext=(-3 - 10 * k, -3),
                        textcoords="offset points", rotation=90, ha="right", va="top", fontsize=7, color="0.2",
                        bbox={"boxstyle": "square,pad=0.2", "facecolor": "white", "edgecolor": "none"})
    ax.set_xlabel("tokens seen (millions)")
    ax.set_ylabel(f"MLM loss (mean of {SMOOTHING} steps)")
    ax.grid(True, which="both", linewidth=0.3, alpha=0.5)
    # under the axes: never over a curve; the title in lines of even length (no word alone on the last)
    fig.legend(fontsize=7, frameon=False, loc="outside lower center", ncols=2)
    if title:
        ax.set_title(wrap_text(title, 6.4 * 72 * 0.9, 10, balanced=True), fontsize=10)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    with matplotlib.rc_context(SAVE_RC):
        for fmt in FIGURE_FORMATS:
            path = out_dir / f"{FILE_STEM}.{fmt}"
            fig.savefig(path, dpi=PNG_DPI if fmt == "png" else None, metadata={"CreationDate": None}
                        if fmt == "pdf" else None)
            paths.append(path)
    plt.close(fig)
    return paths

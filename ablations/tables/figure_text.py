"""Text in the tables' figures (plot.py, pareto.py, pretrain_curves.py): titles, tick labels and point labels
wrapped to the room they have, never inside a word."""

from __future__ import annotations

import textwrap


def wrap_text(text: str, width_pt: float, fontsize: float, balanced: bool = False) -> str:
    """`text` wrapped to about `width_pt` points (an average character is ~0.6 of the font size wide) at
    spaces and after hyphens only: a word longer than the width keeps its line. `balanced`: in as few
    lines, of even length (no word left alone on the last line)."""
    chars = max(4, int(width_pt / (0.6 * fontsize)))
    out = []
    for line in text.split("\n"):
        lines = textwrap.wrap(line, chars, break_long_words=False, break_on_hyphens=True) or [""]
        if balanced and len(lines) > 1:
            longest = max(map(len, line.split()))
            chars = next(w for w in range(max(longest, len(line) // len(lines)), chars + 1)
                         if len(textwrap.wrap(line, w, break_long_words=False, break_on_hyphens=True)) <= len(lines))
            lines = textwrap.wrap(line, chars, break_long_words=False, break_on_hyphens=True)
        out += lines
    return "\n".join(out)

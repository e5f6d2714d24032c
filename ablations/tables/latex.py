"""LaTeX for the tables (ablations/tables/render.py): escaping that pdflatex's default input encoding
compiles, headers wrapped at spaces and hyphens, and a tabular that fits an article's \\textwidth (a font size
for its width, booktabs rules). Pure text functions: render.py lays out the cells."""

from __future__ import annotations

import re
from typing import Sequence

_LATEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                   "{": r"\{", "}": r"\}", "~": r"$\sim$", "^": r"\textasciicircum{}",
                   "±": r"$\pm$", "†": r"$^\dagger$", "‡": r"$^\ddagger$", "⊥": r"$^\bot$", "–": "--", "—": "---",
                   "…": r"\ldots{}",
                   "×": r"$\times$", "≥": r"$\geq$", "≤": r"$\leq$", "≈": r"$\approx$", "≠": r"$\neq$",
                   "→": r"$\to$", "←": r"$\leftarrow$", "✓": r"\checkmark{}", "<": r"$<$", ">": r"$>$",
                   "α": r"$\alpha$", "β": r"$\beta$", "δ": r"$\delta$", "Δ": r"$\Delta$", "ε": r"$\varepsilon$",
                   "μ": r"$\mu$", "σ": r"$\sigma$", "τ": r"$\tau$", "ρ": r"$\rho$", "χ": r"$\chi$"}


def latex_escape(text: str) -> str:
    """`text` as LaTeX that pdflatex's default input encoding compiles: its specials escaped, the symbols and
    Greek letters the tables use in math mode, and "--" kept two hyphens (not an en dash, as in `--stats`)."""
    text = str(text)
    return "".join("-{}" if ch == "-" and text[i + 1:i + 2] == "-" else _LATEX_SPECIALS.get(ch, ch)
                   for i, ch in enumerate(text))


def wrap_words(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` characters (a longer word keeps its own line), broken at spaces
    and after hyphens only: a column header stacked over a narrow column, never split inside a word."""
    pieces = [p for p in re.split(r"(?<=-)|(?= )", text) if p]
    lines: list[str] = []
    for piece in pieces:
        if lines and len(lines[-1] + piece) <= width:
            lines[-1] += piece
        else:
            lines.append(piece.lstrip())
    return [line.strip() for line in lines] or [""]


def stacked(rows_of_lines: list[list[str]], bottom: bool = False) -> list[list[str]]:
    """Cells given as lines, as that many table rows (a cell with fewer lines blank in the rows it lacks,
    at the top with `bottom`)."""
    depth = max(len(lines) for lines in rows_of_lines)
    padded = [([""] * (depth - len(lines)) + lines) if bottom else (lines + [""] * (depth - len(lines)))
              for lines in rows_of_lines]
    return [list(row) for row in zip(*padded)]


# characters a table's columns hold side by side (the widest line of each) up to which each font size fits
# an article's \textwidth (345pt), with the \tabcolsep below; beyond the last, \scriptsize
_FONT_FOR_WIDTH = ((70, r"\small"), (80, r"\footnotesize"))
# beyond this, a cell's std, CI and n go on lines of their own under its mean (ablations/tables/render.py): Table
# 14's seven variant columns held 106 characters, 455pt in \scriptsize
ONE_LINE_CHARS = 90
# beyond this (\scriptsize already), \tabcolsep narrows to 2pt: Table 14's seven variant columns, 83 characters,
# were 20pt too wide at 4pt
NARROW_SEPARATION_CHARS = 80


def latex_open(caption: str, spec: str, chars: int) -> list[str]:
    # a font size for the table's width, a narrower \tabcolsep and none outside the first and last column
    # (@{}, as booktabs advises): the table fits an article's \textwidth
    size = next((size for limit, size in _FONT_FOR_WIDTH if chars <= limit), r"\scriptsize")
    separation = 2 if chars > NARROW_SEPARATION_CHARS else 4
    return ["% needs \\usepackage{booktabs}", r"\begin{table}[t]", r"\centering", size,
            rf"\setlength{{\tabcolsep}}{{{separation}pt}}", rf"\caption{{{caption}}}",
            rf"\begin{{tabular}}{{@{{}}{spec}@{{}}}}", r"\toprule"]


def latex_close(lines: list[str], note_lines: list[str]) -> str:
    """The tabular's end, then the notes (already LaTeX) in a footnote-size block under it."""
    lines = [*lines, r"\bottomrule", r"\end{tabular}", r"\par\smallskip", r"\begin{minipage}{\linewidth}\footnotesize",
             *note_lines, r"\end{minipage}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def latex_header(labels: list[str], widths: list[int]) -> tuple[list[str], int]:
    """The header row(s): each label wrapped to its column's width, stacked from the bottom; and the
    characters the columns then hold side by side."""
    wrapped = [wrap_words(label, max(width, 6)) for label, width in zip(labels, widths)]
    chars = sum(max(width, *map(len, lines)) for lines, width in zip(wrapped, widths))
    return [" & ".join(latex_escape(t) for t in row) + r" \\" for row in stacked(wrapped, bottom=True)], chars


def latex_row(parts: Sequence[str]) -> str:
    return " & ".join(parts) + r" \\"

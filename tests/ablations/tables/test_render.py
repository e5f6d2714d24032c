"""One renderer for the vocabulary tables: `bioablate vocab compare` prints exactly what `bioablate table`
writes for the same Table 1, in each format. The LaTeX of every table, shipped or rendered, compiles with
pdflatex and fits an article's \\textwidth."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ablations.cli import main
from ablations.results import FAILED, FINISHED, CellRun, TableLayout
from ablations.tables.cost import add_costs
from ablations.tables.latex import latex_escape, wrap_words
from ablations.tables.render import render_data, render_grid
from ablations.tables.stats import TableData, table_data
from ablations.tables.vocab_compare import Table1Row, Table8Row
from ablations.tables.vocab_grids import table1_grid, table8_grid

VOCABS = ["bert-base-uncased", "pubmedbert-uncased"]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["markdown", "latex", "csv"])
def test_vocab_compare_prints_the_table_command_s_table(fmt, capsys, tmp_path, data_dir):
    spec = tmp_path / "terms.yaml"
    spec.write_text(f"name: terms\nkind: vocab\nvocab: {{table: terms, vocabs: [{', '.join(VOCABS)}]}}\n")
    assert main(["table", str(spec), "--work-dir", str(tmp_path / "work"), "--data-dir", str(data_dir),
                 "--format", fmt]) == 0
    from_table = capsys.readouterr().out
    vocab_args = [a for v in VOCABS for a in ("--vocab", v)]
    assert main(["vocab", "compare", *vocab_args, "--no-table8", "--data-dir", str(data_dir), "--format", fmt]) == 0
    assert capsys.readouterr().out == from_table
    if fmt == "markdown":
        assert "| lymphoma | disease | l-ym-ph-oma | ✓ |" in from_table


def test_vocab_compare_unknown_format_is_a_one_line_error(capsys):
    assert main(["vocab", "compare", "--format", "html"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("bioablate: error: unknown table format 'html'; known: csv")


# ---------------------------------------------------------------------------------------------------
# LaTeX a paper can paste: every table compiles with pdflatex (article class, booktabs: Debian's TeX Live,
# which .ci/run installs) and fits \textwidth

RESULTS = Path(__file__).resolve().parents[3] / "docs" / "results"
needs_pdflatex = pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex not installed (apt-get "
                                    "install texlive-latex-base texlive-latex-recommended)")


def compiled_width(tex: str, tmp_path: Path) -> tuple[float, float]:
    """(the tabular's width, \\textwidth) in pt, of `tex` compiled in a minimal article document. Fails on
    any LaTeX error and on any overfull line (a note or caption running into the margin)."""
    start, end = tex.index(r"\begin{tabular}"), tex.rindex(r"\end{tabular}") + len(r"\end{tabular}")
    measured = tex[:start] + r"\sbox0{" + tex[start:end] + r"}\typeout{TABLE WIDTH \the\wd0}\usebox0" + tex[end:]
    (tmp_path / "doc.tex").write_text("\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage{amssymb}\n"
                                      "\\begin{document}\n\\typeout{TEXT WIDTH \\the\\textwidth}\n" + measured
                                      + "\n\\end{document}\n", encoding="utf-8")
    done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    log = (tmp_path / "doc.log").read_text(encoding="utf-8", errors="replace")
    errors = [line for line in log.splitlines() if line.startswith("!")]
    assert done.returncode == 0 and not errors, errors or done.stdout[-2000:]
    overfull = re.findall(r"Overfull \\hbox \((.*?) too wide\)", log)
    assert not overfull, f"lines wider than the text by {overfull}"
    width = float(re.search(r"TABLE WIDTH ([\d.]+)pt", log).group(1))
    return width, float(re.search(r"TEXT WIDTH ([\d.]+)pt", log).group(1))


# Rendered before the LaTeX compiled: the command docs/results/README.md gives for each folder re-renders it
# (the trained tables from their stores, kept in ignored work directories elsewhere: the same runs, the same
# numbers; Table 8 from the staged data); the test then passes and the folder must leave this list (strict).
NOT_RE_RENDERED = {"table13_tagging-mini", "table9_proxy-mini"}  # their stores are gone: ~10 hours to rerun


@needs_pdflatex
@pytest.mark.parametrize("folder", [pytest.param(p.parent.name, marks=pytest.mark.xfail(
    strict=True, reason="rendered before the LaTeX compiled; re-render it from its store"))
    if p.parent.name in NOT_RE_RENDERED else p.parent.name for p in sorted(RESULTS.glob("*/table.tex"))])
def test_each_shipped_table_compiles_and_fits_the_text_width(folder, tmp_path):
    width, text_width = compiled_width((RESULTS / folder / "table.tex").read_text(encoding="utf-8"), tmp_path)
    assert width <= text_width, f"docs/results/{folder}/table.tex is {width - text_width:.1f}pt too wide"


WIDE_LABELS = {"general-pubmed": "Wiki+Books → PubMed, Wiki+Books vocab",
               "general-pubmed-vocab": "Wiki+Books → PubMed, PubMed vocab", "pubmed-half": "PubMed (half time)",
               "pubmedbert": "PubMed"}
WIDE_TASKS = ("bc5-chem", "ebm-pico", "chemprot", "biosses", "hoc", "pubmedqa")


def wide_table() -> TableData:
    """Table 9's shape at its widest: four long column labels, six tasks and the BLURB row, every cell bold
    (ties) with both marks, a missing seed's footnote, a Δ per variant, the cost rows."""
    layout = TableLayout(title="Table 9 (proxy): pretraining corpora and time", rows="task", columns="model",
                         baseline="pubmedbert", column_order=tuple(WIDE_LABELS), column_labels=WIDE_LABELS,
                         paper={t: dict.fromkeys(WIDE_LABELS, 92.85) for t in WIDE_TASKS}, blurb_row=True,
                         cost=True, caption="Four-layer BERTs pretrained at equal compute. " * 8)
    compute = {"system/compute/flops": 1.6e13, "system/compute/device_seconds": 287.9,
               "system/compute/peak_memory_bytes": 3.7e9, "system/compute/device": "AMD EPYC"}
    runs = [CellRun(t, c, t, s, FINISHED, 0.5555, run_id=f"{t}{c}{s}", compute=compute)
            for t in WIDE_TASKS for c in WIDE_LABELS for s in range(3)]
    runs[3] = CellRun("bc5-chem", "general-pubmed-vocab", "bc5-chem", 0, FAILED, reason="RuntimeError: out of memory")
    data = table_data(layout, runs)
    stage = {"system/compute/flops": 8.4e16, "system/compute/device_seconds": 1433.9,
             "system/compute/peak_memory_bytes": 2.0 ** 31}
    add_costs(data, runs, {c: [("pubmed-wwm", stage)] for c in WIDE_LABELS})
    for cell in data.cells.values():  # what significance.py adds from the runs' test predictions
        cell.ci, cell.example_p_corrected = (cell.mean - 23.91, cell.mean + 23.91), 0.01
        cell.seeds_needed, cell.effect = 568843, -0.18
    return data


@needs_pdflatex
def test_the_latex_of_a_wide_table_compiles_and_fits(tmp_path):
    tex = render_data(wide_table(), "latex")
    assert r"$\to$" in tex and "→" not in tex and r"$\Delta$" in tex
    width, text_width = compiled_width(tex, tmp_path)
    assert width <= text_width


SEVEN_LABELS = {"dummify-cls": "dummify, [CLS]", "dummify-mention": "dummify, mention",
                "original-cls": "original, [CLS]", "original-mention": "original, mention",
                "markers-cls": "markers, [CLS]", "markers-mention": "markers, mention",
                "markers-start": "markers, entity start"}


@needs_pdflatex
def test_seven_variant_columns_put_the_std_ci_and_n_under_the_mean_and_fit(tmp_path):
    """Table 14's shape (seven variant columns, two-digit standard deviations): one line per cell and a Δ
    column per variant are too wide for a 345pt text width, so each cell's std and Δ go on lines of their own."""
    layout = TableLayout(title="Table 14: relation input and encoding", rows="task", columns="relation",
                         baseline="dummify-cls", column_order=tuple(SEVEN_LABELS), column_labels=SEVEN_LABELS,
                         paper={t: dict.fromkeys(SEVEN_LABELS, 77.24) for t in ("chemprot", "ddi")})
    runs = [CellRun(t, c, t, s, FINISHED, 0.1553 + 0.1 * s, run_id=f"{t}{c}{s}")
            for t in ("chemprot", "ddi") for c in SEVEN_LABELS for s in range(3)]
    data = table_data(layout, runs)
    for cell in data.cells.values():
        cell.ci = (cell.mean - 10.74, cell.mean + 10.74)
    tex = render_data(data, "latex")
    assert r"25.5 $\pm$ 10.0" not in tex and r"{\scriptsize $\pm$ 10.0}" in tex
    assert r"{\scriptsize $\Delta$ +0.0}" in tex
    width, text_width = compiled_width(tex, tmp_path)
    assert width <= text_width


@needs_pdflatex
@pytest.mark.slow
def test_a_published_table_s_latex_compiles_and_fits(tmp_path, monkeypatch):
    """Through a real MLflow store, as `bioablate table` writes it: the agreement line's Kendall's τ included."""
    from ablations.tables.publish import publish_runs

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    layout = TableLayout(title="Tagging schemes", rows="task", columns="tagging", baseline="bio",
                         column_order=("bio", "bioul", "io"),
                         column_labels={"bio": "BIO", "bioul": "BIOUL", "io": "IO"},
                         paper={"bc5-chem": {"bio": 93.33, "bioul": 93.37, "io": 93.11}})
    runs = [CellRun("bc5-chem", c, "bc5-chem", s, FINISHED, v + 0.01 * s, run_id=f"{c}{s}")
            for c, v in (("bio", 0.90), ("bioul", 0.85), ("io", 0.93)) for s in range(3)]
    publish_runs("tagging", layout, runs, f"sqlite:///{tmp_path / 'mlruns.db'}", tmp_path / "out",
                 tmp_path / "mlartifacts")
    tex = (tmp_path / "out" / "table.tex").read_text(encoding="utf-8")
    assert "Kendall's $\\tau$" in tex and "τ" not in tex
    width, text_width = compiled_width(tex, tmp_path)
    assert width <= text_width


@needs_pdflatex
def test_the_vocabulary_tables_compile_and_fit(tmp_path):
    vocabs = ["bert-base-uncased", "scibert-scivocab-uncased", "pubmedbert-uncased"]
    terms = [Table1Row("acetyltransferase", "gene", dict(zip(vocabs, ["ace-ty-lt-ran-sf-eras-e", "acetyl-transferase",
                                                                      "✓"])), {vocabs[0]: "ace-ty-lt-ran-sf-eras-e"}),
             Table1Row("chloramphenicol", "drug", dict(zip(vocabs, ["ch-lor-amp-hen-ico-l", "chlor-amp-hen-icol",
                                                                    "✓"])), {})]
    lengths = [Table8Row("hoc-sentences", 40.0, 33.0, 40.6, 31.0), Table8Row("bioasq", 361.1, 300.5, 702.4, 541.4)]
    for name, grid in (("t1", table1_grid(terms)), ("t8", table8_grid(lengths, vocabs[0], vocabs[2]))):
        (tmp_path / name).mkdir()
        width, text_width = compiled_width(render_grid(grid, "latex"), tmp_path / name)
        assert width <= text_width, name


def test_latex_escapes_what_pdflatex_cannot_read():
    assert latex_escape("Kendall's τ = 1.00; Wiki+Books → PubMed") == \
        r"Kendall's $\tau$ = 1.00; Wiki+Books $\to$ PubMed"
    assert latex_escape("`bioablate table --stats`") == r"`bioablate table -{}-stats`"  # not an en dash


def test_a_header_wraps_at_spaces_and_hyphens_only():
    assert wrap_words("Wiki+Books → PubMed, Wiki+Books vocab", 12) == ["Wiki+Books →", "PubMed,", "Wiki+Books",
                                                                       "vocab"]
    assert wrap_words("scibert-scivocab-uncased", 10) == ["scibert-", "scivocab-", "uncased"]
    assert wrap_words("acetyltransferase", 5) == ["acetyltransferase"]  # a longer word keeps its line

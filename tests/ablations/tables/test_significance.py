"""A table's marks from its runs' test predictions, end to end on a real MLflow store built by hand: 27
columns of one PubMedQA row (26 compared with the baseline, table6_blurb's count), 3 seeds each. One variant
answers far better on every seed and most questions; the 25 others predict exactly as the baseline. The
two-level bootstrap gets the 2,080 resamples Holm over 26 tests needs, and the one variant is marked (its
corrected p 26 x 2 / 2081); with 1,000 it could not be (26 x 2 / 1001 = 0.052)."""

from __future__ import annotations

import csv
import io

import pytest

from ablations.results import TableLayout
from ablations.tables.long_form import long_form
from ablations.tables.render import render_data
from ablations.tables.significance import annotate
from ablations.tables.stats import table_data
from tests.ablations.tables.test_agreement import cell_runs, log_runs

QUESTIONS = 60
VARIANTS = [f"v{i:02d}" for i in range(26)]


def predictions(right: int) -> list[dict]:
    return [{"id": f"q{i}", "gold": "yes", "prediction": "yes" if i < right else "no"} for i in range(QUESTIONS)]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("marks")
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    right = {"base": [30, 32, 28], "v00": [55, 57, 54], **{v: [30, 32, 28] for v in VARIANTS[1:]}}
    scores = {c: {"pubmedqa": [100 * r / QUESTIONS for r in rs]} for c, rs in right.items()}
    by_seed = {c: [predictions(r) for r in rs] for c, rs in right.items()}
    log_runs(uri, "marks", scores, tmp_path, by_seed)
    return uri, tmp_path


def test_a_26_comparison_table_marks_the_difference_that_holds_over_seeds_and_units(store):
    uri, tmp_path = store
    layout = TableLayout(title="26 tests", rows="task", columns="model", baseline="base",
                         column_order=("base", *VARIANTS), differences=True)
    data = table_data(layout, cell_runs(uri, "marks"))
    annotate(data, uri, tmp_path / "cache")
    marked = data.cell("pubmedqa", "v00")
    assert marked.diff_p == pytest.approx(2 / 2081) and marked.diff_p_corrected == pytest.approx(26 * 2 / 2081)
    assert marked.significant and marked.mark_test.startswith("two-level bootstrap")
    assert all(not data.cell("pubmedqa", v).significant and data.cell("pubmedqa", v).diff_p == 1.0
               for v in VARIANTS[1:])
    # the difference and its interval: +41.11 (25, 25, 26 questions of 60 on the three seeds), the interval
    # within the seeds' and units' reach, never at zero
    assert marked.diff_mean == pytest.approx(100 * (25 + 25 + 26) / 3 / QUESTIONS)
    assert 0 < marked.diff_ci[0] < marked.diff_mean < marked.diff_ci[1]
    md = render_data(data)
    [line] = [x for x in md.splitlines() if x.startswith("| pubmedqa")]
    cells = [c.strip() for c in line.split("|")[2:-1]]
    assert "†" in cells[1] and not any("†" in c for c in cells[2:]) and "‡" not in md
    # Δ v00, after the 27 score columns, with its interval (table.differences)
    assert cells[27] == f"{marked.diff_mean:+.1f} [{marked.diff_ci[0]:.1f}, {marked.diff_ci[1]:.1f}]"
    assert "two-level bootstrap" in md and "2080 resamples" in long_form(data)
    rows = {r["column"]: r for r in csv.DictReader(io.StringIO(render_data(data, "csv")))}
    assert float(rows["v00"]["diff_ci_low"]) == pytest.approx(marked.diff_ci[0])
    assert rows["v00"]["fixed_model_significant"] == "true" and rows["v01"]["fixed_model_p"] == "1.0"
    assert rows["v01"]["fixed_model_p_corrected"] == ""  # degenerate (identical predictions): out of the family
    # 1,000 resamples (the old count) would leave it unmarked: 26 x 2 / 1001 = 0.052 (test_resampling.py)

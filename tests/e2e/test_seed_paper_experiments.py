"""The seed papers' experiment YAMLs (BioBERT Tables 4-6, BioALBERT Table 7, Bio-ELECTRA Tables 2-6) run end
to end under the micro profile into one store and render their tables with the papers' numbers; a file of
its own beside tests/e2e/test_experiments.py, so that CI's two workers share the longest tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablations.experiment import experiment_files
from tests.experiment_runs import SEED_PAPER_PREFIXES, run_under_micro_and_check, single_threaded

SEED_PAPERS = [p for p in experiment_files() if p.stem.startswith(SEED_PAPER_PREFIXES)]


@pytest.fixture(scope="module")
def shared_work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("seed-paper-experiments")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    with single_threaded():
        yield


def test_the_seed_papers_have_experiment_files():
    assert {p.stem for p in SEED_PAPERS} >= {"biobert_table4_ner", "biobert_table5_re", "biobert_table6_qa",
                                            "bioalbert_table7", "bioelectra_table2_qa", "bioelectra_table3_yesno",
                                            "bioelectra_table5_rerank", "bioelectra_table4_6_ner_re"}


@pytest.mark.slow
@pytest.mark.parametrize("path", SEED_PAPERS, ids=[p.stem for p in SEED_PAPERS])
def test_a_seed_paper_experiment_runs_end_to_end_under_micro_and_renders_its_table(path, shared_work, data_dir,
                                                                                   capsys):
    run_under_micro_and_check(path, shared_work, data_dir, capsys)

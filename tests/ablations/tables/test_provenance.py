"""The line under a table's title that says what its runs were (`setup_line`), from their resolved configs:
one value for every run reads plainly, a value that differs says where (by task, column or row), and a
cap on the examples shows only where a run is capped."""

from __future__ import annotations

import pytest

from ablations.tables.provenance import RunSetup, setup_line

MICRO = dict(model="random-bert (2 layers × 64 hidden)", epochs=1, lr=5e-4, batch_size=16, max_train_examples=32,
             max_eval_examples=32)


def runs(**by_task) -> list[RunSetup]:
    """Two heads on each task; keyword `task={field: value}` changes that task's runs."""
    return [RunSetup(task, task, column, **{**MICRO, **changes})
            for task, changes in by_task.items() for column in ("Linear Layer", "Bi-LSTM")]


def test_one_value_for_every_run_reads_plainly():
    assert setup_line(runs(**{"bc5-chem": {}, "gad": {}})) == (
        "Runs: random-bert (2 layers × 64 hidden); 1 epoch; learning rate 0.0005; batch size 16; at most 32 "
        "training examples; at most 32 evaluation examples (from the runs' resolved configs).")


def test_a_value_that_follows_the_task_says_which_task():
    line = setup_line(runs(**{"bc5-chem": {"lr": 2e-4, "max_train_examples": 560, "epochs": 2},
                              "gad": {"lr": 1e-4, "max_train_examples": 400, "epochs": 2}}))
    assert "learning rate 0.0002 (bc5-chem), 0.0001 (gad)" in line
    assert "training examples at most 560 (bc5-chem), 400 (gad)" in line
    assert "; 2 epochs;" in line


def test_a_value_that_follows_the_column_says_which_column():
    table = [RunSetup("gad", "gad", column, **{**MICRO, "lr": lr}) for column, lr in (("high", 5e-4), ("low", 1e-4))]
    table += [RunSetup("biosses", "biosses", column, **{**MICRO, "lr": lr}) for column, lr in (("high", 5e-4),
                                                                                               ("low", 1e-4))]
    assert "learning rate 0.0005 (high), 0.0001 (low)" in setup_line(table)


def test_uncapped_runs_say_nothing_of_examples_and_partly_capped_ones_say_all():
    whole = runs(gad={"max_train_examples": None, "max_eval_examples": None})
    assert "examples" not in setup_line(whole)
    mixed = runs(**{"gad": {"max_train_examples": 400}, "bc5-chem": {"max_train_examples": None}})
    assert "training examples at most 400 (gad), all (bc5-chem)" in setup_line(mixed)


def test_several_models_each_with_where_it_runs():
    table = [RunSetup("gad", "gad", column, **{**MICRO, "model": model})
             for column, model in (("rb", "random-bert (2 layers × 64 hidden)"),
                                   ("minilm", "general-minilm (6 layers × 384 hidden)"))]
    assert setup_line(table).startswith("Runs: models random-bert (2 layers × 64 hidden) (rb), "
                                        "general-minilm (6 layers × 384 hidden) (minilm); 1 epoch;")


def test_no_runs_no_line():
    assert setup_line([]) == ""


def test_a_cap_on_a_task_scored_by_question_says_it_keeps_whole_questions():
    """The cap counts instances, but a ranked question keeps all its candidates (it may take more): the
    line says so for the tasks scored by question, each named once whatever its folds."""
    table = [RunSetup(f"bioelectra-rerank@fold{k}", "bioelectra", column, **MICRO, eval_by_question=True)
             for k in (1, 2) for column in ("plain", "weighted")]
    table += runs(**{"gad": {}})
    assert "at most 32 evaluation examples (whole questions for bioelectra-rerank: all their candidates or " \
           "snippets)" in setup_line(table)
    assert "whole questions" not in setup_line(runs(**{"gad": {}}))
    uncapped = [RunSetup("bioelectra-rerank", "r", "c", **{**MICRO, "max_eval_examples": None}, eval_by_question=True)]
    assert "whole questions" not in setup_line(uncapped)


def test_extractive_qa_runs_name_their_answer_merging_rule_and_other_runs_say_nothing():
    rule = "QA answers by biobert-sum (BioBERT's rule: ...)"
    table = runs(**{"bioasq-4b-factoid": {"answers": rule}, "gad": {}})
    assert setup_line(table).endswith(f"; {rule} (from the runs' resolved configs).")
    assert "QA answers" not in setup_line(runs(**{"gad": {}}))
    mixed = runs(**{"bioasq-4b-factoid": {"answers": "QA answers by biobert-sum"},
                    "bioelectra-factoid": {"answers": "QA answers by bioelectra-pairs"}})
    assert "QA answers by biobert-sum (bioasq-4b-factoid), QA answers by bioelectra-pairs (bioelectra-factoid)" \
        in setup_line(mixed)


@pytest.mark.parametrize("name,rule", [
    ("biobert_table6_qa", "QA answers by biobert-sum (BioBERT's rule: an answer's probabilities summed over a "
                          "question's snippets, answers over 100 characters dropped)"),
    ("bioelectra_table2_qa", "QA answers by bioelectra-pairs (Bio-ELECTRA's rule: each question × snippet pair "
                             "scored on its own, no merging)"),
])
def test_the_seed_papers_qa_tables_name_the_rule_their_paper_merged_answers_by(name, rule, data_dir, tmp_path):
    """The line under the title of BioBERT's Table 6 and Bio-ELECTRA's Table 2, as `bioablate table` writes it
    from the planned runs' resolved configs (nothing is run)."""
    from ablations.experiment import Store, load_experiment, resolve
    from ablations.tables.report import run_setups

    experiment = load_experiment(name, profile="micro", data_dir=str(data_dir), work_dir=str(tmp_path / "work"))
    line = setup_line(run_setups(experiment, resolve(experiment, Store(experiment.store()[1]))))
    assert line.endswith(f"; {rule} (from the runs' resolved configs).")


def test_the_header_names_the_store_without_a_path_of_the_rendering_machine():
    """Issue 38: a shipped result named a temporary store on the machine that rendered it."""
    from ablations.tables.provenance import shown_store

    assert shown_store("sqlite:////tmp/pytest-of-root/x/mlruns.db") == \
        "sqlite store mlruns.db (a local file, in the work directory by default)"
    assert shown_store("/tmp/some/where/mlruns") == "file store mlruns (a local folder)"
    assert shown_store("postgresql+psycopg2://me:secret@127.0.0.1:5432/db") == \
        "postgresql+psycopg2://me:***@127.0.0.1:5432/db"

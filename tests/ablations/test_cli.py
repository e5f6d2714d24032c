"""The command line: user mistakes give one clear line (exit 2), and the happy paths work end to end."""

from __future__ import annotations

import shutil

import pytest
from mlflow.tracking import MlflowClient

from ablations.cli import main


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("bioablate: error: ")
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def test_unknown_task_lists_the_known_ones(capsys, data_dir):
    code, _, err = run_cli(capsys, "finetune", "--task", "bc5-chemm", "--data-dir", str(data_dir))
    assert_one_line_error(code, err, "unknown task 'bc5-chemm'", "known:", "bc5-chem,", "pubmedqa")


def test_missing_data_folder(capsys, tmp_path):
    code, _, err = run_cli(capsys, "data", "stats", "--data-dir", str(tmp_path / "nowhere"))
    assert_one_line_error(code, err, str(tmp_path / "nowhere"), "does not exist", "BIOABLATE_DATA")


def test_incomplete_data_folder_lists_missing_files_per_dataset(capsys, data_dir, tmp_path):
    (tmp_path / "GAD").mkdir()
    shutil.copy(data_dir / "GAD" / "train.tsv", tmp_path / "GAD" / "train.tsv")
    code, _, err = run_cli(capsys, "data", "stats", "--data-dir", str(tmp_path))
    assert_one_line_error(code, err, "is missing files", "gad: GAD/test.tsv",
                          "bc5-chem: BC5CDR-chem-IOB/train.tsv", "--data-dir")


def test_no_data_dir_at_all(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("BIOABLATE_DATA", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))  # no fetched data either
    code, _, err = run_cli(capsys, "data", "stats")
    assert_one_line_error(code, err, "no data directory", "--data-dir", "BIOABLATE_DATA")


def test_malformed_line_names_file_and_line(capsys, data_dir, tmp_path):
    target = tmp_path / "NCBI-disease-IOB"
    shutil.copytree(data_dir / "NCBI-disease-IOB", target)
    lines = (target / "train.tsv").read_text().splitlines(keepends=True)
    lines[4] = "Identification B-Disease extra\n"  # line 5: three columns, no tab
    (target / "train.tsv").write_text("".join(lines))
    code, _, err = run_cli(capsys, "data", "stats", "--task", "ncbi-disease", "--data-dir", str(tmp_path))
    assert_one_line_error(code, err, f"{target / 'train.tsv'}:5:")


def test_unknown_config_key_names_the_valid_ones(capsys, data_dir):
    code, _, err = run_cli(capsys, "finetune", "--task", "gad", "--data-dir", str(data_dir), "finetune.lrr=1e-5")
    assert_one_line_error(code, err, "unknown config key 'finetune.lrr'", "valid keys under 'finetune'", "lr,")


def test_bad_config_value_and_bad_override(capsys, data_dir):
    code, _, err = run_cli(capsys, "finetune", "--task", "gad", "--data-dir", str(data_dir), "finetune.lr=fast")
    assert_one_line_error(code, err, "bad value for 'finetune.lr'")
    code, _, err = run_cli(capsys, "finetune", "--task", "gad", "--data-dir", str(data_dir), "finetune.lr")
    assert_one_line_error(code, err, "not of the form key=value")


def test_unknown_model_and_profile(capsys, data_dir, tmp_path):
    code, _, err = run_cli(capsys, "finetune", "--task", "gad", "--data-dir", str(data_dir),
                           "--work-dir", str(tmp_path), "--model", "no-such-model")
    assert_one_line_error(code, err, "model 'no-such-model'", "general-minilm")
    code, _, err = run_cli(capsys, "finetune", "--task", "gad", "--profile", "huge")
    assert_one_line_error(code, err, "unknown profile 'huge'", "micro, mini, base")


def test_data_stats_matches_table3_for_exact_datasets(capsys, data_dir):
    code, out, _ = run_cli(capsys, "data", "stats", "--data-dir", str(data_dir), "--task", "ncbi-disease",
                           "--task", "biosses", "--task", "pubmedqa")
    assert code == 0
    rows = [line.split() for line in out.splitlines() if line.startswith(("ncbi-disease", "biosses", "pubmedqa"))]
    assert len(rows) == 9
    for row in rows:  # dataset split unit ours paper diff instances
        assert row[-4] == row[-3] and row[-2] == "=", row


def test_user_dataset_registered_from_yaml(capsys, data_dir, tmp_path):
    """A CoNLL folder becomes a task without Python: three real NCBI-disease excerpts as splits."""
    folder = tmp_path / "my-ner"
    folder.mkdir()
    sentences = (data_dir / "NCBI-disease-IOB" / "devel.tsv").read_text().split("\n\n")
    for split, part in (("train", sentences[:60]), ("dev", sentences[60:90]), ("test", sentences[90:120])):
        (folder / f"{split}.tsv").write_text("\n\n".join(part) + "\n")
    (tmp_path / "my-ner.yaml").write_text(
        "name: my-ner\nformat: conll\npath: my-ner\n"
        "files: {train: train.tsv, dev: dev.tsv, test: test.tsv}\nlabels: [Disease]\nmax_length: 64\n")
    code, out, err = run_cli(capsys, "finetune", "--task", "my-ner", "--datasets", str(tmp_path / "my-ner.yaml"),
                             "--data-dir", str(data_dir), "--work-dir", str(tmp_path / "work"),
                             "finetune.epochs=1", "trainer.progress_bar=false")
    assert code == 0, err
    run_id = out.split("finished ")[1].split()[0]
    client = MlflowClient(f"sqlite:///{tmp_path / 'work' / 'mlruns.db'}")
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["task"] == "my-ner"
    assert {"test/score", "test/precision", "test/recall"} <= set(run.data.metrics)


def test_user_dataset_yaml_with_unknown_key(capsys, data_dir, tmp_path):
    (tmp_path / "bad.yaml").write_text("name: x\nformat: conll\npath: .\nfiles: {}\nlabels: []\nlabel: y\n")
    code, _, err = run_cli(capsys, "finetune", "--task", "x", "--datasets", str(tmp_path / "bad.yaml"),
                           "--data-dir", str(data_dir))
    assert_one_line_error(code, err, "bad.yaml", "unknown key 'label'", "valid keys")


@pytest.mark.parametrize("what,expected", [("tasks", "chemprot"), ("models", "general-minilm")])
def test_list(capsys, what, expected):
    code, out, _ = run_cli(capsys, "list", what)
    assert code == 0 and expected in out


@pytest.mark.slow
def test_pretrain_dry_run_prints_the_corpus_and_passes_and_builds_nothing(capsys, data_dir, tmp_path):
    work = tmp_path / "work"
    code, out, _ = run_cli(capsys, "pretrain", "--profile", "base", "--dry-run", "--data-dir", str(data_dir),
                           "--work-dir", str(work), "--corpus", "pubmed")
    assert code == 0
    corpus, training, warning = out.strip().splitlines()
    assert corpus.startswith("corpus pubmed: ") and "words" in corpus and "estimated" in corpus
    assert "62,500 steps" in training and "passes over the corpus" in training
    assert warning.startswith("warning: ") and "more than 10" in warning
    assert not (work / "mlruns.db").exists() and not (work / "cache" / "shards").exists()

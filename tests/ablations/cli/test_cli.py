"""The command line: user mistakes give one clear line (exit 2), and the happy paths work end to end."""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ablations.api.catalog import LISTINGS
from ablations.cli import build_parser, main
from ablations.cli.help import subcommands
from ablations.config import profile_config, result_keys

REPO_ROOT = Path(__file__).resolve().parents[3]


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
    code, out, err = run_cli(capsys, "data", "stats", "--datasets", str(tmp_path / "my-ner.yaml"))
    assert code == 0, err  # counted before any run: every line of its files read
    rows = [line.split() for line in out.splitlines() if line.startswith("my-ner ")]
    assert [(row[1], int(row[-1])) for row in rows] == [("train", 60), ("dev", 30), ("test", 30)], out
    code, out, err = run_cli(capsys, "finetune", "--task", "my-ner", "--datasets", str(tmp_path / "my-ner.yaml"),
                             "--data-dir", str(data_dir), "--work-dir", str(tmp_path / "work"), "finetune.epochs=1")
    assert code == 0, err
    assert "v_num" not in err and "Epoch 0" not in err  # written to a file: no Lightning progress bar
    run_id = out.split("finished ")[1].split()[0]
    client = MlflowClient(f"sqlite:///{tmp_path / 'work' / 'mlruns.db'}")
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["task"] == "my-ner"
    assert {"test/score", "test/precision", "test/recall"} <= set(run.data.metrics)
    # `status` of an experiment over it plans its runs once --datasets registers it, and names the task without
    (tmp_path / "mine.yaml").write_text("name: mine\nprofile: micro\nmodels:\n  random: {name_or_path: random-bert}\n"
                                        "tasks: [my-ner]\nseeds: 1\ntable: {rows: task, columns: model}\n")
    where = ["--data-dir", str(data_dir), "--work-dir", str(tmp_path / "work")]
    code, out, err = run_cli(capsys, "status", str(tmp_path / "mine.yaml"), "--datasets",
                             str(tmp_path / "my-ner.yaml"), *where)
    assert code == 0 and "NOT_RUN" in out and "finetune random/my-ner/s1" in out, (out, err)
    from datamodules.registry import DATASETS

    DATASETS.unregister("my-ner")  # as a new process has it (this one registered it above)
    code, out, err = run_cli(capsys, "status", str(tmp_path / "mine.yaml"), *where)
    assert code == 2 and "my-ner" in err and len(err.strip().splitlines()) == 1, err


def test_user_dataset_yaml_with_unknown_key(capsys, data_dir, tmp_path):
    (tmp_path / "bad.yaml").write_text("name: x\nformat: conll\npath: .\nfiles: {}\nlabels: []\nlabel: y\n")
    code, _, err = run_cli(capsys, "finetune", "--task", "x", "--datasets", str(tmp_path / "bad.yaml"),
                           "--data-dir", str(data_dir))
    assert_one_line_error(code, err, "bad.yaml", "unknown key 'label'", "valid keys")


@pytest.mark.parametrize("what,expected", [("tasks", "chemprot"), ("models", "general-minilm")])
def test_list(capsys, what, expected):
    code, out, _ = run_cli(capsys, "list", what)
    assert code == 0 and expected in out


@pytest.mark.parametrize("what,fields", [("tasks", 4), ("experiments", 3)])
def test_list_columns_are_as_wide_as_their_longest_entry(capsys, what, fields):
    """Every row's columns start at the same place, one space past the longest name (bioelectra-factoid,
    bioelectra_table3_yesno), however long the names registered or packaged."""
    code, out, _ = run_cli(capsys, "list", what)
    rows = [line for line in out.splitlines() if not line.startswith("(")]
    assert code == 0 and len(rows) > 10
    assert rows[0].split() == {"tasks": ["task", "source", "task_type", "metric", "max_length"],
                               "experiments": ["experiment", "kind", "profile", "description"]}[what]  # a header
    starts = {tuple(m.start() for m in re.finditer(r"(?<= )\S", row))[:fields - 1] for row in rows}
    longest = max(len(row.split()[0]) for row in rows)
    assert len(starts) == 1 and starts.pop()[0] == longest + 1, starts


def test_list_alone_lists_what_can_be_listed(capsys):
    from ablations.api.catalog import LISTINGS

    code, out, _ = run_cli(capsys, "list")
    lines = out.strip().splitlines()
    assert code == 0 and lines[0] == "bioablate list WHAT, where WHAT is one of:"
    assert [line.split()[0] for line in lines[1:]] == list(LISTINGS)  # every listing, each described


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


# ---------------------------------------------------------------------------------------------------
# The CLI teaches itself: examples on every help page, listings, --version, packaged names


def _pages(parser, path=()):
    """(command path, parser) for the top-level parser and every subcommand, nested ones too."""
    yield path, parser
    for name, child in subcommands(parser).items():
        yield from _pages(child, (*path, name))


def test_every_help_page_ends_with_examples_that_parse():
    pages = list(_pages(build_parser()))
    assert {("finetune",), ("data", "fetch"), ("vocab", "compare"), ("run",), ("list",)} <= {p for p, _ in pages}
    for path, parser in pages:
        page = parser.format_help()
        assert "\nExamples:\n" in page, f"`bioablate {' '.join(path)} --help` has no Examples section"
        if path:
            assert page.split("\n\n")[1].strip(), f"`bioablate {' '.join(path)} --help` has no description"
        commands = [line.strip() for line in page.split("\nExamples:\n", 1)[1].splitlines() if line.strip()]
        assert commands, path
        for command in commands:
            argv = shlex.split(command)
            assert argv[0] == "bioablate" and tuple(argv[1:1 + len(path)]) == path, (path, command)
            if argv[-1] == "--help":
                continue
            try:
                build_parser().parse_args(argv[1:])
            except SystemExit:
                pytest.fail(f"the example `{command}` on `bioablate {' '.join(path)} --help` does not parse")


def test_pretrain_help_names_every_objective_and_pretraining_overrides():
    page = subcommands(build_parser())["pretrain"].format_help()
    assert "ELECTRA" in page and "pretrain.max_steps=" in page and "finetune.lr" not in page


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    out = capsys.readouterr().out
    assert done.value.code == 0 and out.startswith(f"bioablate {metadata.version('bioablate')}")


@pytest.mark.parametrize("what,expected", [
    ("experiments", ["quickstart ", "table13_tagging ", "tagging schemes", "bioablate run NAME"]),
    ("profiles", ["micro ", "mini ", "base "]),
    ("sweeps", ["micro ", "ner "]),
    ("corpora", ["pubmed ", "pubmed.yaml"]),
])
def test_list_packaged(capsys, what, expected):
    code, out, _ = run_cli(capsys, "list", what)
    assert code == 0
    for fragment in expected:
        assert fragment in out, (fragment, out)


def _key_rows(out: str) -> dict[str, list[str]]:
    """`list keys` as {key: [type, value, description]}, cut at the header's column starts."""
    header, *lines = out.splitlines()
    starts = [header.index(title) for title in ("key", "type", header.split()[2], "description")]
    cut = [(a, b) for a, b in zip(starts, [*starts[1:], None])]
    return {line[:starts[1]].strip(): [line[a:b].strip() for a, b in cut[1:]] for line in lines}


def test_list_keys_every_config_key_with_type_profile_value_and_comment(capsys):
    code, out, _ = run_cli(capsys, "list", "keys")
    assert code == 0
    rows = _key_rows(out)
    assert set(rows) == result_keys(None)  # every leaf field of the schema (dict fields too)
    assert rows["finetune.lr"][0] == "float" and rows["data_dir"][0] == "str | None"
    assert rows["finetune.max_train_examples"][1] == str(profile_config("micro").finetune.max_train_examples)
    assert rows["pretrain.max_steps"][2] == "optimizer steps"  # the comment beside the field
    assert rows["task"][1] == "(required)"
    code, out, _ = run_cli(capsys, "list", "keys", "--profile", "mini")
    assert _key_rows(out)["model.hidden_size"][1] == str(profile_config("mini").model.hidden_size)


@pytest.mark.parametrize("what", ["keys", "tasks"])
def test_a_reader_that_goes_away_early_ends_the_listing_quietly(what, tmp_path):
    """`bioablate list keys | head`: the pipe's reader gone before the listing is written (here closed
    before the command starts) ends it as SIGPIPE would, with no traceback."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-m", "ablations.cli", "list", what], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=300, cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    finally:
        os.close(write)
    assert done.returncode in (0, 141) and "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr


def test_table_help_names_the_folder_a_table_is_written_to(tmp_path):
    from types import SimpleNamespace

    from ablations.tables.report import table_dir

    page = re.sub(r"-\s+", "-", subcommands(build_parser())["table"].format_help())  # (wrapped at hyphens)
    folder = re.search(r"\(default: <work-dir>/(\S+)/\)", page).group(1)
    experiment = SimpleNamespace(name="<experiment>", profile="<profile>", store=lambda: (tmp_path, None))
    assert table_dir(experiment) == tmp_path / folder


def test_every_listing_has_a_choice():
    choices = next(a for a in subcommands(build_parser())["list"]._actions if a.dest == "what").choices
    assert sorted(choices) == sorted(LISTINGS)


def test_run_an_unknown_experiment_name_suggests_the_nearest(capsys):
    code, _, err = run_cli(capsys, "run", "quickstrat", "--dry-run")
    assert_one_line_error(code, err, "unknown experiment 'quickstrat'", "did you mean 'quickstart'")


def test_run_a_packaged_experiment_by_name_from_anywhere(capsys, monkeypatch, data_dir, tmp_path):
    monkeypatch.chdir(tmp_path)  # no experiments/ folder here
    code, out, err = run_cli(capsys, "run", "table13_tagging", "--dry-run", "--data-dir", str(data_dir),
                             "--work-dir", str(tmp_path / "work"))
    assert code == 0, err
    assert "table13_tagging" in out and "compute" in out


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_is_told_at_once_what_is_loading(monkeypatch, capsys):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    code = main(["finetune", "--task", "bc5-chemm", "--model", "random-bert", "--data-dir", "nowhere"])
    lines = terminal.getvalue().splitlines()
    assert code == 2 and lines[0] == "bioablate: loading bc5-chemm and random-bert ..."
    assert lines[1].startswith("bioablate: error: unknown task 'bc5-chemm'")


def test_overrides_written_after_options_are_overrides(capsys, data_dir):
    # `run EXP --profile micro key=value`: the override is read (and range-checked), not refused as unknown
    code, _, err = run_cli(capsys, "run", "quickstart", "--profile", "micro", "--dry-run", "--data-dir",
                           str(data_dir), "finetune.epochs=0")
    assert_one_line_error(code, err, "finetune.epochs = 0", "must be >= 1")
    with pytest.raises(SystemExit):  # an unknown option is still argparse's error
        main(["run", "quickstart", "--dry-run", "--bogus"])


def test_an_interpolation_naming_no_key_is_one_line(capsys, data_dir, tmp_path):
    """`${...}` that resolves to nothing, in a YAML (named with its file) or an override: one line, exit 2
    (was an OmegaConf traceback); one that names a key of the same file resolves."""
    experiment = tmp_path / "e.yaml"
    experiment.write_text("name: t\nmodels:\n  a: {name_or_path: random-bert}\ntasks: [gad]\nseeds: ${missing}\n"
                          "table: {rows: task, columns: model}\n")
    code, _, err = run_cli(capsys, "run", str(experiment), "--dry-run", "--work-dir", str(tmp_path / "w"))
    assert_one_line_error(code, err, f"{experiment}: seeds: Interpolation key 'missing' not found")
    code, _, err = run_cli(capsys, "finetune", "--task", "gad", "finetune.lr=${nope}", "--data-dir", str(data_dir),
                           "--work-dir", str(tmp_path / "w"))
    assert_one_line_error(code, err, "finetune.lr: Interpolation key 'nope' not found")
    assert not (tmp_path / "w" / "mlruns.db").exists()
    experiment.write_text(experiment.read_text().replace("${missing}", "${count}") + "count: 2\n")
    code, _, err = run_cli(capsys, "run", str(experiment), "--dry-run", "--work-dir", str(tmp_path / "w"))
    assert "unknown key 'count'" in err  # resolved (to 2), then the stray key itself is named


@pytest.mark.parametrize("args,message", [
    # statsmodels warned for a vanishing difference; nan and 0 made the seeds line vanish in silence
    (["table", "quickstart", "--effect", "nan"], "argument --effect: expected a difference of 0.01 to 200 points"),
    (["table", "quickstart", "--effect", "0"], "argument --effect: expected a difference of 0.01 to 200 points"),
    (["run", "quickstart", "--effect", "1e-300"], "argument --effect: expected a difference of 0.01 to 200 points"),
    # the YAML was blamed for the command line's value
    (["sweep", "micro", "--n-trials", "0"], "argument --n-trials: 0 is below the least, 1"),
])
def test_a_statistic_or_count_that_cannot_be_is_refused_where_it_is_read(capsys, args, message):
    with pytest.raises(SystemExit) as stop:
        main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and message in err[-1] and "micro.yaml" not in err[-1]

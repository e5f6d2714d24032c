"""The experiment YAML's `datasets:` list: user dataset files, relative to the experiment file, usable as
tasks and carried into every run's config; a mistake in one names the experiment file and the entry."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ablations import results
from ablations.cli import main
from ablations.experiment import load_experiment
from ablations.experiment.model_entries import ModelSchema
from ablations.experiment.spec import ExperimentSchema
from bioablate_core.errors import ConfigError
from datamodules.blurb import BLURB_DATASETS
from tests import shapes
from tests.cli import bioablate_in_process

DATASET = """name: user-sentiment
format: tsv
path: data
files: {train: train.tsv, dev: dev.tsv, test: test.tsv}
labels: [pos, neg]
"""
EXPERIMENT = """name: user-data
datasets: [datasets/sentiment.yaml]
models:
  random: {name_or_path: random-bert}
tasks: TASKS
table: {rows: task, columns: model}
"""


def write_experiment(folder: Path, tasks: str = "[user-sentiment, gad]", dataset: str = DATASET) -> Path:
    data = folder / "datasets" / "data"
    data.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        (data / f"{split}.tsv").write_text("".join(f"{word} {split} sentence {i}\t{label}\n" for i in range(6)
                                                   for word, label in (("good", "pos"), ("bad", "neg"))))
    (folder / "datasets" / "sentiment.yaml").write_text(dataset)
    path = folder / "exp.yaml"
    path.write_text(EXPERIMENT.replace("TASKS", tasks))
    return path


def test_a_user_dataset_of_the_experiment_is_a_task_of_every_run(tmp_path, data_dir):
    experiment = load_experiment(write_experiment(tmp_path), profile="micro", data_dir=str(data_dir))
    assert experiment.tasks == ["user-sentiment", "gad"]
    cell = experiment.cells()[0]
    cfg = experiment.finetune_config(cell, "random-bert")
    assert (cfg.task, list(cfg.datasets)) == ("user-sentiment", [str(tmp_path / "datasets" / "sentiment.yaml")])


def test_blurb_means_the_13_built_in_datasets_even_beside_user_ones(tmp_path, data_dir):
    experiment = load_experiment(write_experiment(tmp_path, tasks="blurb"), profile="base", data_dir=str(data_dir))
    assert experiment.tasks == [spec.name for spec in BLURB_DATASETS]


@pytest.mark.parametrize("dataset,fragments", [
    (DATASET.replace("format: tsv", "format: tssv"), ["datasets[0]:", "sentiment.yaml: unknown format 'tssv'"]),
    (None, ["datasets[0]:", "dataset file not found"]),
])
def test_a_mistake_in_a_dataset_file_names_the_experiment_and_the_entry(tmp_path, dataset, fragments):
    path = write_experiment(tmp_path, dataset=dataset or DATASET)
    if dataset is None:
        (tmp_path / "datasets" / "sentiment.yaml").unlink()
    with pytest.raises(ConfigError) as error:
        load_experiment(path, profile="micro")
    message = str(error.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


@pytest.mark.slow
def test_an_experiment_runs_on_its_user_dataset(tmp_path, data_dir):
    from ablations.experiment.runner import run_experiment

    experiment = load_experiment(write_experiment(tmp_path, tasks="[user-sentiment]"), profile="micro",
                                 data_dir=str(data_dir), work_dir=str(tmp_path / "work"))
    outcome = run_experiment(experiment, echo=lambda _: None)
    assert outcome.ok and outcome.count(results.COMPUTED) == 1


# ---- ranges: every cell's resolved config is checked when the experiment loads
# Loading an experiment (ablations/experiment/spec.py) checks every cell's resolved config, ranges
# included, so `--dry-run` refuses what every cell would fail on; names are safe folder names.

RANGED_EXPERIMENT = """
name: {name}
models:
  random: {{name_or_path: random-bert}}
tasks: [gad]
vary:
  dropout: {{key: finetune.dropout, values: [0.1, {dropout}]}}
overrides: {{finetune: {{epochs: {epochs}}}}}
table: {{rows: task, columns: dropout}}
"""


def write(tmp_path, name="ranges", dropout=0.2, epochs=1):
    path = tmp_path / "exp.yaml"
    path.write_text(RANGED_EXPERIMENT.format(name=name, dropout=dropout, epochs=epochs))
    return path


def test_a_valid_experiment_loads(tmp_path, data_dir):
    experiment = load_experiment(write(tmp_path), data_dir=str(data_dir), work_dir=str(tmp_path / "w"))
    assert len(experiment.cells()) == 2


@pytest.mark.parametrize("kwargs,cli,message", [
    ({"epochs": 0}, [], "exp.yaml: overrides: finetune.epochs = 0: must be >= 1"),
    ({"dropout": 2}, [], "exp.yaml: vary: finetune.dropout = 2.0: must be >= 0 and < 1"),
    ({}, ["finetune.batch_size=0"], "command-line overrides: finetune.batch_size = 0: must be >= 1"),
    ({}, ["finetune.max_length=1024"], "above the maximum input length of model 'random-bert' (512"),
], ids=["yaml-overrides", "vary-value", "command-line", "max-length"])
def test_a_bad_value_in_any_layer_fails_at_load(tmp_path, data_dir, kwargs, cli, message):
    with pytest.raises(ConfigError) as error:
        load_experiment(write(tmp_path, **kwargs), overrides=cli, data_dir=str(data_dir),
                        work_dir=str(tmp_path / "w"))
    assert message in str(error.value)


def test_dry_run_refuses_a_bad_override_with_one_line(tmp_path, data_dir, capsys):
    code = main(["run", str(write(tmp_path)), "finetune.lr=-1", "--dry-run", "--data-dir", str(data_dir),
                 "--work-dir", str(tmp_path / "w")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "finetune.lr = -1.0: must be > 0" in err


@pytest.mark.parametrize("name", ["../../../../x", "a/b", ".hidden", "", "x y", "..", "a\\b"])
def test_an_unsafe_experiment_name_is_refused(tmp_path, data_dir, name):
    with pytest.raises(ConfigError, match="name: .* is not a safe name"):
        load_experiment(write(tmp_path, name=f"'{name}'"), data_dir=str(data_dir), work_dir=str(tmp_path / "w"))
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("name", ["table13_tagging", "v1.2-mini", "A_b-3"])
def test_safe_names_load(tmp_path, data_dir, name):
    assert load_experiment(write(tmp_path, name=name), data_dir=str(data_dir)).name == name


# ---- shapes: a list where the experiment schema takes a mapping, or the reverse, at every depth (cases
# generated from ExperimentSchema and ModelSchema by tests/shapes.py: a new key is covered by construction)

VALID = {"name": "shapes", "models": {"random": {"name_or_path": "random-bert"}}, "tasks": ["gad"],
         "table": {"rows": "task", "columns": "model"}}
EXPERIMENT_CASES = list(shapes.cases(ExperimentSchema))
MODEL_CASES = list(shapes.cases(ModelSchema))


def _one_line(message: str, source: Path, case: shapes.Case) -> None:
    assert message.startswith(f"{source}: {case.key}: expected ") and message.endswith(f", got {case.got}")
    assert "\n" not in message


@pytest.mark.parametrize("case", EXPERIMENT_CASES, ids=[c.id for c in EXPERIMENT_CASES])
def test_a_wrong_container_in_an_experiment_is_one_line(tmp_path, case):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(shapes.put(VALID, case.path, case.value)))
    with pytest.raises(ConfigError) as error:
        load_experiment(path, profile="micro")
    _one_line(str(error.value), path, case)


@pytest.mark.parametrize("case", MODEL_CASES, ids=[c.id for c in MODEL_CASES])
def test_a_wrong_container_in_a_shared_model_file_is_one_line(tmp_path, case):
    shared = tmp_path / "models" / "mine.yaml"
    shared.parent.mkdir()
    shared.write_text(yaml.safe_dump(shapes.put({"name_or_path": "random-bert"}, case.path, case.value)))
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({**VALID, "models": {"random": {"use": "mine"}}}))
    with pytest.raises(ConfigError) as error:
        load_experiment(path, profile="micro")
    _one_line(str(error.value), shared, case)


KEYS = {"models": "use, name_or_path, pretrain, init, finetuned, label, finetune, overrides, description",
        "table": "title, rows, columns, metric, metrics, baseline, row_order, column_order, labels, paper, "
                 "paper_source, blurb_row, caption, correction, cost, paper_std, paper_noise, differences",
        "finetune": "lr, batch_size, eval_batch_size, epochs, warmup_ratio, weight_decay, dropout, max_length, "
                    "max_train_examples, max_eval_examples, tagging, head, subtoken_labels, re_input, re_feature, "
                    "classifier, qa_stride, max_answer_length, qa_merge, bucketing, cache_tokenized, static_shapes, "
                    "adversarial, "
                    "alum, class_weights"}
ISSUE_CASES = [  # issue 27: each ended in a TypeError or an AttributeError traceback
    ({"vary": {"head": ["linear", "bilstm"]}}, "vary.head: expected a mapping with keys key, values, got a list"),
    ({"models": ["random"]}, f"models: expected a mapping of names, each a mapping with keys {KEYS['models']}, "
                             "got a list"),
    ({"overrides": ["finetune.lr=1"]}, "overrides: expected a mapping, got a list"),
    ({"table": ["rows", "task"]}, f"table: expected a mapping with keys {KEYS['table']}, got a list"),
    ({"overrides": {"finetune": [1, 2]}}, f"overrides: finetune: expected a mapping with keys {KEYS['finetune']}, "
                                          "got a list"),
    ({"vary": {"head": {"key": "finetune.head", "values": {"a": ["linear"]}}}},
     "vary: finetune.head: expected a string, got a list"),
]


@pytest.mark.parametrize("change,message", ISSUE_CASES, ids=["vary-list", "models-list", "overrides-list",
                                                             "table-list", "overrides-section-list",
                                                             "vary-value-list"])
def test_the_command_line_refuses_a_wrong_container_before_any_run(tmp_path, change, message):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({**VALID, **change}))
    for command in (["run", str(path)], ["run", str(path), "--dry-run"]):
        out = bioablate_in_process(*command, "--work-dir", str(tmp_path / "work"), cwd=tmp_path)
        assert out.returncode == 2 and out.stderr.strip() == f"bioablate: error: {path}: {message}"
    assert not (tmp_path / "work" / "mlruns.db").exists()


# ---- table.caption and table.title per profile ----

CAPTIONED = """name: captioned
models:
  random: {name_or_path: random-bert}
tasks: [gad]
table: {rows: task, columns: model, title: TITLE, caption: CAPTION}
"""


def test_the_quickstart_caption_describes_mini_only():
    """Its caption (all-MiniLM-L6-v2, 2 epochs on 560/1,000 examples) is mini's recipe: micro (a random BERT on 32
    examples) and base (full training sets) get none, and micro's title does not name MiniLM."""
    layouts = {p: load_experiment("quickstart", profile=p).layout for p in ("micro", "mini", "base")}
    assert layouts["mini"].caption.startswith("sentence-transformers/all-MiniLM-L6-v2 (general domain, 22M parameters) "
                                              "fine-tuned for 2 epochs")
    assert layouts["micro"].caption == layouts["base"].caption == ""
    assert "MiniLM" not in layouts["micro"].title and "all-MiniLM-L6-v2" in layouts["mini"].title


@pytest.mark.parametrize("caption,profile,expected", [
    ("plain text", "micro", "plain text"),
    ("{mini: for mini}", "micro", ""),
    ("{mini: for mini}", "mini", "for mini"),
    ("{micro: tiny, default: the rest}", "base", "the rest"),
])
def test_a_caption_may_be_per_profile(tmp_path, caption, profile, expected):
    path = tmp_path / "exp.yaml"
    path.write_text(CAPTIONED.replace("TITLE", "{micro: Micro title, default: Title}").replace("CAPTION", caption))
    layout = load_experiment(path, profile=profile).layout
    assert layout.caption == expected
    assert layout.title == ("Micro title" if profile == "micro" else "Title")


@pytest.mark.parametrize("caption", ["{mini: [a, list]}", "{nano: text}"])
def test_a_caption_that_is_not_text_is_a_one_line_error(tmp_path, caption):
    path = tmp_path / "exp.yaml"
    path.write_text(CAPTIONED.replace("TITLE", "t").replace("CAPTION", caption))
    with pytest.raises(ConfigError, match=r"exp.yaml: table.caption: expected text, or text per profile"):
        load_experiment(path, profile="mini")


# The authors whose numbers a table's `paper:` section holds, as its comments name them, and the name
# `table.paper_source` must start with (the rendered note says "the number reported by <paper_source>").
PAPER_AUTHORS = ("Gu", "Lee", "Naseem", "Ozyurt")


def test_every_table_with_paper_numbers_names_the_paper_they_come_from():
    """BioBERT's Table 6 showed "reported by Gu et al." under Lee et al.'s MRR: the comment that says
    whose numbers they are and `table.paper_source` agree, for every packaged experiment."""
    import re

    from ablations.experiment import experiment_files

    checked = 0
    for path in experiment_files():
        table = path.read_text().partition("\ntable:")[2]
        if "\n  paper:" not in table:
            continue
        authors = re.findall(rf"^\s*(?:paper:\s*)?#\s*({'|'.join(PAPER_AUTHORS)})\b", table, re.M)
        assert authors, f"{path.name}: no comment names whose numbers table.paper holds"
        source = load_experiment(path, profile="micro").layout.paper_source
        assert source.split()[0] == authors[0], (path.name, source, authors[0])
        checked += 1
    assert checked >= 15


# ---- counts bounded before anything is built from them; a task listed twice

SEEDED_EXPERIMENT = """name: seeded
models:
  random: {{name_or_path: random-bert}}
tasks: {tasks}
seeds: {seeds}
table: {{rows: task, columns: model}}
"""


def test_a_billion_seeds_is_one_line_under_a_bounded_memory(tmp_path, data_dir):
    """The count is refused before the seed list is built: under a 3 GiB address space a billion-element
    list (8 GB of pointers alone) cannot be made, and the command answers with its one line."""
    import resource
    import subprocess
    import sys

    path = tmp_path / "exp.yaml"
    path.write_text(SEEDED_EXPERIMENT.format(tasks="[gad]", seeds=1000000000))

    def bounded_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))

    done = subprocess.run([sys.executable, "-m", "ablations.cli", "run", str(path), "--dry-run", "--data-dir",
                           str(data_dir), "--work-dir", str(tmp_path / "w")], preexec_fn=bounded_memory,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"bioablate: error: {path}: seeds: 1,000,000,000 is above the most this accepts, 1,000; give the number "
        "of seeds per cell"], done.stderr[-2000:]
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("tasks,seeds,message", [
    # one cell's runs counted twice: a narrower interval, `[2/1]` progress and twice the compute
    ("[gad, gad]", 2, "tasks: 'gad' is listed twice; list each task once"),
    ("[gad]", "[1, 2, 1]", "seeds: seed 1 is listed twice"),
    ("[gad]", f"[{', '.join(map(str, range(1002)))}]",
     "seeds: the number of seeds: 1,002 is above the most this accepts, 1,000"),
    ("[gad]", 0, "seeds: 0 is below the least, 1"),
    ("[gad]", "{default: 2, gad: 5000}", "seeds.gad: 5,000 is above the most this accepts, 1,000"),
])
def test_a_repeated_task_or_an_unbounded_seed_count_is_refused(tmp_path, data_dir, tasks, seeds, message):
    path = tmp_path / "exp.yaml"
    path.write_text(SEEDED_EXPERIMENT.format(tasks=tasks, seeds=seeds))
    with pytest.raises(ConfigError) as error:
        load_experiment(path, data_dir=str(data_dir), work_dir=str(tmp_path / "w"))
    assert str(error.value).startswith(f"{path}: {message}"), str(error.value)


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_a_paper_number_that_is_no_number_is_refused(tmp_path, data_dir, value):
    """`paper: .nan` was taken: a reference every comparison with it is silently false against."""
    path = tmp_path / "exp.yaml"
    path.write_text(SEEDED_EXPERIMENT.format(tasks="[gad]", seeds=1).replace(
        "table: {rows: task, columns: model}",
        f"table: {{rows: task, columns: model, paper: {{gad: {{random: {value}}}}}}}"))
    with pytest.raises(ConfigError) as error:
        load_experiment(path, data_dir=str(data_dir), work_dir=str(tmp_path / "w"))
    assert str(error.value).startswith(f"{path}: table.paper.gad.random: ") and \
        str(error.value).endswith("is not a number the paper printed; give its value or leave the entry out")

"""Experiment YAMLs and `bioablate run`: every file validates and runs end to end under the micro profile
(pretraining stages included) into one store, shared runs are computed once, an interrupted experiment
computes only what is missing, and a failing run is reported while the others finish."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from transformers import BertConfig, BertModel

from ablations import results
from ablations.cli import main
from ablations.config import REPO_ROOT
from ablations.experiment import collect, experiment_files, load_experiment
from ablations.experiment.runner import run_experiment
from bioablate_core.errors import ConfigError
from bioablate_core.packaged import resolve_config
from tests.experiment_runs import (
    SEED_PAPER_PREFIXES,
    run_under_micro_and_check,
    runs_in_store,
    single_threaded,
    stored_twice,
)

EXPERIMENTS = experiment_files()
# The seed papers' tables run in tests/e2e/test_seed_paper_experiments.py, a file of their own so that
# the two xdist workers share the suite's longest tests (each file a store of its own).
GU_ET_AL = [p for p in EXPERIMENTS if not p.stem.startswith(SEED_PAPER_PREFIXES)]
# Cheap stages for the behaviour tests below (the micro profile's 12 steps are for the real YAMLs).
TINY_PRETRAIN = "{corpus: pubmed, vocab: pubmedbert-uncased, max_steps: 4, checkpoint_every: 2, max_words: 4000}"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ---- every experiment YAML, under the micro profile, end to end into one store ----


@pytest.fixture(scope="module")
def shared_work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("experiments")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    with single_threaded():
        yield


@pytest.mark.slow
@pytest.mark.parametrize("path", GU_ET_AL, ids=[p.stem for p in GU_ET_AL])
def test_experiment_runs_end_to_end_under_micro_and_renders_its_table(path, shared_work, data_dir, capsys):
    run_under_micro_and_check(path, shared_work, data_dir, capsys)



def test_the_duplicate_check_finds_a_fingerprint_stored_twice(tmp_path):
    """The check each experiment above ends with: it must see a second active run of one fingerprint and kind."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("finetune")
    for kind, fingerprint in (("finetune", "a"), ("finetune", "b"), ("pretrain", "b"), ("experiment", "c"),
                              ("experiment", "c")):
        client.create_run(experiment, tags={"kind": kind, "fingerprint": fingerprint})
    assert stored_twice(uri) == []
    again = client.create_run(experiment, tags={"kind": "finetune", "fingerprint": "a"}).info.run_id
    assert stored_twice(uri) == [("finetune", "a", 2)]
    client.delete_run(again)
    assert stored_twice(uri) == []


# ---- the YAMLs validate under every profile; mistakes are one-line errors ----


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["micro", "mini", "base"])
def test_every_experiment_yaml_validates_under_every_profile(profile):
    for path in EXPERIMENTS:
        experiment = load_experiment(path, profile=profile)
        assert experiment.profile == profile
        if experiment.kind == "finetune":
            layout = experiment.layout
            # a metric axis is every run's (its cells are one per metric, CellRun): the columns are the metrics
            planned = set(layout.metrics) if layout.columns == "metric" else {c.column for c in experiment.cells()}
            assert experiment.cells() and set(layout.column_order) == planned


def test_seeds_follow_the_profile_and_the_per_task_rule():
    table6 = resolve_config("table6_blurb", "experiment")
    assert load_experiment(table6, profile="micro").seeds_by_task["biosses"] == [1]
    base = load_experiment(table6, profile="base").seeds_by_task
    assert len(base["biosses"]) == len(base["bioasq"]) == len(base["pubmedqa"]) == 10 and len(base["hoc"]) == 5


def test_the_standard_model_is_one_pretraining_run_for_every_table():
    """Tables 6, 7, 9-14 name the same standard model: one stage config, hence one fingerprint."""
    configs = set()
    for name in ("table6_blurb", "table7_vocab_wwm", "table9_corpora_time", "table10_pmc", "table11_adversarial",
                 "table12_heads", "table13_tagging", "table14_relation"):
        experiment = load_experiment(name, profile="mini")
        configs.add(OmegaConf.to_yaml(experiment.stage_config("pubmedbert")))
    assert len(configs) == 1


@pytest.mark.parametrize("profile", ["micro", "mini", "base"])
def test_the_table9_proxy_pretrains_exactly_table9s_stages(profile):
    """table9_proxy is Table 9 fine-tuned on fewer, capped tasks: its pretraining stages must be Table 9's
    (one fingerprint each, so a store that holds one table's stages serves the other)."""
    from ablations.experiment.plan import identify

    table9, proxy = (load_experiment(name, profile=profile) for name in ("table9_corpora_time", "table9_proxy"))
    assert proxy.stage_order() == table9.stage_order()
    for name in table9.stage_order():
        if table9.models[name].init is None:  # a stage from scratch: its fingerprint is known before any run
            assert identify("pretrain", proxy.stage_config(name)) == identify("pretrain", table9.stage_config(name))
        else:  # a continued stage: the same config, continued from the same (equal) init stage
            assert OmegaConf.to_yaml(proxy.stage_config(name, init="x").pretrain) == \
                OmegaConf.to_yaml(table9.stage_config(name, init="x").pretrain)


GOOD = """
name: t
models:
  std: {pretrain: {corpus: pubmed}}
tasks: [gad]
vary:
  head: {key: finetune.head, values: [linear, bilstm]}
table: {rows: task, columns: head}
"""


@pytest.mark.parametrize("replace,fragments", [
    (("tasks:", "taks:"), ["unknown key 'taks'", "did you mean 'tasks'", "valid keys at the top level:", "models"]),
    (("pretrain: {corpus", "pretrian: {corpus"), ["unknown key 'models.std.pretrian'", "valid keys under 'models.std'",
                                                 "name_or_path", "pretrain"]),
    (("columns: head", "colums: head"), ["unknown key 'table.colums'", "rows, columns"]),
    (("key: finetune.head", "kye: finetune.head"), ["unknown key 'vary.head.kye'", "key, values"]),
    (("{corpus: pubmed}", "{corpus: pubmed, max_step: 3}"), ["unknown config key 'pretrain.max_step'", "max_steps"]),
    (("bilstm]", "bilstm, crf]"), ["unknown finetune.head 'crf' for gad", "linear, bilstm"]),
    (("columns: head", "columns: heads"), ["table.columns: unknown axis 'heads'", "task, model, head"]),
    (("[gad]", "[gadd]"), ["tasks:", "gadd"]),
    # checked whole before anything runs: what would plan the same run twice, or split the store
    (("table:", "seeds: [1, 2, 1]\ntable:"), ["seeds: seed 1 is listed twice"]),
    (("key: finetune.head, values: [linear, bilstm]", "key: work_dir, values: [a, b]"),
     ["vary.head: 'work_dir' does not change a run's result"]),
    (("key: finetune.head, values: [linear, bilstm]", "key: trainer.compile, values: [true, false]"),
     ["vary.head: 'trainer.compile' does not change a run's result"]),
    (("table:", "overrides: {tracking_uri: 'sqlite:///x.db'}\ntable:"),
     ["overrides: 'tracking_uri' is where runs are kept", "--tracking-uri on the command line"]),
    (("table:", "overrides: {work_dir: elsewhere}\ntable:"), ["overrides: 'work_dir'", "--work-dir"]),
    (("columns: head}", "columns: head, metric: precison}"),
     ["table.metric: gad does not report 'precison' (did you mean 'precision'?); it reports: precision, recall, "
      "score"]),
    # counts are in each run's details artifact, not metrics a table could read
    (("columns: head}", "columns: head, metric: tp}"), ["table.metric: gad does not report 'tp'"]),
])
def test_a_mistake_in_an_experiment_yaml_is_a_one_line_error_naming_file_and_key(tmp_path, capsys, replace, fragments):
    path = write(tmp_path / "bad.yaml", GOOD.replace(*replace))
    with pytest.raises(ConfigError) as error:
        load_experiment(path)
    message = str(error.value)
    assert str(path) in message and "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert main(["run", str(path), "--dry-run", "--work-dir", str(tmp_path / "w")]) == 2
    assert capsys.readouterr().err.strip() == f"bioablate: error: {message}"


def test_good_yaml_loads(tmp_path):
    experiment = load_experiment(write(tmp_path / "good.yaml", GOOD))
    assert [c.column for c in experiment.cells()] == ["linear", "bilstm"]


# ---- dedup across experiments, rerun, kill + resume, failures ----


def two_experiments(folder: Path) -> tuple[Path, Path]:
    write(folder / "models" / "tiny.yaml", f"pretrain: {TINY_PRETRAIN}\n")
    first = write(folder / "first.yaml", """
name: first
models:
  tiny: {use: tiny}
tasks: [gad, biosses]
table: {rows: task, columns: model}
""")
    second = write(folder / "second.yaml", """
name: second
models:
  tiny: {use: tiny}
  random: {name_or_path: random-bert}
tasks: [biosses]
table: {rows: task, columns: model}
""")
    return first, second


@pytest.mark.slow
def test_shared_stage_and_cells_are_computed_once_and_a_rerun_computes_nothing(tmp_path, data_dir):
    first, second = two_experiments(tmp_path)
    load = dict(profile="micro", data_dir=str(data_dir), work_dir=str(tmp_path / "work"))
    a = run_experiment(load_experiment(first, **load), echo=lambda _: None)
    assert (a.count(results.COMPUTED), a.count(results.REUSED)) == (3, 0) and a.ok
    b = run_experiment(load_experiment(second, **load), echo=lambda _: None)
    assert (b.count(results.COMPUTED), b.count(results.REUSED)) == (1, 2) and b.ok  # tiny stage + tiny/biosses reused
    uri = a.tracking_uri
    assert len(runs_in_store(uri, "pretrain")) == 1 and len(runs_in_store(uri, "finetune")) == 3
    again = run_experiment(load_experiment(first, **load), echo=lambda _: None)
    assert (again.count(results.COMPUTED), again.count(results.REUSED)) == (0, 3)
    assert len(runs_in_store(uri, "finetune")) == 3
    # each invocation is a parent run; only the runs it created are its children
    parents = runs_in_store(uri, "experiment")
    assert len(parents) == 3
    children = Counter(r.data.tags.get("mlflow.parentRunId") for r in runs_in_store(uri, "finetune"))
    assert children == {a.parent_run_id: 2, b.parent_run_id: 1}


@pytest.mark.slow
def test_a_killed_experiment_computes_only_the_missing_runs_when_rerun(tmp_path, data_dir, capsys):
    path = write(tmp_path / "killed.yaml", """
name: killed
models:
  random: {name_or_path: random-bert}
tasks: [biosses, gad]
seeds: 2
table: {rows: task, columns: model}
""")
    work = tmp_path / "work"
    uri = f"sqlite:///{work / 'mlruns.db'}"
    # the runner prints a line per finished run: kill it after two (reading the store instead would race
    # with its creation of the database)
    process = subprocess.Popen([sys.executable, "-u", "-m", "ablations.cli", "run", str(path), "--work-dir",
                                str(work), "--data-dir", str(data_dir)], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    done = 0
    for line in process.stdout:
        done += " computed " in line
        if done == 2:
            break
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert done == 2, "the experiment ended before it could be killed"
    finished = sum(r.info.status == "FINISHED" for r in runs_in_store(uri, "finetune"))
    assert 2 <= finished < 4  # killed before the last run finished
    # `status` shows each run as MLflow has it, and the unfinished one with what to do
    assert main(["status", str(path), "--work-dir", str(work), "--data-dir", str(data_dir)]) == 0
    shown = capsys.readouterr().out
    started = any(r.info.status == "RUNNING" for r in runs_in_store(uri, "finetune"))  # the kill may land between
    assert shown.count("  FINISHED ") == finished and ("killed: rerun the experiment" in shown) == started, shown

    summary = run_experiment(load_experiment(path, data_dir=str(data_dir), work_dir=str(work)), echo=lambda _: None)
    assert summary.ok and (summary.count(results.REUSED), summary.count(results.COMPUTED)) == (finished, 4 - finished)
    stored = runs_in_store(uri, "finetune")
    assert len(stored) == 4 and all(r.info.status == "FINISHED" for r in stored)  # the killed run was taken over


@pytest.mark.slow
def test_a_failing_run_is_reported_and_the_others_finish(tmp_path, data_dir, capsys):
    # A model whose files are whole and agree (config, weights, tokenizer: every check at load passes) but whose
    # weights are NaN: it fails only when its runs train it (the loss is not a number).
    broken = tmp_path / "broken-model"
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *[f"w{i}" for i in range(120)]]
    model = BertModel(BertConfig(vocab_size=len(words), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=256), add_pooling_layer=False)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.fill_(float("nan"))
    model.save_pretrained(broken)
    (broken / "vocab.txt").write_text("\n".join(words) + "\n")
    path = write(tmp_path / "failing.yaml", f"""
name: failing
models:
  random: {{name_or_path: random-bert}}
  broken: {{name_or_path: {broken}}}
tasks: [biosses, gad]
table: {{rows: task, columns: model}}
""")
    work = tmp_path / "work"
    code = main(["run", str(path), "--work-dir", str(work), "--data-dir", str(data_dir)])
    out = capsys.readouterr().out
    assert code == 1
    assert "2 computed, 0 reused, 2 failed, 0 blocked" in out
    failures = [line for line in out.splitlines() if line.startswith("  FAILED finetune broken/")]
    assert len(failures) == 2, out
    experiment = load_experiment(path, data_dir=str(data_dir), work_dir=str(work))
    by_model = {(c.column, c.task): c for c in collect(experiment)}
    assert by_model[("random", "gad")].status == results.FINISHED
    failed = by_model[("broken", "gad")]
    line = next(line for line in failures if "broken/gad/" in line)
    assert failed.status == results.FAILED and failed.reason and failed.reason[:80] in line
    stored = {r.data.tags["model"]: r for r in runs_in_store(experiment.store()[1], "finetune")
              if r.data.tags["task"] == "gad"}
    shown = f"<local>/{broken.name}"  # a model folder outside the work and data directories
    assert stored[shown].info.status == "FAILED" and stored[shown].data.tags["error"]


def test_dry_run_prints_the_plan_and_runs_nothing(tmp_path, data_dir, capsys):
    first, _ = two_experiments(tmp_path)
    work = tmp_path / "work"
    assert main(["run", str(first), "--dry-run", "--work-dir", str(work), "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert "compute       pretrain tiny" in out and "after pretraining stage 'tiny'" in out
    assert "1 compute, 2 compute later" in out
    assert not runs_in_store(f"sqlite:///{work / 'mlruns.db'}", "finetune")


def test_a_grid_over_the_run_limit_is_refused_before_it_is_planned(tmp_path, capsys):
    """2 models x 300 values x 10 seeds: counted (6,000 runs > 5,000) and refused in one line, where
    planning it took 75 s and 1.4 GB; --max-runs lets a meant grid through to the planner."""
    values = ", ".join(f"{i}e-5" for i in range(1, 301))
    path = write(tmp_path / "grid.yaml", f"""
name: grid
models:
  a: {{name_or_path: random-bert}}
  b: {{name_or_path: random-bert, overrides: {{model.hidden_size: 32}}}}
tasks: [gad]
seeds: 10
vary:
  lr: {{key: finetune.lr, values: [{values}]}}
table: {{rows: lr, columns: model}}
""")
    assert main(["run", str(path), "--dry-run", "--work-dir", str(tmp_path / "w")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"bioablate: error: {path}: plans 6,000 fine-tuning runs (2 models x 300 lr, over 1 tasks and their seeds), "
        "more than --max-runs 5,000; pass --max-runs 6000 if that is meant")
    with pytest.raises(ConfigError, match="more than --max-runs 5,999"):
        load_experiment(path, max_runs=5999)
    assert len(load_experiment(path, profile="micro", max_runs=6000).cells()) == 6000


@pytest.mark.parametrize("text,expected", [
    ("", "the file is empty; an experiment names at least `name`, `models`, `tasks` and `table`"),
    ("# a comment only\n", "the file is empty"),
    (GOOD.replace("name: t\n", ""), "name: missing; give the experiment a name"),
])
def test_an_empty_or_nameless_experiment_says_so(tmp_path, text, expected):
    path = write(tmp_path / "e.yaml", text)
    with pytest.raises(ConfigError) as error:
        load_experiment(path)
    assert str(error.value).startswith(f"{path}: {expected}") and "???" not in str(error.value)

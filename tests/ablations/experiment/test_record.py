"""A recorded plan (ablations/experiment/record.py): after `bioablate run`, `bioablate table` with no data
directory at all (no --data-dir, no BIOABLATE_DATA, no fetched user data folder) renders the same table
as with the data, from the plan the run recorded, and says so on stderr; where no plan was recorded (other
overrides) it is one line naming --data-dir and `bioablate run`, exit 2."""

from __future__ import annotations

import json

import pytest

from ablations.cli import main
from ablations.config import build_config
from ablations.experiment.record import config_digest

EXPERIMENT = """\
name: recorded
description: one tiny pretraining stage and a random BERT, fine-tuned on one small task
profile: micro
models:
  tiny:
    label: tiny
    pretrain: {corpus: pubmed, vocab: bert-base-uncased, masking: wwm}
  random: {name_or_path: random-bert}
tasks: [biosses]
seeds: 1
table: {title: recorded, rows: task, columns: model}
"""
SMALL = ["pretrain.max_words=5000", "pretrain.max_steps=4", "pretrain.checkpoint_every=2",
         "finetune.max_train_examples=16", "finetune.max_eval_examples=16", "finetune.max_length=32",
         "finetune.epochs=1"]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_table_without_a_data_directory_renders_from_the_plan_the_run_recorded(capsys, monkeypatch, tmp_path,
                                                                                data_dir):
    path = tmp_path / "recorded.yaml"
    path.write_text(EXPERIMENT)
    work = tmp_path / "work"
    where = [str(path), "--work-dir", str(work)]
    code, _, err = run_cli(capsys, "run", *where, "--data-dir", str(data_dir), *SMALL)
    assert code == 0, err[-3000:]
    code, with_data, err = run_cli(capsys, "table", *where, "--data-dir", str(data_dir), *SMALL)
    assert code == 0, err
    assert "recorded at" not in err
    [record] = (work / "tables" / "recorded" / "plans").iterdir()
    runs = json.loads(record.read_text())["runs"]
    assert sorted((r["kind"], r["name"]) for r in runs) == [
        ("finetune", "random/biosses/s1"), ("finetune", "tiny/biosses/s1"), ("pretrain", "tiny")]
    assert all(r["fingerprint"] for r in runs)

    monkeypatch.delenv("BIOABLATE_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no user data folder from `bioablate data fetch`
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home" / "share"))
    code, without_data, err = run_cli(capsys, "table", *where, *SMALL)
    assert code == 0, err
    assert without_data == with_data
    assert "—" not in without_data and "[1]" not in without_data, without_data  # every cell found, with a value
    [line] = [line for line in err.splitlines() if "recorded at" in line]
    assert line.startswith("bioablate: used the plan recorded at ") and line.endswith(
        "because no data directory was given")

    code, out, err = run_cli(capsys, "table", *where, *SMALL, "finetune.lr=1e-3")  # never run like this
    lines = [line for line in err.splitlines() if line.strip()]
    # no --profile: first the line saying the store has no run of these overrides, then the error
    assert code == 2 and out == "" and len(lines) == 2, err
    assert lines[0].startswith("bioablate: no run of experiment 'recorded' with overrides ") and \
        "rendering its default profile" in lines[0]
    assert lines[1].startswith("bioablate: error: experiment 'recorded' (profile micro with overrides ")
    assert "no plan of it was recorded" in lines[1] and "--data-dir" in lines[1] and "bioablate run" in lines[1]


# Config digests as `bioablate run` records them: a change here leaves every recorded plan unread, so it
# comes with a version bump and a CHANGELOG line.
OLD_MICRO = ["pretrain.max_steps=30", "pretrain.checkpoint_every=10"]
PINNED_DIGESTS = {
    "micro-gad": ("micro", OLD_MICRO, "gad", "c7dbadd95a0901a3"),
    "mini-chemprot-markers": ("mini", ["finetune.re_input=markers", "finetune.re_feature=entity-start",
                                       "launcher.partition=gpu"], "chemprot", "3e6293c7c5442cda"),
    "micro-electra-stage": ("micro", ["pretrain.objective=electra", *OLD_MICRO], "pretrain", "957e2bff7aa6680a"),
}


@pytest.mark.parametrize("name", PINNED_DIGESTS)
def test_recorded_config_digests_are_pinned(name):
    profile, overrides, task, digest = PINNED_DIGESTS[name]
    assert config_digest(build_config(profile, overrides, task=task, work_dir="/x")) == digest


@pytest.mark.parametrize("key, value", [("finetune.class_weights", "balanced"), ("finetune.qa_stride", "64"),
                                        ("finetune.max_answer_length", "20"), ("finetune.qa_merge", "biobert-sum"),
                                        ("pretrain.packing", "true"), ("pretrain.master_weights", "true"),
                                        ("pretrain.fused_qkv", "true"), ("pretrain.max_predictions", "32"),
                                        ("finetune.static_shapes", "true"),
                                        ("trainer.compile_mode", "max-autotune-no-cudagraphs")])
def test_a_result_key_off_its_default_is_another_config(key, value):
    task = "bioasq-4b-factoid" if key == "finetune.qa_merge" else "gad"  # a choice: only where it applies
    assert config_digest(build_config("micro", [f"{key}={value}"], task=task)) != \
        config_digest(build_config("micro", [], task=task))


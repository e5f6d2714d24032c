"""Every cell of the paper's Tables 12-14 as a micro fine-tuning run on real data, the variant recorded
in MLflow; CRF training lowers the loss; invalid choices are one-line errors listing the valid ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ablations.cli import main
from ablations.config import build_config
from ablations.finetune import run_finetune

FAST = ["finetune.max_train_examples=48", "finetune.max_eval_examples=40", "finetune.epochs=2",
        "finetune.max_length=64", "trainer.progress_bar=false"]

TABLE_12 = [(task, head) for task in ("bc5-chem", "bc5-disease", "jnlpba", "chemprot", "ddi", "gad")
            for head in ("linear", "bilstm")]
TABLE_13 = [(task, scheme) for task in ("bc5-chem", "bc5-disease", "jnlpba") for scheme in ("bio", "bioul", "io")]
TABLE_14_ROWS = [("dummify", "cls"), ("dummify", "mention"), ("original", "cls"), ("original", "mention"),
                 ("markers", "cls"), ("markers", "mention"), ("markers", "entity-start")]
TABLE_14 = [(task, re_input, feature) for task in ("chemprot", "ddi") for re_input, feature in TABLE_14_ROWS]


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("variants")


def finetune(data_dir, work_dir, task, *overrides):
    cfg = build_config("micro", [*FAST, *overrides], task=task, data_dir=str(data_dir), work_dir=str(work_dir))
    result = run_finetune(cfg)
    run = MlflowClient(result.tracking_uri).get_run(result.run_id)
    assert run.info.status == "FINISHED" and "test/score" in run.data.metrics
    return result, run


@pytest.mark.parametrize("task,head", TABLE_12)
def test_table12_heads(data_dir, work_dir, task, head):
    _, run = finetune(data_dir, work_dir, task, f"finetune.head={head}")
    assert run.data.params["finetune.head"] == head


@pytest.mark.parametrize("task,scheme", TABLE_13)
def test_table13_tagging_schemes(data_dir, work_dir, task, scheme):
    _, run = finetune(data_dir, work_dir, task, f"finetune.tagging={scheme}")
    assert run.data.params["finetune.tagging"] == scheme
    assert {"test/precision", "test/recall"} <= set(run.data.metrics)  # scored on spans for every scheme


@pytest.mark.parametrize("task,re_input,feature", TABLE_14)
def test_table14_relation_inputs_and_features(data_dir, work_dir, task, re_input, feature):
    _, run = finetune(data_dir, work_dir, task, f"finetune.re_input={re_input}", f"finetune.re_feature={feature}")
    assert (run.data.params["finetune.re_input"], run.data.params["finetune.re_feature"]) == (re_input, feature)


@pytest.mark.parametrize("head,subtokens", [("crf", "first"), ("bilstm-crf", "all")])
def test_crf_training_lowers_the_loss(data_dir, work_dir, head, subtokens):
    result, run = finetune(data_dir, work_dir, "ncbi-disease", f"finetune.head={head}",
                           f"finetune.subtoken_labels={subtokens}", "finetune.tagging=bioul",
                           "finetune.max_train_examples=192", "finetune.epochs=3", "trainer.log_every_n_steps=1")
    losses = [m.value for m in MlflowClient(result.tracking_uri).get_metric_history(result.run_id, "train/loss")]
    assert len(losses) == 36  # 192 / 16 x 3 epochs
    assert sum(losses[-6:]) / 6 < 0.7 * sum(losses[:6]) / 6
    assert run.data.params["finetune.subtoken_labels"] == subtokens


def test_classifier_mlp_on_a_cls_task(data_dir, work_dir):
    _, run = finetune(data_dir, work_dir, "hoc", "finetune.classifier=mlp", "finetune.head=bilstm")
    assert run.data.params["finetune.classifier"] == "mlp"


@pytest.mark.parametrize("task,override,fragments", [
    ("chemprot", "finetune.re_feature=entity-start", ["needs the start markers", "finetune.re_input=markers"]),
    ("chemprot", "finetune.head=crf", ["unknown finetune.head 'crf' for chemprot", "valid: linear, bilstm"]),
    ("bc5-chem", "finetune.head=crff", ["unknown finetune.head 'crff'", "linear, bilstm, crf, bilstm-crf"]),
    ("bc5-chem", "finetune.tagging=bieo", ["unknown finetune.tagging 'bieo'", "valid: bio, bioul, io"]),
    ("gad", "finetune.tagging=io", ["finetune.tagging=io does not apply to gad", "ner, pico"]),
    ("bc5-chem", "finetune.re_input=markers", ["does not apply to bc5-chem", "re tasks"]),
    ("biosses", "finetune.subtoken_labels=all", ["does not apply to biosses"]),
])
def test_invalid_choices_are_one_line_errors(capsys, data_dir, tmp_path, task, override, fragments):
    code = main(["finetune", "--task", task, "--data-dir", str(data_dir), "--work-dir", str(tmp_path), override])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def test_list_variants(capsys):
    assert main(["list", "variants"]) == 0
    out = capsys.readouterr().out
    for name in ("bioul", "bilstm-crf", "entity-start", "markers", "mlp", "all"):
        assert name in out

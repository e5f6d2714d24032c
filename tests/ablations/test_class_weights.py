"""`finetune.class_weights`: a class-weighted cross-entropy for single-label classification (Bio-ELECTRA's
yes/no set, 80% yes), computed from the real training split, used by the loss exactly as written by hand,
off by default (old fingerprints unchanged), and refused in one line where it cannot apply."""

from __future__ import annotations

import pytest
import torch
from mlflow.tracking import MlflowClient

from ablations.cli import main
from ablations.config import build_config, fingerprint
from ablations.run.finetune import identify, run_finetune
from bioablate_core.errors import ConfigError
from datamodules.class_weights import resolve_class_weights
from datamodules.registry import get_dataset
from lightning_modules.heads import A_NUMBER, HEADS, ONE_CLASS, RELEVANCE, SequenceClassifier

FAST = ["finetune.max_train_examples=48", "finetune.max_eval_examples=32", "finetune.max_length=64",
        "trainer.progress_bar=false"]


def test_balanced_weights_of_the_real_yes_no_training_split(data_dir):
    spec = get_dataset("bioelectra-yesno")
    train = spec.read(data_dir)["train"]
    yes = sum(x.label == "yes" for x in train)
    weights = resolve_class_weights("balanced", spec, train)
    assert spec.labels == ("yes", "no") and yes > 0.7 * len(train)  # the 80/20 imbalance
    assert weights == pytest.approx((len(train) / (2 * yes), len(train) / (2 * (len(train) - yes))))
    assert weights[1] > 3 * weights[0]
    assert resolve_class_weights({"no": 4}, spec, train) == (1.0, 4.0)  # unnamed classes weigh 1
    assert resolve_class_weights([1, 2.5], spec, train) == (1.0, 2.5)
    assert resolve_class_weights(None, spec, train) is None


def test_the_weighted_loss_is_the_one_computed_by_hand():
    torch.manual_seed(0)
    weights = (0.6, 2.5)
    head = SequenceClassifier(HEADS.get("linear"), "cls", "linear", 8, 2, 0.0, ONE_CLASS, weights)
    plain = SequenceClassifier(HEADS.get("linear"), "cls", "linear", 8, 2, 0.0, ONE_CLASS)
    logits = torch.randn(6, 2)
    labels = torch.tensor([0, 0, 0, 0, 1, 1])
    nll = -logits.log_softmax(-1)[torch.arange(6), labels]
    w = torch.tensor(weights)[labels]
    by_hand = (w * nll).sum() / w.sum()
    assert head.loss(logits, {"labels": labels}).item() == pytest.approx(by_hand.item(), rel=1e-6)
    assert plain.loss(logits, {"labels": labels}).item() == pytest.approx(nll.mean().item(), rel=1e-6)
    assert head.loss(logits, {"labels": labels}).item() != pytest.approx(nll.mean().item(), rel=1e-3)
    assert "class_weights" not in head.state_dict()  # an exported head loads without them
    with pytest.raises(ValueError):
        SequenceClassifier(HEADS.get("linear"), "cls", "linear", 8, 3, 0.0, ONE_CLASS, weights)
    # a ranking head trains as classification: the same weighted loss (Bio-ELECTRA's weighted re-ranker)
    ranking = SequenceClassifier(HEADS.get("linear"), "cls", "linear", 8, 2, 0.0, RELEVANCE, weights)
    assert ranking.loss(logits, {"labels": labels}).item() == pytest.approx(by_hand.item(), rel=1e-6)
    with pytest.raises(ValueError):
        SequenceClassifier(HEADS.get("linear"), "cls", "linear", 8, 1, 0.0, A_NUMBER, weights[:1])


def test_a_weighting_makes_a_new_run():
    cfg = build_config("micro", [], task="gad")
    assert cfg.finetune.class_weights is None
    weighted = build_config("micro", ["finetune.class_weights=balanced"], task="gad")
    assert fingerprint(cfg, "DATA") == "bd995c0a7d714e51"  # tests/ablations/test_config.py's pinned micro-gad
    assert fingerprint(weighted, "DATA") != fingerprint(cfg, "DATA")


@pytest.mark.parametrize("value, task, message", [
    ("balanced", "bc5-chem", "applies to single-label classification"),
    ("balanced", "hoc", "multi-label"),
    ("balanced", "biosses", "similarity"),
    ("inverse", "bioelectra-yesno", "give `balanced`"),
    ("[1,2,3]", "bioelectra-yesno", "3 weights for 2 classes"),
    ("{maybe: 2}", "bioelectra-yesno", "'maybe' is not a class"),
    ("{'no': -1}", "bioelectra-yesno", "positive finite number"),
    ("[.nan,1]", "bioelectra-yesno", "positive finite number, got nan"),  # passed `weight <= 0`: NaN loss
    ("{'no': .inf}", "bioelectra-yesno", "positive finite number, got inf"),
    ("{no: 4}", "bioelectra-yesno", "quote them"),
])
def test_a_weighting_that_cannot_apply_is_one_line_naming_the_key(value, task, message, data_dir, tmp_path, capsys):
    cfg = build_config("micro", [f"finetune.class_weights={value}"], task=task, data_dir=str(data_dir),
                       work_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="finetune.class_weights") as error:
        identify(cfg)
    assert message in str(error.value) and "\n" not in str(error.value)
    code = main(["finetune", "--task", task, "--data-dir", str(data_dir), "--work-dir", str(tmp_path),
                 f"finetune.class_weights={value}"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert not (tmp_path / "mlruns.db").exists() or not MlflowClient(f"sqlite:///{tmp_path / 'mlruns.db'}").search_runs(
        [e.experiment_id for e in MlflowClient(f"sqlite:///{tmp_path / 'mlruns.db'}").search_experiments()])


def test_a_weighted_ranking_run_finishes_with_the_relevant_class_weighted_up(data_dir, tmp_path):
    """Bio-ELECTRA's weighted re-ranker: balanced weights from the run's training pairs (about 1 relevant
    per 99), the relevant class weighted far above the others, scored by MRR."""
    cfg = build_config("micro", [*FAST, "finetune.max_train_examples=320", "finetune.class_weights=balanced"],
                       task="bioelectra-rerank", data_dir=str(data_dir), work_dir=str(tmp_path))
    result = run_finetune(cfg)
    run = MlflowClient(result.tracking_uri).get_run(result.run_id)
    assert run.info.status == "FINISHED" and run.data.tags["class_weights"].startswith("0=")
    irrelevant, relevant = (float(part.split("=")[1]) for part in run.data.tags["class_weights"].split(", "))
    assert relevant > 20 * irrelevant
    assert {"test/score", "test/hits_at_1"} <= set(run.data.metrics)


def test_a_weighted_yes_no_run_logs_its_weights_and_per_class_scores(data_dir, tmp_path):
    cfg = build_config("micro", [*FAST, "finetune.class_weights=balanced"], task="bioelectra-yesno",
                       data_dir=str(data_dir), work_dir=str(tmp_path))
    result = run_finetune(cfg)
    run = MlflowClient(result.tracking_uri).get_run(result.run_id)
    assert run.info.status == "FINISHED" and run.data.params["finetune.class_weights"] == "balanced"
    yes, no = (float(part.split("=")[1]) for part in run.data.tags["class_weights"].split(", "))
    assert run.data.tags["class_weights"].startswith("yes=") and no > yes
    assert {"test/f1_yes", "test/f1_no", "test/precision_no", "test/recall_no"} <= set(run.data.metrics)

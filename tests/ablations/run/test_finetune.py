"""Micro fine-tuning runs on the real data of all 13 BLURB datasets, read back from a real MLflow store."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from ablations.config import build_config
from ablations.run.finetune import run_finetune
from datamodules.finetune_data import subsample
from datamodules.registry import dataset_names, get_dataset
from datamodules.task_encoder import RANKING_METRICS, scoring_group
from lightning_modules.finetune import FineTuneModule

# Small enough for CI, big enough to exercise batching, two dev epochs and best-epoch selection.
FAST = ["finetune.max_train_examples=48", "finetune.max_eval_examples=40", "finetune.epochs=2",
        "finetune.max_length=64", "trainer.progress_bar=false"]

# What tells each metric kind apart (besides `score`, which all have): the summary keys logged as MLflow
# metrics (test/, best_dev/: what tables and sweeps read), and the counts, only in the details artifact.
METRIC_KEYS = {
    "entity_f1": ({"precision", "recall"}, {"tp", "fp", "fn", "support"}),
    "pico_word_macro_f1": ({"f1_PAR", "f1_INT", "f1_OUT", "precision_PAR"}, {"support_PAR"}),
    "relation_micro_f1": ({"precision", "recall"}, {"tp", "fp", "fn"}),  # + one f1_<class> per positive class
    "positive_class_f1": ({"precision", "recall"}, {"tp", "support"}),
    "pearson": (set(), {"n", "constant_prediction"}),
    "multilabel_micro_f1": ({"precision", "recall", "f1_Cellular energetics"}, {"tp", "support_Cellular energetics"}),
    "accuracy": (set(), {"correct", "total"}),
    "per_class_f1": ({"precision", "recall", "f1_yes", "f1_no", "precision_no"}, {"support_yes", "support_no"}),
    "mean_reciprocal_rank": ({"hits_at_1"}, {"questions", "questions_without_positive"}),
    "squad_v1": ({"em", "f1"}, {"total"}),
    "bioasq_factoid": ({"strict", "lenient", "mrr"}, {"total"}),
}
RELATION_CLASSES = {"chemprot": {"f1_CPR3", "f1_CPR4", "f1_CPR5", "f1_CPR6", "f1_CPR9"},
                    "ddi": {"f1_mechanism", "f1_effect", "f1_advise", "f1_int"}}
CLASSIFICATION = ("re", "qa")  # single-label tasks: a confusion matrix (HoC is multi-label)


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("work")


def micro_config(task: str, data_dir: Path, work_dir: Path, *extra: str, **flags):
    return build_config("micro", [*FAST, *extra], task=task, data_dir=str(data_dir), work_dir=str(work_dir),
                        **flags)


@pytest.mark.slow
@pytest.mark.parametrize("task", dataset_names())
def test_micro_finetune_logs_dev_and_test_metrics(task: str, data_dir: Path, work_dir: Path):
    spec = get_dataset(task)
    result = run_finetune(micro_config(task, data_dir, work_dir, "figures=true"))  # micro draws none by default
    client = MlflowClient(result.tracking_uri)
    run = client.get_run(result.run_id)

    assert run.info.status == "FINISHED"
    assert run.data.tags["task"] == task and run.data.tags["metric"] == spec.metric
    assert run.data.tags["fingerprint"] == result.fingerprint and run.data.tags["git_commit"]
    assert run.data.params["finetune.lr"] == "0.0005" and run.data.params["seed"] == "42"
    assert not [k for k in run.data.params if k.startswith(("pretrain.", "launcher."))]  # not a pretraining run
    summary, counts = METRIC_KEYS[spec.metric]
    summary = {"score"} | summary | RELATION_CLASSES.get(task, set())
    for prefix in ("best_dev/", "test/"):
        logged = {k[len(prefix):] for k in run.data.metrics if k.startswith(prefix)}
        assert summary <= logged and not logged & counts, (prefix, summary - logged, logged & counts)
    # the charted curves: the headline scores of each epoch, the loss of every step and each epoch's mean
    assert {k[4:] for k in run.data.metrics if k.startswith("dev/")} <= {k for k in summary if "_" not in k}
    history = [m.value for m in client.get_metric_history(result.run_id, "dev/score")]
    assert len(history) == 2 and run.data.metrics["best_dev/score"] == pytest.approx(max(history))
    steps = len(client.get_metric_history(result.run_id, "train/loss"))
    if spec.task_type == "qa-extractive":  # a context longer than the window is several rows (windows)
        assert steps >= 2 * 3 and steps % 2 == 0
    else:
        assert steps == 2 * 3  # 48 examples, batches of 16
    assert len(client.get_metric_history(result.run_id, "train/loss_epoch")) == 2
    bounds = (-1.0, 1.0) if spec.metric == "pearson" else (0.0, 1.0)
    assert bounds[0] <= run.data.metrics["test/score"] <= bounds[1]

    artifacts = Path(client.download_artifacts(result.run_id, "", str(work_dir / "dl" / task)))
    lines = (artifacts / "test_predictions.jsonl").read_text().splitlines()
    splits = spec.read(data_dir)  # the examples it used of each split, as MLflow dataset inputs
    # evaluation capped at 40, of whole questions where the metric scores by question (ranking, BioASQ)
    group_by = scoring_group(spec)
    evaluated = {split: len(subsample(splits[split], 40, group_by)) for split in ("dev", "test")}
    assert len(lines) == evaluated["test"]
    # a task scored by question also records each prediction's question (the statistics resample by it)
    assert set(json.loads(lines[0])) == {"id", "gold", "prediction"} | ({"group"} if group_by else set())
    if spec.task_type == "qa-extractive":  # every candidate the ranking over snippets used, not the first 5
        assert max(len(json.loads(line)["prediction"]) for line in lines) == 20  # finetune's n-best
    assert "task: " + task in (artifacts / "config.yaml").read_text()
    details = json.loads((artifacts / "metrics" / "details.json").read_text())
    assert counts <= set(details["test"]) and len(details["dev"]) == 2
    assert details["best_dev"] == details["dev"][details["best_epoch"]]
    assert details["test"]["score"] == pytest.approx(run.data.metrics["test/score"])
    figures = {p.name for p in (artifacts / "figures").iterdir()}
    # (a ranking task is trained as classification but predicts scores: no confusion matrix)
    single_label = spec.task_type in CLASSIFICATION and not spec.multi_label and spec.metric not in RANKING_METRICS
    assert figures == {"curves.png", *(["confusion_matrix.png"] if single_label else [])}
    inputs = {i.dataset.name: json.loads(i.dataset.profile)["num_rows"] for i in run.inputs.dataset_inputs}
    assert inputs == {f"{task}/train": min(48, len(splits["train"])), f"{task}/dev": evaluated["dev"],
                      f"{task}/test": len(lines)}


@pytest.mark.slow
@pytest.mark.parametrize("dev_scores", [(1.0, 0.0), (0.0, 1.0)], ids=["first-epoch-best", "last-epoch-best"])
def test_the_test_split_is_scored_with_the_best_dev_epochs_weights(dev_scores, data_dir, work_dir, monkeypatch):
    """Whichever epoch scored best on dev, test sees exactly its weights (read back from the best checkpoint
    when a later epoch changed them)."""
    weights: dict[str, dict] = {}
    score = FineTuneModule._score

    def forced_dev_score(self, split):
        metrics, predictions = score(self, split)
        snapshot = {k: v.detach().clone() for k, v in self.state_dict().items()}
        if split == "dev":
            metrics = {**metrics, "score": dev_scores[self.current_epoch]}
            weights[f"epoch{self.current_epoch}"] = snapshot
        else:
            weights["test"] = snapshot
        return metrics, predictions

    monkeypatch.setattr(FineTuneModule, "_score", forced_dev_score)
    result = run_finetune(micro_config("gad", data_dir, work_dir, f"seed={11 + int(dev_scores[0])}"))
    best = f"epoch{dev_scores.index(1.0)}"
    other = f"epoch{dev_scores.index(0.0)}"
    assert result.best_dev["score"] == 1.0
    assert all(torch.equal(weights["test"][k], weights[best][k]) for k in weights[best])
    assert not all(torch.equal(weights["test"][k], weights[other][k]) for k in weights[other])


def test_rerun_reuses_the_finished_run(data_dir: Path, work_dir: Path):
    first = run_finetune(micro_config("gad", data_dir, work_dir, "seed=7"))
    again = run_finetune(micro_config("gad", data_dir, work_dir, "seed=7", "trainer.progress_bar=true"))
    assert not first.reused and again.reused and again.run_id == first.run_id
    runs = MlflowClient(first.tracking_uri).search_runs(
        [MlflowClient(first.tracking_uri).get_run(first.run_id).info.experiment_id],
        f"tags.fingerprint = '{first.fingerprint}'")
    assert len(runs) == 1


@pytest.mark.slow
def test_training_lowers_the_loss(data_dir: Path, work_dir: Path):
    cfg = micro_config("bc5-chem", data_dir, work_dir, "finetune.max_train_examples=256",
                       "finetune.epochs=3", "trainer.log_every_n_steps=1")
    result = run_finetune(cfg)
    losses = [m.value for m in MlflowClient(result.tracking_uri).get_metric_history(result.run_id, "train/loss")]
    assert len(losses) == 48  # 256 / 16 batches x 3 epochs
    assert sum(losses[-8:]) / 8 < 0.6 * sum(losses[:8]) / 8


def test_crash_marks_run_failed_keeps_checkpoint_and_rerun_resumes(data_dir, work_dir, monkeypatch):
    cfg = micro_config("ncbi-disease", data_dir, work_dir, "seed=3")
    original = FineTuneModule.training_step

    def crash_in_second_epoch(self, batch, batch_idx):
        if self.current_epoch == 1:
            raise RuntimeError("simulated crash")
        return original(self, batch, batch_idx)

    monkeypatch.setattr(FineTuneModule, "training_step", crash_in_second_epoch)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_finetune(cfg)
    client = MlflowClient(f"sqlite:///{work_dir / 'mlruns.db'}")
    failed = client.search_runs([client.get_experiment_by_name("finetune").experiment_id],
                                "tags.task = 'ncbi-disease' and params.seed = '3'")
    assert len(failed) == 1 and failed[0].info.status == "FAILED"
    assert "simulated crash" in failed[0].data.tags["error"]
    fingerprint = failed[0].data.tags["fingerprint"]
    last = work_dir / "runs" / fingerprint / "checkpoints" / "last.ckpt"
    assert last.exists()  # epoch 0 finished before the crash
    # the best epoch's checkpoint is its weights alone (test and export read nothing else); last.ckpt is
    # the whole training state a resume needs
    best = torch.load(last.with_name("best.ckpt"), weights_only=True)
    whole = torch.load(last, weights_only=True)
    assert "optimizer_states" not in best and whole["optimizer_states"]
    assert best["state_dict"].keys() == whole["state_dict"].keys()

    monkeypatch.setattr(FineTuneModule, "training_step", original)
    resumed = run_finetune(cfg)
    run = client.get_run(resumed.run_id)
    # continued in a new MLflow run holding the failed run's points before the checkpoint; no error tag
    assert run.data.tags["continues"] == failed[0].info.run_id and run.info.status == "FINISHED"
    assert "error" not in run.data.tags
    assert client.get_run(failed[0].info.run_id).info.lifecycle_stage == "deleted"
    # resumed at epoch 1: exactly one more dev evaluation, two in all
    assert len(client.get_metric_history(resumed.run_id, "dev/score")) == 2
    assert not last.exists()  # a finished run cleans up its checkpoints


@pytest.mark.slow
def test_finetune_from_a_hugging_face_directory_and_named_model(data_dir, work_dir, tmp_path):
    from lightning_modules.models import load_encoder

    cfg = micro_config("biosses", data_dir, work_dir)
    encoder, tokenizer = load_encoder(cfg.model, data_dir, dropout=0.1)
    encoder.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    from_dir = run_finetune(micro_config("biosses", data_dir, work_dir,
                                         **{"model.name_or_path": str(tmp_path / "model")}))
    named = run_finetune(micro_config("bioasq", data_dir, work_dir,
                                      **{"model.name_or_path": "general-minilm"}))
    client = MlflowClient(named.tracking_uri)
    assert client.get_run(from_dir.run_id).data.tags["model"] == "<local>/model"  # not where it lay
    assert client.get_run(named.run_id).data.params["model.name_or_path"] == "general-minilm"
    assert client.get_run(named.run_id).info.status == "FINISHED"
    # each logs its loaded model's size, not the micro profile's random-BERT keys; neither is from the Hub
    params = client.get_run(named.run_id).data.params
    assert (params["model.hidden_size"], params["model.num_layers"], params["model.type"]) == ("384", "6", "bert")
    assert "model.vocab" not in params and "model.lowercase" not in params
    params = client.get_run(from_dir.run_id).data.params
    assert (params["model.hidden_size"], params["model.num_layers"]) == (str(cfg.model.hidden_size),
                                                                       str(cfg.model.num_layers))
    assert "hub_commit" not in client.get_run(named.run_id).data.tags


def test_entity_markers_grow_a_model_folders_tokenizer_and_the_run_finishes(data_dir, work_dir):
    """The model check refuses a vocabulary larger than the embeddings (lightning_modules/model_checks.py);
    the markers a relation run adds to the tokenizer afterwards are resized into the embeddings as before."""
    result = run_finetune(micro_config("chemprot", data_dir, work_dir, "finetune.re_input=markers",
                                       "finetune.max_train_examples=16", "finetune.max_eval_examples=16",
                                       "finetune.epochs=1", **{"model.name_or_path": "general-minilm"}))
    run = MlflowClient(result.tracking_uri).get_run(result.run_id)
    assert run.info.status == "FINISHED" and "score" in result.test


@pytest.mark.slow
def test_a_run_leaves_the_tracking_environment_alone(data_dir, tmp_path, monkeypatch):
    """Two runs in one process with different work directories log to their own stores."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    first = run_finetune(micro_config("biosses", data_dir, tmp_path / "a", "seed=11"))
    second = run_finetune(micro_config("biosses", data_dir, tmp_path / "b", "seed=11"))
    assert "MLFLOW_TRACKING_URI" not in os.environ
    assert first.tracking_uri != second.tracking_uri and not second.reused


@pytest.mark.slow
@pytest.mark.parametrize("task", ["bc5-chem", "hoc"])  # a token task; a (multi-label) sequence task
def test_adversarial_finetuning_adds_a_positive_alum_term(task, data_dir, tmp_path):
    result = run_finetune(micro_config(task, data_dir, tmp_path, "finetune.adversarial=true", "finetune.epochs=1",
                                       "finetune.max_train_examples=32", "trainer.log_every_n_steps=1"))
    client = MlflowClient(result.tracking_uri)
    assert client.get_run(result.run_id).info.status == "FINISHED"
    adversarial = [m.value for m in client.get_metric_history(result.run_id, "train/adversarial_loss")]
    task_loss = [m.value for m in client.get_metric_history(result.run_id, "train/task_loss")]
    total = [m.value for m in client.get_metric_history(result.run_id, "train/loss")]
    assert len(adversarial) == 2 and all(a > 0 for a in adversarial)
    assert total == pytest.approx([t + a for t, a in zip(task_loss, adversarial)], rel=1e-5)


def test_adversarial_finetuning_refuses_regression(data_dir, tmp_path):
    from ablations.run.finetune_identity import identify
    from bioablate_core.errors import ConfigError

    with pytest.raises(ConfigError, match="finetune.adversarial=true does not apply to biosses"):
        identify(micro_config("biosses", data_dir, tmp_path, "finetune.adversarial=true"))


def test_model_directory_counts_by_content_not_by_path(data_dir, tmp_path):
    """The same pretrained model copied to another work directory finds the same runs (fingerprint);
    a model directory with other weights does not."""
    import shutil

    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    from ablations.run.finetune_identity import identify
    from datamodules.vocabs import resolve_vocab

    vocab = resolve_vocab("bert-base-uncased", data_dir)
    config = BertConfig(vocab_size=sum(1 for _ in vocab.open()), hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64)

    def save(path: Path, seed: int) -> Path:
        torch.manual_seed(seed)
        BertModel(config).save_pretrained(path)
        BertTokenizer(vocab=str(vocab)).save_pretrained(path)
        return path

    def run_fingerprint(model_dir: Path) -> str:
        return identify(micro_config("biosses", data_dir, tmp_path / "work",
                                     f"model.name_or_path={model_dir}")).fingerprint

    original = save(tmp_path / "a" / "model", seed=0)
    copy = Path(shutil.copytree(original, tmp_path / "b" / "elsewhere"))
    other = save(tmp_path / "c" / "model", seed=1)
    assert run_fingerprint(original) == run_fingerprint(copy)
    assert run_fingerprint(other) != run_fingerprint(original)
    random = identify(micro_config("biosses", data_dir, tmp_path / "work")).fingerprint  # random-bert keeps its name
    assert random not in {run_fingerprint(original), run_fingerprint(other)}

    # the same for continual pretraining from a model directory
    from ablations.run import pretrain_identity

    def stage_fingerprint(init: Path) -> str:
        cfg = build_config("micro", [f"pretrain.init={init}", "pretrain.vocab=init"], task="pretrain",
                           data_dir=str(data_dir), work_dir=str(tmp_path / "work"))
        return pretrain_identity.identify(cfg).fingerprint

    assert stage_fingerprint(original) == stage_fingerprint(copy) != stage_fingerprint(other)


def test_a_capped_run_of_a_task_scored_by_group_is_not_one_capped_before(data_dir, tmp_path):
    """Runs capped per instance cut questions apart: a store's earlier such run is not reused (another
    fingerprint); uncapped runs and tasks scored per instance keep their fingerprints."""
    from ablations.config import fingerprint
    from ablations.run.finetune_identity import identify
    from lightning_modules.models import model_fingerprint

    def fingerprints(task: str, *overrides: str) -> tuple[str, str]:
        cfg = build_config("micro", list(overrides), task=task, data_dir=str(data_dir), work_dir=str(tmp_path))
        identity = identify(cfg)
        before = fingerprint(cfg, identity.data_fingerprint + model_fingerprint(cfg.model, data_dir))
        return identity.fingerprint, before

    now, before = fingerprints("bioelectra-rerank")  # the micro profile caps evaluation at 32
    assert now != before
    assert len(set(fingerprints("bioelectra-rerank", "finetune.max_eval_examples=null"))) == 1
    assert len(set(fingerprints("bioelectra-yesno"))) == len(set(fingerprints("bioelectra-factoid"))) == 1

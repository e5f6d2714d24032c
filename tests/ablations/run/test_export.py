"""Models people can share: a pretrained model folder loads cleanly with transformers' Auto classes and
carries its card; a finished micro fine-tuning run exports (`bioablate export`) to a folder that predicts
(`bioablate predict`) exactly what the run's logged test predictions say."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from mlflow.tracking import MlflowClient
from transformers import (
    AlbertConfig,
    AlbertModel,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForPreTraining,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
    BertConfig,
    BertModel,
    BertTokenizer,
    ElectraConfig,
    ElectraModel,
)

from ablations.cli import main
from ablations.config import build_config
from ablations.run.cards import Provenance
from ablations.run.export import META_FILE, export_mapping, save_finetuned, transformers_model
from ablations.run.finetune import run_finetune
from ablations.run.predict import load_model, predict
from ablations.run.pretrain import run_pretrain
from bioablate_core.files import current_umask
from datamodules.encoders import EncodingSpec
from datamodules.registry import dataset_names, get_dataset
from datamodules.task_kinds import make_encoder
from datamodules.vocabs import resolve_vocab
from lightning_modules.finetune_spec import FinetuneSpec
from lightning_modules.heads import HeadSpec
from tests.test_conformance import write_test_inputs

FINETUNE = ["finetune.max_train_examples=48", "finetune.max_eval_examples=40", "finetune.epochs=2",
            "finetune.max_length=64", "trainer.progress_bar=false"]
# Weights of the pretraining heads: a class without that head reports them "unexpected" (transformers 5
# reports every checkpoint key its class has no parameter for; see ablations/run/cards.py and the report)
HEAD_PREFIXES = ("cls.", "predictions.", "sop_classifier.", "discriminator_predictions.", "bert.pooler.",
                 "albert.pooler.")


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("export-work")


def _modes(folder: Path) -> set[int]:
    return {stat.S_IMODE(os.stat(p).st_mode) for p in folder.iterdir()}


# ------------------------------------------------------------------------------------------- pretraining

PRETRAIN = {  # objective -> the Auto classes that must load its folder with nothing missing
    "bert": [],
    "albert": ["pretrain.objective=albert", "pretrain.embedding_size=32"],
    "electra": ["pretrain.objective=electra"],
}
LOADERS = {"bert": (AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification),
           "albert": (AutoModel, AutoModelForMaskedLM, AutoModelForPreTraining),
           "electra": (AutoModel, AutoModelForPreTraining)}
# The class with exactly the trained pretraining heads loads the folder with an empty report (nothing
# missing, nothing unused); other classes may only list the heads' weights as unused. One exception that
# transformers 5 forces: `BertForMaskedLM` has no pooler while `BertModel` and the task classes do, so no
# single folder gives both an empty report. The folder keeps the (untrained) pooler, so that no class
# initialises anything at random, and `AutoModelForMaskedLM` lists exactly the pooler as unused.
PRETRAINING_CLASS = {"bert": (AutoModelForMaskedLM, {"bert.pooler.dense.weight", "bert.pooler.dense.bias"}),
                     "albert": (AutoModelForPreTraining, set()), "electra": (AutoModelForPreTraining, set())}


@pytest.mark.slow
@pytest.mark.parametrize("objective", list(PRETRAIN))
def test_pretrained_folder_loads_cleanly_and_has_its_card(objective: str, data_dir: Path, work_dir: Path):
    old = os.umask(0o022)
    try:
        cfg = build_config("micro", ["trainer.progress_bar=false", "pretrain.max_steps=10",
                                     "pretrain.checkpoint_every=10", *PRETRAIN[objective]],
                           task="pretrain", experiment_name="pretrain", data_dir=str(data_dir),
                           work_dir=str(work_dir))
        result = run_pretrain(cfg)
    finally:
        os.umask(old)
    folder = result.model_dir
    assert folder.name == f"{objective}-pubmed-wwm-s42-{result.fingerprint[:8]}"
    assert _modes(folder) == {0o644} and stat.S_IMODE(os.stat(folder).st_mode) == 0o755

    auto, unused = PRETRAINING_CLASS[objective]
    _, info = auto.from_pretrained(folder, output_loading_info=True)
    assert info == {"missing_keys": set(), "unexpected_keys": unused, "mismatched_keys": set(),
                    "error_msgs": []}, info
    for auto in LOADERS[objective]:
        _, info = auto.from_pretrained(folder, output_loading_info=True)
        expected_missing = {"classifier.weight", "classifier.bias"} \
            if auto is AutoModelForSequenceClassification else set()
        assert set(info["missing_keys"]) == expected_missing, (auto.__name__, info)
        assert not info["mismatched_keys"] and not info["error_msgs"], (auto.__name__, info)
        assert all(k.startswith(HEAD_PREFIXES) for k in info["unexpected_keys"]), (auto.__name__, info)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.model_max_length == cfg.model.max_position_embeddings == 512
    assert len(tokenizer("word " * 2000, truncation=True)["input_ids"]) == 512

    card = (folder / "README.md").read_text()
    front = yaml.safe_load(card.split("---")[1])
    assert front["library_name"] == "transformers" and front["language"] == "en" and front["license"]
    assert front["pipeline_tag"] == ("feature-extraction" if objective == "electra" else "fill-mask")
    assert objective in front["tags"]
    for section in ("## Objective", "## Corpus", "## Vocabulary", "## Training", "## Provenance"):
        assert section in card
    assert result.fingerprint in card and result.run_id in card
    assert "steps: 10 optimizer steps of 16 sequences" in card and "tokens seen: about" in card
    assert "final losses: " in card and "not logged" not in card
    assert "objective: " + objective in card  # the config, resolved
    assert "\nlauncher:" not in card and "\nfinetune:" not in card  # not how a pretraining run was made
    assert str(data_dir) not in card and str(work_dir) not in card  # no machine paths


# ------------------------------------------------------------------------------------------- fine-tuning

FINETUNED = {  # case -> (task, overrides, expected format, the transformers class that loads it)
    "bc5-chem": ("bc5-chem", [], "transformers", AutoModelForTokenClassification),
    "hoc": ("hoc", [], "transformers", AutoModelForSequenceClassification),
    "chemprot": ("chemprot", [], "transformers", AutoModelForSequenceClassification),
    "bc5-chem-crf": ("bc5-chem", ["finetune.head=crf"], "bioablate", None),
    "chemprot-entity-start": ("chemprot", ["finetune.re_input=markers", "finetune.re_feature=entity-start"],
                              "bioablate", None),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(FINETUNED))
def test_exported_model_predicts_what_the_run_logged(case: str, data_dir: Path, work_dir: Path, tmp_path: Path):
    task, overrides, fmt, auto = FINETUNED[case]
    cfg = build_config("micro", [*FINETUNE, *overrides], task=task, data_dir=str(data_dir),
                       work_dir=str(work_dir))
    result = run_finetune(cfg)
    out = tmp_path / "model"
    assert main(["export", result.fingerprint, "--to", str(out), "--work-dir", str(work_dir)]) == 0
    meta = json.loads((out / META_FILE).read_text())
    assert meta["format"] == fmt and meta["run_id"] == result.run_id and meta["task"] == task
    assert _modes(out) == {0o666 & ~current_umask()}
    card = (out / "README.md").read_text()
    assert "## Inputs" in card and result.run_id in card and result.fingerprint in card
    if auto is not None:  # plain transformers loads it, labels and all, with nothing missing or left over
        model, info = auto.from_pretrained(out, output_loading_info=True)
        assert not any(info.values()), info
        assert list(model.config.id2label.values()) == meta["labels"]

    inputs, predicted = tmp_path / "test.jsonl", tmp_path / "predicted.jsonl"
    write_test_inputs(task, data_dir, inputs)
    assert main(["predict", "--model", str(out), "--task", task, "--input", str(inputs),
                 "--output", str(predicted)]) == 0
    client = MlflowClient(result.tracking_uri)
    logged = Path(client.download_artifacts(result.run_id, "test_predictions.jsonl", str(tmp_path)))
    expected = [json.loads(line) for line in logged.read_text().splitlines()]
    got = [json.loads(line) for line in predicted.read_text().splitlines()]
    assert [g["id"] for g in got] == [e["id"] for e in expected]
    assert [g["prediction"] for g in got] == [e["prediction"] for e in expected]
    for record in got:  # what each prediction reports besides (tests/ablations/run/test_predict.py: the offsets)
        if "entities" in record:  # tagging, the CRF's marginals included
            assert len(record["entities"]) == len(record["prediction"])
            assert all(record["text"][e["start"]:e["end"]] == e["word"] and 0.0 < e["score"] <= 1.0
                       for e in record["entities"])
            continue
        probabilities = record["probabilities"]
        assert list(probabilities) == meta["labels"]
        if isinstance(record["prediction"], list):  # multi-label: the labels whose sigmoid passes 0.5
            assert sorted(record["prediction"]) == sorted(k for k, p in probabilities.items() if p > 0.5)
        else:  # one class: the softmax's largest
            assert sum(probabilities.values()) == pytest.approx(1.0, abs=1e-5)
            assert record["prediction"] == max(probabilities, key=probabilities.get)


@pytest.mark.slow  # creating the MLflow store takes ~10 s
def test_export_of_an_unknown_run_is_one_clear_line(tmp_path: Path, capsys):
    code = main(["export", "0123456789abcdef", "--to", str(tmp_path / "m"), "--work-dir", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no run with id or fingerprint '0123456789abcdef'" in err


def test_predict_needs_an_exported_folder(tmp_path: Path, capsys):
    (tmp_path / "in.txt").write_text("Aspirin helps.\n")
    code = main(["predict", "--model", str(tmp_path), "--task", "bc5-chem", "--input", str(tmp_path / "in.txt")])
    assert code == 2 and "bioablate export" in capsys.readouterr().err


# ------------------------------------------------------------------- the transformers classes, exactly

def _task_encoder(task: str, data_dir: Path):
    tokenizer = BertTokenizer(vocab=str(resolve_vocab("bert-base-uncased", data_dir)))
    return make_encoder(get_dataset(task), tokenizer, 64)


def _random_encoder(model_type: str):
    torch.manual_seed(0)
    size = dict(vocab_size=200, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
    if model_type == "bert":
        return BertModel(BertConfig(**size), add_pooling_layer=False).eval()
    if model_type == "albert":
        return AlbertModel(AlbertConfig(embedding_size=16, **size), add_pooling_layer=False).eval()
    return ElectraModel(ElectraConfig(embedding_size=32, **size)).eval()


@pytest.mark.parametrize("model_type,task,classifier,head", [
    ("bert", "bc5-chem", "linear", "linear"), ("electra", "bc5-chem", "linear", "linear"),
    ("bert", "hoc", "linear", "linear"), ("albert", "chemprot", "linear", "linear"),
    ("bert", "biosses", "linear", "linear"), ("electra", "hoc", "mlp", "linear"),
])
def test_transformers_class_computes_the_heads_logits(model_type, task, classifier, head, data_dir: Path):
    """The exported class's logits equal encoder + bioablate head's, to float precision; for BERT/ALBERT
    sequence heads through the linearised pooler."""
    task_encoder = _task_encoder(task, data_dir)
    encoder = _random_encoder(model_type)
    ft = SimpleNamespace(head=head, dropout=0.1, re_feature="cls", classifier=classifier)
    head_spec = HeadSpec.from_config(ft, task_encoder.spec.task_type)
    bioablate_head = head_spec.build(task_encoder, 32).eval()
    with torch.no_grad():  # a head of realistic scale, not zeros
        for p in bioablate_head.parameters():
            p.normal_(0, 0.5)
    mapping = export_mapping(FinetuneSpec(EncodingSpec(), head_spec), task_encoder.output_kind, model_type)
    assert mapping is not None
    model = transformers_model(encoder, bioablate_head, task_encoder, mapping)
    ids = torch.randint(5, 200, (3, 12))
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    with torch.no_grad():
        ours = bioablate_head(encoder(**batch).last_hidden_state, batch)
        theirs = model(**batch).logits
    assert theirs.shape == ours.shape
    torch.testing.assert_close(theirs, ours, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("head,feature", [("crf", "cls"), ("bilstm", "cls")])
def test_heads_transformers_has_no_class_for_stay_bioablate(head, feature, data_dir: Path):
    task_encoder = _task_encoder("bc5-chem", data_dir)
    ft = SimpleNamespace(head=head, dropout=0.1, re_feature=feature, classifier="linear")
    choices = FinetuneSpec(EncodingSpec(), HeadSpec.from_config(ft, task_encoder.spec.task_type))
    assert export_mapping(choices, task_encoder.output_kind, "bert") is None


@pytest.mark.slow  # reads every dataset: 1-9 s each
@pytest.mark.parametrize("task", dataset_names())
def test_every_task_saves_a_model_that_predicts(task: str, data_dir: Path, tmp_path: Path):
    """What a finished run writes (untrained weights: this checks the plumbing of every task type, the
    card's sections included), loaded back and run on the first test examples."""
    cfg = build_config("micro", [], task=task, data_dir=str(data_dir), work_dir=str(tmp_path))
    task_encoder = _task_encoder(task, data_dir)
    torch.manual_seed(0)
    encoder = BertModel(BertConfig(vocab_size=len(task_encoder.tokenizer), hidden_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=64), add_pooling_layer=False)
    choices = FinetuneSpec.from_config(cfg.finetune, task_encoder.spec)
    head = choices.head.build(task_encoder, 32)
    provenance = Provenance("f" * 16, "r" * 32, "sqlite:///x", "c" * 40, cfg)
    out = save_finetuned(tmp_path / "model", encoder, head, task_encoder, choices, cfg, provenance, {"score": 0.5})
    card = (out / "README.md").read_text()
    assert "## Inputs" in card and "- score: 0.5" in card and "r" * 32 in card
    model = load_model(out, task)
    instances = get_dataset(task).read(data_dir)["test"][:3]
    assert len(predict(model, instances)) == 3

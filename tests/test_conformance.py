"""Every registered fine-tuning option and every task type, walked through train -> save -> export -> load ->
predict at micro size, by construction: the cases are generated from the registries
(`lightning_modules.finetune_spec.CHOICES`, `datamodules.registry`), so a new option or task type is covered
the day it is registered, with no list here to extend (composer's algorithm settings, AllenNLP's
ModelTestCase).

Each case fine-tunes a micro model with the option on the first registered dataset of the first task type
it applies to, exports it with `bioablate export`, and checks that `bioablate predict` on the run's test
examples returns exactly what the run itself predicted and logged: the option was trained, recorded in the
model folder, rebuilt from that record and applied the same way. A head added by one registry entry in a
test module goes through the same path, and so does a task kind added by one entry (the last tests;
tests/test_task_kinds.py checks that every kind has all of its parts).

The pretraining registries (masking modes, objectives) are walked by
tests/datamodules/pretrain/test_masking.py (every mode makes a valid mask) and
tests/ablations/run/test_export.py::test_pretrained_folder_loads_cleanly_and_has_its_card (every objective
trains, exports and loads).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient
from safetensors.torch import load_file
from torch import nn
from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification, AutoTokenizer

from ablations.cli import main
from ablations.config import build_config
from ablations.run.cards import CardPart
from ablations.run.export import HEAD_FILE, META_FILE, ExportPart
from ablations.run.finetune import run_finetune
from ablations.run.predict import predict
from datamodules.encoders import SequenceEncoder, SequenceLabels
from datamodules.finetune_data import subsample
from datamodules.registry import DATASETS, dataset_names, get_dataset, register
from datamodules.task_encoder import scoring_group
from datamodules.task_kinds import TASK_KINDS, TaskKind, kind_name
from datamodules.task_types import TASK_TYPES
from lightning_modules.finetune_spec import CHOICES
from lightning_modules.heads import HEADS, HeadLayers, SequenceOutput, masked_mean, sequence_head

pytestmark = pytest.mark.slow  # about 10 s a case

FINETUNE = ["finetune.max_train_examples=48", "finetune.max_eval_examples=40", "finetune.epochs=2",
            "finetune.max_length=64", "trainer.progress_bar=false"]


def first_dataset(task_type: str) -> str | None:
    names = dataset_names(task_type)
    return names[0] if names else None


def cases() -> list:
    """(dataset, overrides) for every task type with its defaults, the first dataset of every task kind not
    yet among them, then every non-default option of every choice on the first task type it applies to (with
    the options it requires)."""
    found = {}
    for task_type in TASK_TYPES:
        if first_dataset(task_type):
            found[f"{task_type}-defaults"] = (first_dataset(task_type), ())
    covered = {kind_name(get_dataset(task)) for task, _ in found.values()}
    for kind in TASK_KINDS:
        task = next((name for name in dataset_names() if kind_name(get_dataset(name)) == kind), None)
        if kind not in covered and task is not None:
            found[f"{kind}-kind-defaults"] = (task, ())
    for choice in CHOICES:
        for option in choice:
            if option == choice.default:
                continue
            where = choice.task_types(option) or TASK_TYPES
            task_type = next(t for t in where if first_dataset(t))
            needs = tuple(f"finetune.{key}={value}" for key, value in choice.requires(option).items())
            found[f"{choice.key}={option}"] = (first_dataset(task_type), (f"finetune.{choice.key}={option}", *needs))
    return [pytest.param(*case, id=name) for name, case in found.items()]


def write_test_inputs(task: str, data_dir: Path, path: Path) -> None:
    """The run's test examples (the same subsample: whole groups where the metric scores groups) as JSONL
    with the task's fields."""
    spec = get_dataset(task)
    instances = subsample(spec.read(data_dir)["test"], 40, scoring_group(spec))
    with open(path, "w") as f:
        for instance in instances:
            f.write(json.dumps(dataclasses.asdict(instance)) + "\n")


def read_whole_ids(model_dir: Path, max_length: int, records: list[dict]) -> set[str]:
    """The ids of the tagging inputs that fit the model's window whole (special tokens included)."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    lengths = [len(ids) for ids in tokenizer([r["tokens"] for r in records], is_split_into_words=True)["input_ids"]]
    return {r["id"] for r, n in zip(records, lengths) if n <= max_length}


def train_export_predict(task: str, overrides, data_dir: Path, tmp_path: Path) -> dict:
    """Fine-tune, export and predict; assert the predictions are the run's own. Returns the model's record."""
    work = tmp_path / "work"
    cfg = build_config("micro", [*FINETUNE, *overrides], task=task, data_dir=str(data_dir), work_dir=str(work))
    result = run_finetune(cfg)
    out = tmp_path / "model"
    assert main(["export", result.fingerprint, "--to", str(out), "--work-dir", str(work)]) == 0
    meta = json.loads((out / META_FILE).read_text())
    assert meta["run_id"] == result.run_id and meta["task"] == task
    if meta["format"] == "transformers":  # plain transformers loads it, with nothing missing or left over
        auto = AutoModelForTokenClassification if meta["output_kind"] == "token" else AutoModelForSequenceClassification
        model, info = auto.from_pretrained(out, output_loading_info=True)
        assert not any(info.values()), info
        assert list(model.config.id2label.values()) == meta["labels"]

    inputs, predicted = tmp_path / "test.jsonl", tmp_path / "predicted.jsonl"
    write_test_inputs(task, data_dir, inputs)
    assert main(["predict", "--model", str(out), "--input", str(inputs), "--output", str(predicted)]) == 0
    client = MlflowClient(result.tracking_uri)
    logged = Path(client.download_artifacts(result.run_id, "test_predictions.jsonl", str(tmp_path)))
    expected = [json.loads(line) for line in logged.read_text().splitlines()]
    got = [json.loads(line) for line in predicted.read_text().splitlines()]
    assert [g["id"] for g in got] == [e["id"] for e in expected]
    if meta["output_kind"] == "token":  # an input longer than the run's window: the run tagged its first window
        read_whole = read_whole_ids(out, meta["max_length"], got)  # (truncated), predict tags all of it
        assert len(read_whole) >= len(got) * 3 // 4
        got, expected = ([r for r in records if r["id"] in read_whole] for records in (got, expected))
    predictions, logged_predictions = [g["prediction"] for g in got], [e["prediction"] for e in expected]
    if all(isinstance(p, float) for p in logged_predictions):  # numbers: other batch shapes sum in another order
        assert predictions == pytest.approx(logged_predictions, rel=1e-5, abs=1e-6)
    else:
        assert predictions == logged_predictions
    return meta


@pytest.mark.parametrize("task,overrides", cases())
def test_every_option_and_task_type_trains_exports_and_predicts_what_the_run_did(task, overrides, data_dir,
                                                                                 tmp_path):
    train_export_predict(task, overrides, data_dir, tmp_path)


class BiGRU(nn.Module):
    """A head layer that is not built in: a BiGRU in the shape of lightning_modules.bilstm.BiLSTM."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.gru = nn.GRU(hidden_size, hidden_size // 2, batch_first=True, bidirectional=True)
        self.out_size = 2 * (hidden_size // 2)

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.gru(hidden.float())[0] * attention_mask[..., None]


@pytest.mark.parametrize("task", ["bc5-chem", "chemprot"])
def test_a_head_added_by_one_registry_entry_is_trained_exported_loaded_and_predicts(task, data_dir, tmp_path):
    HEADS.register("bigru", HeadLayers(layer=BiGRU))  # the one edit
    try:
        meta = train_export_predict(task, ["finetune.head=bigru"], data_dir, tmp_path)
    finally:
        HEADS.unregister("bigru")
    assert meta["format"] == "bioablate"  # transformers has no class with a GRU: encoder + our head file
    assert any(key.startswith("layer.gru.") for key in load_file(str(tmp_path / "model" / HEAD_FILE)))


def test_a_tagging_scheme_added_by_one_registration_is_trained_exported_loaded_and_predicts(data_dir, tmp_path):
    """IOB1 (CoNLL-2003's scheme), registered in one call, under a CRF constrained to its transitions."""
    from datamodules.tagging import SCHEMES, TAGGED_TASK_TYPES
    from tests.datamodules.test_tagging import IOB1

    SCHEMES.register("iob1", IOB1, task_types=TAGGED_TASK_TYPES)  # the one edit
    try:
        meta = train_export_predict("bc5-chem", ["finetune.tagging=iob1", "finetune.head=crf"], data_dir, tmp_path)
    finally:
        SCHEMES.unregister("iob1")
    assert meta["tagging"] == "iob1" and meta["head"] == "crf"


# ------------------------------------------------------------------------------ a new task kind, one entry

def _any_label(instance) -> str:
    return "yes" if instance.labels else "no"


# the new kind's label handling and decision: one logit, trained with a sigmoid; "yes" where it is above 0
ANY_LABEL = SequenceLabels(width=lambda labels: 1, names=lambda spec: ["any label"], gold=_any_label,
                           target=lambda gold, ids: float(gold == "yes"),
                           decode=lambda raw, labels: "yes" if raw else "no")
ANY_LABEL_OUTPUT = SequenceOutput(loss=lambda logits, labels, weights, real: masked_mean(  # real: not filler rows
                                      nn.functional.binary_cross_entropy_with_logits(
                                          logits.squeeze(-1), labels.float(), reduction="none"),
                                      torch.ones_like(labels, dtype=torch.bool) if real is None else real),
                                  predict=lambda logits: (logits.squeeze(-1) > 0).long(), probabilities=None,
                                  adversarial_view=None)


def _any_label_records(model, examples, batch_size):
    instances = [example.instance for example in examples]
    return [{"id": x.id, "prediction": model.task_encoder.to_json(p)}
            for x, p in zip(instances, predict(model, instances, batch_size))]


def _any_label_encoder(spec, tokenizer, max_length, encoding, name):
    return SequenceEncoder(spec, tokenizer, max_length, name, ANY_LABEL, encoding.re_input)


def test_a_task_kind_added_by_one_registry_entry_is_trained_exported_loaded_and_predicts(data_dir, tmp_path):
    """A kind none of the layers knows: does a HoC abstract have any hallmark at all (one logit, a sigmoid)?
    Its entry gives every part; a dataset whose task type names it is trained, exported and predicted."""
    TASK_KINDS.register("any-label", TaskKind(  # the one edit
        encoder=_any_label_encoder, head=sequence_head(ANY_LABEL_OUTPUT),
        export=ExportPart(lambda head, model_type: None),  # transformers has no class for it
        card=CardPart("text-classification", lambda meta: "One abstract; the output is one logit: any label > 0."),
        predict=_any_label_records))
    register(replace(get_dataset("hoc"), name="hoc-any", task_type="any-label", multi_label=False,
                     metric="accuracy", metric_args={}))
    try:
        meta = train_export_predict("hoc-any", [], data_dir, tmp_path)
    finally:
        DATASETS.unregister("hoc-any")
        TASK_KINDS.unregister("any-label")
    assert meta["output_kind"] == "any-label" and meta["labels"] == ["any label"] and meta["format"] == "bioablate"
    assert "any label > 0" in (tmp_path / "model" / "README.md").read_text()
    predicted = [json.loads(line)["prediction"] for line in (tmp_path / "predicted.jsonl").read_text().splitlines()]
    assert set(predicted) <= {"yes", "no"}

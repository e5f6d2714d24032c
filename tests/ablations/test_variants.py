"""Every cell of the paper's Tables 12-14 builds the model it names (the head's layers, the tags, the
relation input and feature), from real data; CRF training lowers the loss; invalid choices are one-line
errors listing the valid ones."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from ablations.cli import main
from ablations.config import build_config
from ablations.run.finetune import run_finetune
from datamodules.encoders import IGNORE_INDEX
from datamodules.registry import get_dataset
from datamodules.relation_inputs import RE_INPUTS
from datamodules.task_kinds import make_encoder
from lightning_modules.finetune_spec import FinetuneSpec
from lightning_modules.heads import ConstrainedCRF
from lightning_modules.models import load_encoder

FAST = ["finetune.max_train_examples=48", "finetune.max_eval_examples=40", "finetune.epochs=2",
        "finetune.max_length=64", "trainer.progress_bar=false"]

TABLE_14_ROWS = [("dummify", "cls"), ("dummify", "mention"), ("original", "cls"), ("original", "mention"),
                 ("markers", "cls"), ("markers", "mention"), ("markers", "entity-start")]


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("variants")


def finetune(data_dir, work_dir, task, *overrides):
    cfg = build_config("micro", [*FAST, *overrides], task=task, data_dir=str(data_dir), work_dir=str(work_dir))
    result = run_finetune(cfg)
    run = MlflowClient(result.tracking_uri).get_run(result.run_id)
    assert run.info.status == "FINISHED" and "test/score" in run.data.metrics
    return result, run


# ------------------------------------------------------------------------------------------------------
# Every cell of Tables 12-14 as the model it builds: each choice, given as a config override, must reach
# the encoder and the head (an ignored choice builds the default model and fails here). No training: the
# micro random BERT's hidden states for a few real dev examples.

def build(data_dir, task, *overrides, examples=8, max_length=128):
    """(task encoder, head, dev instances, their features, a padded batch, the encoder's hidden states)."""
    torch.manual_seed(0)
    cfg = build_config("micro", list(overrides), task=task)
    spec = get_dataset(task)
    choices = FinetuneSpec.from_config(cfg.finetune, spec)
    encoder, tokenizer = load_encoder(cfg.model, data_dir, 0.0)
    task_encoder = make_encoder(spec, tokenizer, max_length, choices.encoding)
    instances = spec.read(data_dir)["dev"][:examples]
    features = task_encoder.encode(instances)
    encoder.resize_token_embeddings(len(tokenizer))  # entity markers, where added
    head = choices.head.build(task_encoder, encoder.config.hidden_size).eval()
    batch = pad(features, tokenizer.pad_token_id)
    with torch.no_grad():
        hidden = encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         token_type_ids=batch["token_type_ids"]).last_hidden_state
    return task_encoder, head, instances, features, batch, hidden


def pad(features, pad_token_id) -> dict[str, torch.Tensor]:
    width = max(len(f["input_ids"]) for f in features)
    batch = {}
    for key, value in features[0].items():
        if key.startswith("_"):
            continue
        if isinstance(value, list):  # one value per token
            fill = pad_token_id if key == "input_ids" else IGNORE_INDEX if key == "labels" else 0
            batch[key] = torch.tensor([f[key] + [fill] * (width - len(f[key])) for f in features])
        else:
            batch[key] = torch.tensor([f[key] for f in features])
    return batch


def layer_types(module: torch.nn.Module) -> tuple[str, ...]:
    return tuple(type(m).__name__ for m in module.modules())


def test_table12_each_token_head_builds_its_layers(data_dir):
    built = {head: build(data_dir, "bc5-chem", f"finetune.head={head}", examples=2)[1]
             for head in ("linear", "bilstm", "crf", "bilstm-crf")}
    for head, tagger in built.items():
        assert isinstance(tagger.layer.lstm if tagger.layer else None,
                          torch.nn.LSTM if "bilstm" in head else type(None))
        assert isinstance(tagger.crf, ConstrainedCRF if head.endswith("crf") else type(None)), head
    assert len({layer_types(tagger) for tagger in built.values()}) == 4  # four different models


@pytest.mark.parametrize("head", ["linear", "bilstm", "crf", "bilstm-crf"])
@pytest.mark.parametrize("scheme", ["bio", "bioul"])
def test_table12_token_heads_decode_to_valid_spans(data_dir, head, scheme):
    task_encoder, tagger, instances, features, batch, hidden = build(
        data_dir, "bc5-chem", f"finetune.head={head}", f"finetune.tagging={scheme}")
    values, counts = task_encoder.gather(batch, tagger.predict(tagger(hidden, batch), batch))
    raws = task_encoder.unpack(values, counts)
    for instance, feature, raw in zip(instances, features, raws):
        tags = [task_encoder.tags[t] for t in raw]
        assert len(tags) == len(feature["_unit_words"])  # one tag per tagged position
        if tagger.crf is not None:  # constrained Viterbi: a path the scheme needs no repair for
            assert task_encoder.scheme.encode(task_encoder.scheme.decode(tags), len(tags)) == tags, tags
        spans = task_encoder.decode(feature, raw)
        assert all(0 <= s.start < s.end <= len(instance.tokens) and s.label == "Chemical" for s in spans)
        assert all(a.end <= b.start for a, b in zip(spans, spans[1:]))


@pytest.mark.parametrize("scheme,tag_count", [("bio", 3), ("bioul", 5), ("io", 2)])
@pytest.mark.parametrize("subtokens", ["first", "all"])
def test_table13_tagging_scheme_and_subtoken_labels_shape_the_labels(data_dir, scheme, tag_count, subtokens):
    task_encoder, tagger, instances, features, batch, _ = build(
        data_dir, "bc5-chem", f"finetune.tagging={scheme}", f"finetune.subtoken_labels={subtokens}", examples=20)
    assert task_encoder.tags == task_encoder.scheme.tags(["Chemical"]) and len(task_encoder.tags) == tag_count
    assert tagger.out.out_features == tag_count
    for instance, feature in zip(instances, features):
        tagged = [label for label, on in zip(feature["labels"], feature["tag_mask"]) if on]
        words = len(feature["input_ids"]) - 2 if subtokens == "all" else len(instance.tokens)
        assert len(tagged) == words  # every sub-token (all) or each word's first (first)
        # gold tags decode back to the gold spans (IO merges touching mentions of one type)
        expected = task_encoder.scheme.decode(task_encoder.scheme.encode(instance.spans, len(instance.tokens)))
        assert task_encoder.decode(feature, tagged) == expected


@pytest.mark.parametrize("re_input,feature", TABLE_14_ROWS)
def test_table14_relation_input_and_feature_build_what_they_name(data_dir, re_input, feature):
    task_encoder, head, instances, features, batch, hidden = build(
        data_dir, "chemprot", f"finetune.re_input={re_input}", f"finetune.re_feature={feature}")
    tokenizer = task_encoder.tokenizer
    for instance, encoded in zip(instances, features):  # the encoder sees the chosen transform's text
        text = RE_INPUTS.get(re_input)(instance).text
        assert encoded["input_ids"] == tokenizer(text, truncation=True, max_length=128)["input_ids"]
    markers = tokenizer.convert_tokens_to_ids(["[E1]", "[E2]"])
    has_markers = [(batch["input_ids"] == m).any(1).all().item() for m in markers]
    assert has_markers == [re_input == "markers"] * 2

    width = hidden.shape[-1]
    vectors = head.featurize(hidden, batch)
    assert head.out.in_features == vectors.shape[1] == width * (1 if feature == "cls" else 2)
    for row in range(len(instances)):
        if feature == "cls":
            expected = hidden[row, 0]
        elif feature == "mention":  # each entity's tokens, max-pooled
            parts = [hidden[row, batch[k][row].bool()].amax(0) for k in ("head_mask", "tail_mask")]
            expected = torch.cat(parts)
        else:  # the [E1] and [E2] marker tokens
            positions = [int((batch["input_ids"][row] == m).nonzero()[0]) for m in markers]
            expected = torch.cat([hidden[row, p] for p in positions])
        assert torch.equal(vectors[row], expected), (feature, row)


@pytest.mark.parametrize("head", ["linear", "bilstm"])
@pytest.mark.parametrize("classifier", ["linear", "mlp"])
def test_sequence_head_and_classifier_build_their_layers(data_dir, head, classifier):
    task_encoder, model_head, instances, _, batch, hidden = build(
        data_dir, "hoc", f"finetune.head={head}", f"finetune.classifier={classifier}", examples=4)
    assert isinstance(model_head.layer.lstm if model_head.layer else None,
                      torch.nn.LSTM if head == "bilstm" else type(None))
    if classifier == "mlp":  # a hidden layer before the output
        assert [type(m).__name__ for m in model_head.out] == ["Linear", "GELU", "Dropout", "Linear"]
    else:
        assert isinstance(model_head.out, torch.nn.Linear)
    predictions = model_head.predict(model_head(hidden, batch), batch)
    assert predictions.shape == (len(instances), len(task_encoder.labels))  # multi-label: one bit per label


@pytest.mark.slow
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
    ("chemprot", "finetune.re_feature=entity-start",
     ["finetune.re_feature=entity-start needs finetune.re_input=markers"]),
    ("chemprot", "finetune.head=crf", ["unknown finetune.head 'crf' for chemprot", "valid: linear, bilstm"]),
    ("bc5-chem", "finetune.head=crff",
     ["unknown finetune.head 'crff'", "linear, bilstm, crf, bilstm-crf (did you mean 'crf'?)"]),
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

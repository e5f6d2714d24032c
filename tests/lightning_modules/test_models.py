"""Named models come from one registry; `bioablate list models` and the error for an unknown model show
the same names."""

from __future__ import annotations

import pytest

from core.errors import ConfigError
from lightning_modules.models import NAMED_MODELS, RANDOM_BERT, known_models, resolve_model_dir


def test_known_models_are_random_bert_and_the_named_ones():
    assert known_models() == [RANDOM_BERT, *NAMED_MODELS] == ["random-bert", "general-minilm"]


def test_a_named_model_resolves_to_its_directory():
    assert (resolve_model_dir("general-minilm") / "config.json").is_file()


def test_an_unknown_model_lists_the_known_names(tmp_path):
    with pytest.raises(ConfigError, match="neither a directory with a config.json nor a named model; "
                                          "known names: random-bert, general-minilm"):
        resolve_model_dir(str(tmp_path / "no-such-model"))


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

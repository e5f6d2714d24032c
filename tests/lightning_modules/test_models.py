"""Named models come from one registry; `bioablate list models` and the error for an unknown model show
the same names."""

from __future__ import annotations

import pytest

from core.errors import ConfigError
from omegaconf import OmegaConf

from lightning_modules.models import (NAMED_MODELS, RANDOM_BERT, known_models, model_fingerprint,
                                      resolve_model_dir)


def test_known_models_are_random_bert_and_the_named_ones():
    assert known_models() == [RANDOM_BERT, *NAMED_MODELS] == ["random-bert", "general-minilm"]


def test_a_named_model_resolves_to_its_directory():
    assert (resolve_model_dir("general-minilm") / "config.json").is_file()


def test_an_unknown_model_lists_the_known_names(tmp_path):
    with pytest.raises(ConfigError, match="neither a directory with a config.json nor a named model; "
                                          "known names: random-bert, general-minilm"):
        resolve_model_dir(str(tmp_path / "no-such-model"))


def test_a_model_folder_counts_by_its_files_not_its_card(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    cfg = OmegaConf.create({"name_or_path": str(tmp_path)})
    before = model_fingerprint(cfg, None)
    (tmp_path / "README.md").write_text("---\nlicense: mit\n---\nMLflow run id: 123\n")
    assert model_fingerprint(cfg, None) == before
    (tmp_path / "model.safetensors").write_bytes(b"other weights")
    assert model_fingerprint(cfg, None) != before

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

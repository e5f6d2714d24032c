"""Staged vocabularies by name, or a path; a wrong name lists the staged ones."""

from __future__ import annotations

import pytest

from bioablate_core.errors import ConfigError
from datamodules.vocabs import resolve_vocab, staged_vocabs


def test_a_staged_name_a_folder_and_a_file_resolve_to_one_vocab_txt(data_dir):
    expected = data_dir / "vocab" / "bert-base-uncased" / "vocab.txt"
    assert resolve_vocab("bert-base-uncased", data_dir) == expected
    assert resolve_vocab(str(expected.parent), None) == expected
    assert resolve_vocab(str(expected), None) == expected
    assert {"bert-base-uncased", "pubmedbert-uncased"} <= set(staged_vocabs(data_dir))


def test_an_unknown_name_lists_the_staged_vocabularies(data_dir):
    with pytest.raises(ConfigError) as error:
        resolve_vocab("pubmed-bert", data_dir)
    message = str(error.value)
    assert message.startswith("model.vocab 'pubmed-bert' is neither a staged vocabulary (")
    assert all(name in message for name in staged_vocabs(data_dir))
    with pytest.raises(ConfigError, match="none found"):
        resolve_vocab("pubmed-bert", None)

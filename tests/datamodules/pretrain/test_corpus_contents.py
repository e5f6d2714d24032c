"""The corpus code's version (datamodules/pretrain/corpora.py `CORPUS_CODE_VERSION`): what a built-in corpus
yields on the staged data changes only with a bump, and a bump changes the fingerprint.

After a deliberate bump, `python -m tests.datamodules.pretrain.test_corpus_contents` prints the new pins for
`PINNED` (say in the commit why the documents changed)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from datamodules.pretrain import corpora
from datamodules.pretrain.corpora import corpus_fingerprint, corpus_names, load_corpus

# corpus -> (CORPUS_CODE_VERSION, digest of its documents and their sentences on the staged data)
PINNED = {
    "general": (1, "db5db62436b3ac8a"),
    "pmc": (1, "22a25d089c2999f8"),
    "pubmed": (1, "1d17f4122d0c4529"),
}


def documents_digest(name: str, data_dir: Path) -> str:
    """16 hex digits of SHA-256 over every (stage, document id, sentences) the corpus yields, in order: what
    the shards are built from."""
    digest = hashlib.sha256()
    for item in load_corpus(name, data_dir).documents(split=True):
        digest.update(repr(item).encode())
    return digest.hexdigest()[:16]


@pytest.mark.parametrize("name", sorted(PINNED))
def test_documents_change_only_with_a_version_bump(name: str, data_dir: Path):
    version, pinned = PINNED[name]
    if version == corpora.CORPUS_CODE_VERSION:
        assert documents_digest(name, data_dir) == pinned, (
            f"corpus '{name}' yields other documents or sentences than it did under CORPUS_CODE_VERSION "
            f"{version}: its stored pretraining runs would be reused for different text. Bump "
            "CORPUS_CODE_VERSION in datamodules/pretrain/corpora.py and run "
            "`python -m tests.datamodules.pretrain.test_corpus_contents` for the new pins")
    else:
        pytest.fail(f"the pins are for version {version}, the code is at {corpora.CORPUS_CODE_VERSION}: run "
                    "`python -m tests.datamodules.pretrain.test_corpus_contents`")


def test_every_builtin_corpus_is_pinned():
    assert sorted(PINNED) == corpus_names()


def test_a_version_bump_changes_the_fingerprint(data_dir: Path, monkeypatch):
    before = corpus_fingerprint("pubmed", data_dir)
    monkeypatch.setattr(corpora, "CORPUS_CODE_VERSION", corpora.CORPUS_CODE_VERSION + 1)
    bumped = corpus_fingerprint("pubmed", data_dir)
    assert bumped != before


def test_the_corpus_code_enters_by_its_version_not_its_bytes(data_dir: Path, tmp_path: Path, monkeypatch):
    """The byte rule read the modules' files through `__file__`: a copy of corpora.py with a comment added,
    standing in for it, leaves the fingerprint as it was."""
    before = corpus_fingerprint("pmc", data_dir)
    edited = tmp_path / "corpora.py"
    edited.write_text("# tidied\n" + Path(corpora.__file__).read_text())
    monkeypatch.setattr(corpora, "__file__", str(edited))
    assert corpus_fingerprint("pmc", data_dir) == before


if __name__ == "__main__":
    from tests.conftest import _data_dir

    for corpus in corpus_names():
        print(f'    "{corpus}": ({corpora.CORPUS_CODE_VERSION}, "{documents_digest(corpus, _data_dir())}"),')

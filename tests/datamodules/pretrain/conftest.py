"""A corpus laid out as the real MEDLINE baseline, made from the staged MEDLINE file."""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Callable

import pytest

from datamodules.pretrain.corpora import load_corpus

MEDLINE = "pretrain/pubmed-abstracts/medline16n0902.xml.gz"
BASELINE_YAML = """\
name: my-pubmed
description: the PubMed baseline
parts:
  - files: [baseline/pubmed26n*.xml.gz]
    format: medline-xml
filters:
  min_words: 50
"""


def write_baseline(data_dir: Path, folder: Path, files: int = 3) -> list[Path]:
    """The staged MEDLINE file cut into `files` files laid out as the real baseline:
    pubmed26nNNNN.xml.gz, each a PubmedArticleSet of PubmedArticle/MedlineCitation records."""
    text = gzip.open(data_dir / MEDLINE, "rt", encoding="utf-8").read()
    citations = re.findall(r"<MedlineCitation .*?</MedlineCitation>", text, flags=re.S)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(files):
        body = "".join(f"<PubmedArticle>{c}</PubmedArticle>\n" for c in citations[i::files])
        path = folder / f"pubmed26n{i + 1:04d}.xml.gz"
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<PubmedArticleSet>\n{body}</PubmedArticleSet>\n')
        paths.append(path)
    return paths


def write_yaml(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def baseline_yaml(data_dir: Path, tmp_path: Path) -> Callable[[int], Path]:
    """files -> the YAML of a baseline-layout corpus of that many files (globs relative to the YAML)."""
    def make(files: int = 3) -> Path:
        write_baseline(data_dir, tmp_path / "baseline", files)
        return write_yaml(tmp_path / "my-pubmed.yaml", BASELINE_YAML)
    return make


@pytest.fixture(scope="module")
def small_pubmed(data_dir):
    return load_corpus("pubmed", data_dir, max_words=20000, min_words=128, seed=1)

"""Streaming shard builds: byte-identical for 1 and 2 workers, and a build SIGKILLed half-way resumes
from its recorded batches to the same bytes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bioablate_core.errors import DataFormatError
from datamodules.pretrain import corpora
from datamodules.pretrain.corpora import load_corpus
from datamodules.pretrain.shards import (
    ARRAYS,
    POOL_MIN_WORDS,
    BatchPlan,
    build_shards,
    default_workers,
    expected_words,
    load_shards,
)
from datamodules.pretrain.vocab import read_vocab, resolve_vocab_file, train_wordpiece
from tests.datamodules.pretrain.test_formats import pmc_package

REPO_ROOT = Path(__file__).resolve().parents[3]
SETTINGS = dict(lowercase=True, seq_len=64, seed=0)


def vocab(data_dir: Path) -> Path:
    return data_dir / "vocab" / "bert-base-uncased" / "vocab.txt"


def corpus(data_dir: Path):
    return load_corpus("pubmed+pmc", data_dir, max_words=60000, min_words=128, seed=1)


def same_files(a: Path, b: Path) -> None:
    for name in [*(f"{n}.npy" for n in ARRAYS), "meta.json"]:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.mark.slow  # spawns a pool of two workers per build
@pytest.mark.parametrize("pairs", ["nsp", "none"])
def test_one_and_two_workers_give_identical_shards(data_dir: Path, tmp_path: Path, pairs: str, baseline_yaml):
    one = build_shards(corpus(data_dir), vocab(data_dir), pairs=pairs, out_dir=tmp_path / "one", workers=1,
                       docs_per_batch=32, **SETTINGS)
    two = build_shards(corpus(data_dir), vocab(data_dir), pairs=pairs, out_dir=tmp_path / "two", workers=2,
                       docs_per_batch=32, **SETTINGS)
    same_files(one.path, two.path)
    assert isinstance(two.input_ids, np.memmap) and two.input_ids.shape == (len(two), 64)
    assert two.meta["stage_sizes"] == [len(two)] and two.meta["tokens"] == int(two.lengths.sum())
    assert not (tmp_path / "two.tmp").exists()
    xml = load_corpus(str(baseline_yaml(4)), data_dir)  # all XML: parsed by the pool's workers
    one = build_shards(xml, vocab(data_dir), pairs=pairs, out_dir=tmp_path / "xml1", workers=1, docs_per_batch=32,
                       **SETTINGS)
    same_files(one.path, build_shards(xml, vocab(data_dir), pairs=pairs, out_dir=tmp_path / "xml2", workers=2,
                                      docs_per_batch=32, **SETTINGS).path)
    if pairs == "nsp":
        assert set(np.unique(two.pair_labels)) == {0, 1}
        types = np.asarray(two.token_type_ids)
        assert (types[np.arange(len(two)), two.lengths - 1] == 1).all()  # B's [SEP] is type 1


@pytest.mark.slow  # a build in a subprocess, killed, then resumed
def test_a_killed_build_resumes_from_its_recorded_batches(data_dir: Path, tmp_path: Path):
    reference = build_shards(corpus(data_dir), vocab(data_dir), pairs="nsp", out_dir=tmp_path / "reference",
                             workers=2, docs_per_batch=8, **SETTINGS)
    out = tmp_path / "killed"
    script = (f"import sys; sys.path.insert(0, {str(REPO_ROOT)!r})\n"
              "from pathlib import Path\n"
              "from datamodules.pretrain.corpora import load_corpus\n"
              "from datamodules.pretrain.shards import build_shards\n"
              f"c = load_corpus('pubmed+pmc', Path({str(data_dir)!r}), max_words=60000, min_words=128, seed=1)\n"
              f"build_shards(c, Path({str(vocab(data_dir))!r}), True, 64, 'nsp', 0, Path({str(out)!r}), workers=1,"
              " docs_per_batch=8, progress=lambda state: __import__('time').sleep(0.05))\n")
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "BIOABLATE_SHARD_WORKERS": ""})
    index = out.with_name("killed.tmp") / "index.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and (not index.is_file() or len(index.read_text().splitlines()) < 5):
        assert proc.poll() is None, "the build ended before it could be killed"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "meta.json").exists()
    recorded = json.loads(index.read_text().splitlines()[-1])["batches"]
    total = len(reference) and json.loads((reference.path / "meta.json").read_text())["sequences"]
    assert 5 <= recorded and recorded * 8 < reference.meta["documents"]  # killed half-way

    seen = []
    resumed = build_shards(corpus(data_dir), vocab(data_dir), pairs="nsp", out_dir=out, workers=2,
                           docs_per_batch=8, progress=seen.append, **SETTINGS)
    assert seen[0]["batches"] == recorded + 1  # only the batches after the recorded ones were packed
    assert resumed.meta["sequences"] == total
    same_files(resumed.path, reference.path)
    assert load_shards(out).meta == reference.meta


def test_a_malformed_file_read_by_a_worker_is_the_same_one_line_error(data_dir: Path, tmp_path: Path):
    medline = (data_dir / "pretrain/pubmed-abstracts/medline16n0902.xml.gz").read_bytes()
    (tmp_path / "a.xml.gz").write_bytes(medline)
    (tmp_path / "b.xml").write_text("<MedlineCitationSet>\n<MedlineCitation>\n</Medline>\n")
    (tmp_path / "c.yaml").write_text("name: c\nparts:\n  - {files: ['*.xml*'], format: medline-xml}\n")
    for workers in (1, 2):  # XML is parsed in the pool: the error comes back from a worker
        with pytest.raises(DataFormatError, match=rf"^{tmp_path / 'b.xml'}:3: not valid MEDLINE XML"):
            build_shards(load_corpus(str(tmp_path / "c.yaml"), data_dir), vocab(data_dir), pairs="none",
                         out_dir=tmp_path / f"s{workers}", workers=workers, **SETTINGS)


def test_trained_vocabulary_and_tokenized_shards(tmp_path: Path, small_pubmed, data_dir: Path):
    sentences = [s for doc in small_pubmed.stages[0] for s in doc]
    vocab_path = train_wordpiece(sentences, 800, True, tmp_path / "vocab")
    vocab = read_vocab(vocab_path)
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and 700 <= len(vocab) <= 800

    bert = resolve_vocab_file("bert-base-uncased", data_dir)
    shards = build_shards(small_pubmed, bert, True, 64, "nsp", 0, tmp_path / "shards")
    assert shards.input_ids.shape == (len(shards), 64) and isinstance(shards.input_ids, np.memmap)
    tokens = read_vocab(bert)
    ids = np.asarray(shards.input_ids[0, :shards.lengths[0]])
    assert tokens[ids[0]] == "[CLS]" and tokens[ids[-1]] == "[SEP]" and (ids == 102).sum() == 2
    continuation = np.array([t.startswith("##") for t in tokens])
    assert (shards.word_start.astype(bool) == ~continuation[np.asarray(shards.input_ids)]).all()
    assert set(np.unique(shards.pair_labels)) == {0, 1}  # NSP: continuations and random segments
    assert shards.meta["tokens"] == int(shards.lengths.sum()) and shards.lengths.max() <= 64
    again = build_shards(small_pubmed, bert, True, 64, "nsp", 0, tmp_path / "shards")  # cached
    assert again.path == shards.path and (tmp_path / "shards" / "meta.json").stat().st_mtime == \
        (shards.path / "meta.json").stat().st_mtime


def test_batch_plan_is_deterministic_and_follows_stages():
    plan = BatchPlan([10, 30], batch_size=4, total_micro_batches=20, seed=3)
    first = [plan.indices(m) for m in range(20)]
    assert all((a == b).all() for a, b in zip(first, [BatchPlan([10, 30], 4, 20, 3).indices(m) for m in range(20)]))
    flat = np.concatenate(first)
    assert (flat[:20] < 10).all() and (flat[20:] >= 10).all()  # stage 1 first, then stage 2
    assert sorted(flat[:10]) == list(range(10))  # one permutation per pass


def test_a_small_corpus_is_built_without_a_pool_and_the_environment_decides_first(data_dir: Path, monkeypatch):
    monkeypatch.delenv("BIOABLATE_SHARD_WORKERS", raising=False)
    small = load_corpus("pubmed", data_dir, max_words=20000)
    assert expected_words(small) == 20000 and default_workers(small) == 1
    whole = load_corpus("general", data_dir)  # the staged Wikipedia + books text: millions of words
    assert expected_words(whole) > POOL_MIN_WORDS and default_workers(whole) == len(os.sched_getaffinity(0))
    monkeypatch.setenv("BIOABLATE_SHARD_WORKERS", "3")
    assert default_workers(small) == 3


@pytest.mark.slow  # spawns a pool of two workers
def test_a_pmc_oa_archive_builds_the_shards_of_its_loose_articles_with_any_number_of_workers(
        data_dir: Path, tmp_path: Path, monkeypatch):
    archive, files = pmc_package(data_dir, tmp_path / "oa", articles=24)
    loose = tmp_path / "loose"
    loose.mkdir()
    for f in files:
        (loose / f.name).symlink_to(f)
    corpus_yaml = "name: pmc-oa\nparts:\n  - {{files: ['{}'], format: jats-xml}}\n"
    from_archive = tmp_path / "archive.yaml"
    from_archive.write_text(corpus_yaml.format(archive))
    from_files = tmp_path / "files.yaml"
    from_files.write_text(corpus_yaml.format(loose / "*.xml"))
    # batches of about two articles: the pool gets many member batches of one archive, in flight at once
    monkeypatch.setattr(corpora, "ARCHIVE_BATCH_BYTES", 2 * max(f.stat().st_size for f in files))
    builds = {name: build_shards(load_corpus(str(yaml), data_dir), vocab(data_dir), pairs="nsp",
                                 out_dir=tmp_path / name, workers=workers, docs_per_batch=4, **SETTINGS)
              for name, yaml, workers in [("files", from_files, 1), ("archive1", from_archive, 1),
                                          ("archive2", from_archive, 2)]}
    assert builds["files"].meta["documents"] == 24
    same_files(builds["archive1"].path, builds["archive2"].path)
    for name in ARRAYS:  # the same documents in the same order: the same sequences (meta names the YAML)
        assert (tmp_path / "files" / f"{name}.npy").read_bytes() == (tmp_path / "archive1" / f"{name}.npy").read_bytes()


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    else:  # the same size, other bytes: only the checksum can tell
        time.sleep(0.01)  # a new modification time, as any later write has
        path.write_bytes(bytes(255 - b for b in data))


@pytest.mark.parametrize("how", ["truncate", "overwrite"])
def test_a_damaged_shard_file_is_rebuilt_not_read(data_dir: Path, tmp_path: Path, how: str, caplog):
    """A shard file truncated (numpy's mmap refused it at every rerun: a crash loop) or rewritten in place
    at the same size is found by the manifest written last into meta.json, and the set is built again."""
    small = load_corpus("pubmed", data_dir, max_words=4000, min_words=128, seed=1)
    out = tmp_path / "shards"
    first = build_shards(small, vocab(data_dir), True, 64, "none", 0, out, workers=1)
    good = {name: (out / f"{name}.npy").read_bytes() for name in ARRAYS}
    assert set(json.loads((out / "manifest.json").read_text())) == {f"{name}.npy" for name in ARRAYS}
    del first
    _damage(out / "input_ids.npy", how)
    with caplog.at_level("WARNING", logger="bioablate"):
        again = build_shards(small, vocab(data_dir), True, 64, "none", 0, out, workers=1)
    assert f"the shard cache {out} is damaged (input_ids.npy " in caplog.text
    assert {name: (out / f"{name}.npy").read_bytes() for name in ARRAYS} == good
    assert np.asarray(again.input_ids).shape == (len(again), 64)  # readable again (mmap of the rebuilt file)


def test_an_untouched_shard_set_is_reused_without_rehashing(data_dir: Path, tmp_path: Path, monkeypatch):
    small = load_corpus("pubmed", data_dir, max_words=4000, min_words=128, seed=1)
    out = tmp_path / "shards"
    build_shards(small, vocab(data_dir), True, 64, "none", 0, out, workers=1)
    from bioablate_core import manifests

    def no_hashing(path):
        raise AssertionError(f"{path} was hashed although its modification time is the manifest's")

    monkeypatch.setattr(manifests, "file_sha256", no_hashing)
    assert len(build_shards(small, vocab(data_dir), True, 64, "none", 0, out, workers=1)) > 0


# ---- packing (pretrain.packing): the same text run on through full rows

def sequences_of(shards) -> list[tuple[int, ...]]:
    """Every sequence of the shards, as token tuples: a packed row split at its segment numbers."""
    out = []
    for r in range(len(shards)):
        ids = np.asarray(shards.input_ids[r])
        if shards.segments is None:
            out.append(tuple(ids[:shards.lengths[r]]))
            continue
        segments = np.asarray(shards.segments[r])
        out += [tuple(ids[segments == n]) for n in range(1, segments.max() + 1)]
    return out


def test_packed_shards_hold_the_same_text_in_full_rows(small_pubmed, data_dir: Path, tmp_path: Path):
    bert = resolve_vocab_file("bert-base-uncased", data_dir)
    one = build_shards(small_pubmed, bert, True, 128, "none", 0, tmp_path / "one")
    packed = build_shards(small_pubmed, bert, True, 128, "none", 0, tmp_path / "packed", packing=True)
    assert one.segments is None and packed.segments is not None and packed.meta["packed"] is True
    cls, sep, pad = 101, 102, 0
    text = lambda shards: [t for s in sequences_of(shards) for t in s if t not in (cls, sep)]  # noqa: E731
    assert text(packed) == text(one)  # the same tokens in the same order: nothing cut away, lost or repeated
    word_start = np.asarray(packed.word_start)
    for r in range(len(packed)):
        ids, segments, n = np.asarray(packed.input_ids[r]), np.asarray(packed.segments[r]), packed.lengths[r]
        # sequences laid end to end from the row's start, numbered 1, 2, ..., each [CLS] ... [SEP]; then padding
        assert (segments[:n] > 0).all() and (segments[n:] == 0).all() and (ids[n:] == pad).all()
        assert (np.diff(segments[:n]) >= 0).all() and set(np.unique(segments[:n])) == set(range(1, segments.max() + 1))
        starts = np.flatnonzero(np.diff(segments[:n], prepend=0))
        assert (ids[starts] == cls).all() and (ids[np.append(starts[1:], n) - 1] == sep).all()
        assert word_start[r, starts + 1].all()  # a piece opens on a word: words stay whole
    assert (packed.token_type_ids == 0).all() and (packed.pair_labels == 0).all()
    fill_one = one.meta["tokens"] / (len(one) * 128)
    fill_packed = packed.meta["tokens"] / (len(packed) * 128)
    assert fill_packed > 0.95 > fill_one
    assert (np.asarray(packed.segments).max(axis=1) >= 2).any()


def test_run_on_rows_fill_rows_and_keep_words_whole():
    from datamodules.pretrain.shards import MIN_PIECE, run_on_rows

    word_start = np.ones(100, dtype=bool)
    word_start[50:] = False  # tokens 50..99 continue a word
    docs = [list(range(1, 13)), [20, 21, 60, 61, 22, 23, 24], [30] * 40]
    rows = run_on_rows(docs, 10, word_start)
    assert [t for row in rows for piece in row for t in piece] == [t for doc in docs for t in doc]
    assert all(sum(len(p) + 2 for p in row) <= 10 for row in rows)
    assert rows[0] == [list(range(1, 9))] and rows[1][0] == [9, 10, 11, 12]  # a document runs on
    assert rows[2] == [[20, 21, 60, 61, 22, 23, 24]]  # its second word did not fit row 1's room: a new row
    for row in rows:
        for piece in row:
            assert word_start[piece[0]]  # no piece opens inside a word
    # a row with less room than MIN_PIECE tokens is closed unless the document's rest fits
    long_rows = run_on_rows([[1] * 20, [2] * 100], 64, np.ones(3, dtype=bool))
    assert [len(p) for p in long_rows[0]] == [20, 40] and MIN_PIECE <= 40


def test_packing_refuses_a_sentence_pair_task(small_pubmed, data_dir: Path, tmp_path: Path):
    from bioablate_core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^packing sequences into rows needs pairs 'none' \(got 'nsp'\)"):
        build_shards(small_pubmed, vocab(data_dir), True, 64, "nsp", 0, tmp_path / "s", packing=True)

"""Corpora defined in YAML: validation errors as one line, globs, formats, mixtures, de-duplication in
bounded memory, and a MEDLINE-baseline-shaped corpus (several pubmedNNnNNNN.xml.gz) that pretrains."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from yaml import safe_dump

from bioablate_core.errors import ConfigError, DataFormatError, MissingDataError, UnknownNameError
from datamodules.pretrain.corpora import (
    SeenHashes,
    corpus_fingerprint,
    corpus_names,
    evaluation_pmids,
    load_corpus,
    parse_corpus,
    read_corpus_yaml,
    resolve_corpus,
    split_sentences,
)
from datamodules.pretrain.corpus_specs import CorpusSchema, PartSchema
from datamodules.pretrain.formats import read_documents
from tests import shapes
from tests.cli import bioablate_in_process

MEDLINE = "pretrain/pubmed-abstracts/medline16n0902.xml.gz"


def write_yaml(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_builtin_corpora_are_yaml_files_listed_by_name(data_dir: Path):
    assert corpus_names() == ["general", "pmc", "pubmed"]
    spec = resolve_corpus("pubmed")
    assert spec.path.name == "pubmed.yaml" and spec.path.parent.name == "corpora"
    assert [p.format for p in spec.parts] == ["lines", "medline-xml", "csv", "kd-dti-json", "csv"]
    with pytest.raises(MissingDataError, match=r"corpus pubmed: pretrain/pubmed-abstracts/PubMedAbstract_1MB.txt"):
        load_corpus("pubmed", data_dir / "nowhere")


def test_a_baseline_layout_yaml_reads_every_file_and_filters(data_dir: Path, tmp_path: Path, baseline_yaml):
    yaml = baseline_yaml(3)  # globs relative to the YAML
    corpus = load_corpus(str(yaml), data_dir)
    assert [p.name for p, _ in corpus.files[0][0]] == ["pubmed26n0001.xml.gz", "pubmed26n0002.xml.gz",
                                                        "pubmed26n0003.xml.gz"]
    single = load_corpus("pubmed", data_dir)  # the same citations, read from the staged file
    staged = [d for d in read_documents(data_dir / MEDLINE, "medline-xml")]
    ours = [sentences for _, name, sentences in corpus.documents()]
    long_enough = [d for d in staged if len(d.text.split()) >= 50]
    assert corpus.stats.documents == len(ours) == len(long_enough) == 526 - corpus.stats.dropped_short
    assert corpus.stats.by_part == {"my-pubmed": len(ours)} and single.stats.documents > len(ours)
    # the same YAML anywhere else: its glob is found under the data dir
    (data_dir_copy := tmp_path / "data").mkdir()
    (data_dir_copy / "baseline").symlink_to(tmp_path / "baseline")
    moved = write_yaml(tmp_path / "elsewhere" / "c.yaml", yaml.read_text())
    assert load_corpus(str(moved), data_dir_copy).stats.documents == len(ours)
    # mixtures and sequences take YAML paths beside names
    assert parse_corpus(f"general>{yaml}+pmc") == [["general"], [str(yaml), "pmc"]]
    mix = load_corpus(f"{yaml}+pmc", data_dir, max_words=40000)
    assert set(mix.stats.by_part) == {"my-pubmed", "pmc"}
    assert corpus_fingerprint(str(yaml), data_dir) != corpus_fingerprint("pubmed", data_dir)


@pytest.mark.parametrize("text, error", [
    ("name: x\nparts: [\n", r"x\.yaml: not valid YAML"),
    ("name: x\nparts:\n  - files: [a.txt]\n    formt: lines\n", r"x\.yaml: parts\[0\]: unknown key 'formt' "
                                                                  r"\(did you mean 'format'\?\)"),
    ("name: x\nparts:\n  - files: [a.txt]\n", r"x\.yaml: parts\[0\]: missing key 'format'"),
    ("parts:\n  - {files: [a.txt], format: lines}\n", r"x\.yaml: missing key 'name'"),
    ("name: x\nparts:\n  - {files: [a.txt], format: medline}\n", r"unknown corpus format 'medline'.*medline-xml"),
    ("name: x\nparts:\n  - {files: [a.txt], format: lines, text: [body]}\n", r"parts\[0\]: format 'lines' has no"),
    ("name: x\nparts: []\n", r"'parts' must be a non-empty list"),
    ("name: x\nparts:\n  - {files: [a.txt], format: lines}\nfilters: {min_word: 3}\n",
     r"unknown key 'filters.min_word' \(did you mean 'min_words'\?\)"),
    ("name: x\nparts:\n  - {files: [nothing-*.txt], format: lines}\n",
     r"x\.yaml: parts\[0\] glob 'nothing-\*\.txt' matches no file"),
])
def test_corpus_yaml_mistakes_are_one_line(tmp_path: Path, data_dir: Path, text: str, error: str):
    (tmp_path / "a.txt").write_text("one document\n")
    yaml = write_yaml(tmp_path / "x.yaml", text)
    with pytest.raises((ConfigError, UnknownNameError), match=error) as info:
        load_corpus(str(yaml), data_dir)
    assert "\n" not in str(info.value)


def test_unknown_names_and_missing_files():
    with pytest.raises(UnknownNameError, match="unknown corpus 'pubmedd'; known: general, pmc, pubmed"):
        parse_corpus("pubmed+pubmedd")
    with pytest.raises(ConfigError, match="corpus file not found: nowhere/c.yaml"):
        parse_corpus("nowhere/c.yaml")
    with pytest.raises(ConfigError, match="an empty name"):
        parse_corpus("pubmed+")


def test_malformed_files_name_the_file_and_position(tmp_path: Path, data_dir: Path):
    good = (data_dir / MEDLINE).read_bytes()
    cut = tmp_path / "cut.xml.gz"
    cut.write_bytes(good[:len(good) // 2])  # a truncated download
    with pytest.raises(DataFormatError, match=rf"{cut}: cannot read the file \(EOFError"):
        list(read_documents(cut, "medline-xml"))
    broken = tmp_path / "broken.xml"
    broken.write_text("<MedlineCitationSet>\n<MedlineCitation>\n<PMID>1</PMID>\n</Medline>\n")
    with pytest.raises(DataFormatError, match=rf"{broken}:4: not valid MEDLINE XML"):
        list(read_documents(broken, "medline-xml"))
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text('{"text": "fine", "pmid": 1}\n{"text": broken\n')
    with pytest.raises(DataFormatError, match=rf"{jsonl}:2: not valid JSON"):
        list(read_documents(jsonl, "jsonl", ("text",), "pmid"))
    with pytest.raises(DataFormatError, match=rf"{jsonl}:1: no field 'abstract' \(fields: text, pmid\)"):
        list(read_documents(jsonl, "jsonl", ("abstract",)))
    latin = tmp_path / "latin.txt"
    latin.write_bytes("first line\nsecond caf\xe9\n".encode("latin-1"))
    with pytest.raises(DataFormatError, match=rf"{latin}:2: not UTF-8 text"):
        list(read_documents(latin, "lines"))
    table = tmp_path / "t.csv"
    table.write_text("id,body\n7,some text\n")
    with pytest.raises(DataFormatError, match=rf"{table}:2: no field 'text'"):
        list(read_documents(table, "csv", ("text",)))
    assert [d.text for d in read_documents(table, "csv", ("body",), "id")] == ["some text"]


def test_jsonl_and_csv_fields_and_gzip(tmp_path: Path):
    rows = [{"pmid": "123", "title": "A title.", "abstract": "An abstract."}, {"title": "", "abstract": "Only."}]
    path = tmp_path / "d.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    docs = list(read_documents(path, "jsonl", ("title", "abstract"), "pmid"))
    assert [(d.pmid, d.text) for d in docs] == [("123", "A title. An abstract."), (None, "Only.")]


def test_duplicates_and_evaluation_pmids_are_dropped(tmp_path: Path, data_dir: Path):
    pmid = "16357751"  # a ChemProt abstract
    lines = [{"pmid": pmid, "text": "word " * 60}, {"pmid": "1", "text": "Same words here. " * 20},
             {"pmid": "2", "text": "same   WORDS here. " * 20}, {"pmid": "3", "text": "too short"}]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    yaml = write_yaml(tmp_path / "c.yaml", "name: c\nparts:\n  - {files: [d.jsonl], format: jsonl, pmid: pmid}\n"
                                           "filters: {min_words: 5, dedup: true, exclude_eval_pmids: true}\n")
    stats = load_corpus(str(yaml), data_dir, dedup=False).stats  # the YAML's filters hold regardless
    assert (stats.documents, stats.dropped_eval_pmid, stats.dropped_duplicate, stats.dropped_short) == (1, 1, 1, 1)
    assert read_corpus_yaml(yaml).filters.min_words == 5


def test_seen_hashes_match_a_set_in_eight_bytes_a_hash():
    rng = np.random.default_rng(0)
    values = rng.integers(0, 2**64 - 1, size=3000, dtype=np.uint64, endpoint=True)
    values = np.concatenate([values, values[rng.integers(0, 3000, 2000)]])  # 2000 repeats
    seen, reference = SeenHashes(fold_at=64), set()
    for v in values.tolist():
        assert seen.add(v) == (v not in reference)
        reference.add(v)
    assert len(seen) == len(reference) and len(seen.recent) < 64 and len(seen.runs) <= 12
    assert all((np.diff(run.astype(np.float64)) >= 0).all() and run.dtype == np.uint64 for run in seen.runs)


@pytest.mark.slow
def test_a_baseline_yaml_pretrains_a_micro_model(data_dir: Path, tmp_path: Path, baseline_yaml):
    from ablations.config import build_config
    from ablations.run.pretrain import run_pretrain

    yaml = baseline_yaml(4)
    cfg = build_config("micro", ["trainer.progress_bar=false", f"pretrain.corpus={yaml}", "pretrain.max_steps=8",
                                 "pretrain.checkpoint_every=4"],
                       task="pretrain", experiment_name="pretrain", data_dir=str(data_dir),
                       work_dir=str(tmp_path / "work"))
    result = run_pretrain(cfg)
    assert (result.model_dir / "config.json").is_file() and len(result.losses) == 8
    assert result.losses[-1] < result.losses[0]


def test_cli_lists_the_builtin_corpora(capsys):
    from ablations.cli import main

    assert main(["list", "corpora"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()[:3]] == ["general", "pmc", "pubmed"]
    assert "experiments/corpora/pubmed.yaml" in out


def test_evaluation_pmids_are_kept_in_the_user_cache_for_the_next_process(data_dir: Path, tmp_path: Path,
                                                                          monkeypatch):
    """Every pretraining process needs them, whatever its work directory: parsed once per data content."""
    from datamodules.pretrain import corpora

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    corpora._PMIDS.clear()
    parsed = evaluation_pmids(data_dir)
    files = list((tmp_path / "cache" / "bioablate" / "evaluation-pmids").iterdir())
    assert len(files) == 1 and set(files[0].read_text().split()) == parsed and len(parsed) > 1000
    # a new process (no in-memory set) reads the file instead of parsing the datasets: what the file
    # says is what it gets
    corpora._PMIDS.clear()
    files[0].write_text("12345678\n")
    assert evaluation_pmids(data_dir) == {"12345678"}
    corpora._PMIDS.clear()
    monkeypatch.setenv("XDG_CACHE_HOME", str(files[0]))  # a file: no cache can be written under it
    assert evaluation_pmids(data_dir) == parsed  # parsed again, and the process goes on
    corpora._PMIDS.clear()


def test_filters_min_words_dedup_and_evaluation_pmids(data_dir: Path):
    pmids = evaluation_pmids(data_dir)
    assert "16357751" in pmids and len(pmids) > 5000  # a ChemProt abstract; BC5CDR list included
    full = load_corpus("pubmed", data_dir, min_words=128, exclude_pmids=pmids)
    s = full.stats
    assert s.dropped_short > 0 and s.dropped_duplicate > 0 and s.dropped_eval_pmid > 100  # KD-DTI vs ChemProt
    kept = [len(" ".join(doc).split()) for doc in full.stages[0]]
    assert min(kept) >= 128
    loose = load_corpus("pubmed", data_dir, min_words=0, dedup=False)
    assert loose.stats.documents == s.documents + s.dropped_short + s.dropped_duplicate + s.dropped_eval_pmid


def test_named_corpora_mixtures_sequences_and_caps(data_dir: Path):
    assert parse_corpus("general>pubmed+pmc") == [["general"], ["pubmed", "pmc"]]
    with pytest.raises(UnknownNameError, match="unknown corpus 'pubmedd'; known: general, pmc, pubmed"):
        parse_corpus("pubmedd")
    for name in ("pubmed", "pmc", "general"):
        c = load_corpus(name, data_dir, max_words=5000)
        assert 5000 <= c.stats.words < 5000 + 200 and c.stats.by_part == {name: c.stats.documents}
    mix = load_corpus("pubmed+pmc", data_dir, max_words=200000)
    assert set(mix.stats.by_part) == {"pubmed", "pmc"} and len(mix.stages) == 1
    seq = load_corpus("general>pubmed", data_dir, max_words=20000)
    assert len(seq.stages) == 2 and set(seq.stats.by_part) == {"general", "pubmed"}


def test_sentence_splitter():
    text = "E. coli grew at 37 C. Growth was measured (Fig. 2). Smith et al. found more! Is it? Yes."
    assert split_sentences(text) == ["E. coli grew at 37 C. Growth was measured (Fig. 2).",
                                     "Smith et al. found more!", "Is it?", "Yes."]


# ---- shapes: a list where the corpus schema takes a mapping, or the reverse, for every key of the file and
# of a part (cases generated from CorpusSchema and PartSchema by tests/shapes.py)

VALID_CORPUS = {"name": "x", "parts": [{"files": ["a.txt"], "format": "lines"}]}
CORPUS_CASES = list(shapes.cases(CorpusSchema))
PART_CASES = list(shapes.cases(PartSchema))


@pytest.mark.parametrize("case", CORPUS_CASES, ids=[c.id for c in CORPUS_CASES])
def test_a_wrong_container_in_a_corpus_file_is_one_line(tmp_path: Path, case):
    path = write_yaml(tmp_path / "x.yaml", safe_dump(shapes.put(VALID_CORPUS, case.path, case.value)))
    with pytest.raises(ConfigError) as error:
        read_corpus_yaml(path)
    assert str(error.value).startswith(f"{path}: {case.key}: expected ") and "\n" not in str(error.value)
    assert str(error.value).endswith(f", got {case.got}")


@pytest.mark.parametrize("case", PART_CASES, ids=[c.id for c in PART_CASES])
def test_a_wrong_container_in_a_corpus_part_is_one_line(tmp_path: Path, case):
    part = shapes.put(VALID_CORPUS["parts"][0], case.path, case.value)
    path = write_yaml(tmp_path / "x.yaml", safe_dump({**VALID_CORPUS, "parts": [part]}))
    with pytest.raises(ConfigError) as error:
        read_corpus_yaml(path)
    assert str(error.value).startswith(f"{path}: parts[0]: {case.key}: expected ") and "\n" not in str(error.value)
    assert str(error.value).endswith(f", got {case.got}")


def test_parts_as_a_mapping_is_refused_on_the_command_line_before_any_run(tmp_path: Path, data_dir: Path):
    path = write_yaml(tmp_path / "c.yaml", "name: c\nparts: {files: [a.txt], format: lines}\n")
    out = bioablate_in_process("pretrain", "--corpus", str(path), "--data-dir", str(data_dir), "--work-dir",
                               str(tmp_path / "work"), cwd=tmp_path)
    assert out.returncode == 2 and \
        out.stderr.strip() == f"bioablate: error: {path}: parts: expected a list, got a mapping"
    assert not (tmp_path / "work" / "mlruns.db").exists()

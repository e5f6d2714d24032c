"""NER and PICO readers on the real staged files: counts against MANIFEST / paper Table 3, the JNLPBA
train reconstruction from brat standoff, the EBM-PICO document split, and malformed-input errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bioablate_core.errors import DataFormatError
from datamodules.instances import Span, TaggingInstance
from datamodules.readers.ner import (
    JNLPBA_DEVEL_IDS,
    JNLPBA_STANDOFF_DIR,
    jnlpba_train_document_ids,
    read_conll_file,
    read_crichton,
    read_jnlpba,
    read_jnlpba_standoff,
    read_standoff_document,
)
from datamodules.readers.pico import pico_document_ids, read_ebm_pico, read_pico_file, split_pool

# (train, dev, test) from MANIFEST section 1; mentions equal the paper's Table 3 except BC5CDR-disease
# dev (+2 over the paper's 4 244 in the staged Crichton file).
CRICHTON = {
    "BC5CDR-chem-IOB": {"mentions": (5203, 5347, 5385), "sentences": (4560, 4581, 4797)},
    "BC5CDR-disease-IOB": {"mentions": (4182, 4246, 4424), "sentences": (4560, 4581, 4797)},
    "NCBI-disease-IOB": {"mentions": (5134, 787, 960), "sentences": (5424, 923, 940)},
    "BC2GM-IOB": {"mentions": (15197, 3061, 6325), "sentences": (12574, 2519, 5038)},
}
SPLITS = ("train", "dev", "test")


def mentions(instances: list[TaggingInstance]) -> int:
    return sum(len(instance.spans) for instance in instances)


def assert_well_formed(instances: list[TaggingInstance]) -> None:
    for instance in instances:
        assert instance.tokens and all(instance.tokens), instance.id
        previous_end = 0
        for span in instance.spans:
            assert previous_end <= span.start < span.end <= len(instance.tokens), instance.id
            previous_end = span.end
    assert len({instance.id for instance in instances}) == len(instances)


@pytest.fixture(scope="module", params=sorted(CRICHTON))
def crichton(request, data_dir: Path):
    return request.param, read_crichton(request.param, "Entity")(data_dir)


@pytest.fixture(scope="module")
def jnlpba(data_dir: Path):
    return read_jnlpba(data_dir)


@pytest.fixture(scope="module")
def pico(data_dir: Path):
    return read_ebm_pico(data_dir)


# ------------------------------------------------------------------------------------- Crichton NER


def test_crichton_counts_match_manifest(crichton):
    folder, splits = crichton
    expected = CRICHTON[folder]
    assert tuple(mentions(splits[s]) for s in SPLITS) == expected["mentions"]
    assert tuple(len(splits[s]) for s in SPLITS) == expected["sentences"]
    for split in SPLITS:
        assert_well_formed(splits[split])
        assert {span.label for instance in splits[split] for span in instance.spans} == {"Entity"}


def test_crichton_ids_name_file_and_sentence(crichton):
    _, splits = crichton
    assert splits["dev"][0].id == "devel-0"
    assert splits["test"][-1].id == f"test-{len(splits['test']) - 1}"


def test_uncollapsed_types_are_kept(data_dir: Path):
    instances = read_conll_file(data_dir / "NCBI-disease-IOB" / "devel.tsv", None)
    assert {span.label for instance in instances for span in instance.spans} == {"Disease"}


# ------------------------------------------------------------------------------------------- JNLPBA


def test_jnlpba_counts_match_paper(jnlpba):
    assert tuple(mentions(jnlpba[s]) for s in SPLITS) == (46750, 4551, 8662)
    assert (len(jnlpba["dev"]), len(jnlpba["test"])) == (1739, 3856)
    for split in SPLITS:
        assert_well_formed(jnlpba[split])
        assert {span.label for instance in jnlpba[split] for span in instance.spans} == {"Entity"}


def test_jnlpba_train_is_standoff_minus_crichton_devel(data_dir: Path, jnlpba):
    train_ids = jnlpba_train_document_ids(data_dir)
    devel_ids = set((data_dir / JNLPBA_DEVEL_IDS).read_text().split())
    assert len(train_ids) == 1800 and len(devel_ids) == 200
    assert not devel_ids & set(train_ids)
    assert {instance.id.rsplit("-", 1)[0] for instance in jnlpba["train"]} == set(train_ids)
    # About 9 sentences per abstract, as in GENIA's own devel split (1 739 for 200 abstracts).
    assert 8.5 < len(jnlpba["train"]) / len(train_ids) < 10


def test_every_standoff_mention_survives_with_its_surface(data_dir: Path, jnlpba):
    """Each brat entity, in order, is a span whose tokens spell its surface (modulo spaces)."""
    folder = data_dir / JNLPBA_STANDOFF_DIR
    expected: list[tuple[str, str]] = []
    for doc_id in jnlpba_train_document_ids(data_dir):
        entities = []
        for line in (folder / f"{doc_id}.ann").read_text().splitlines():
            _, offsets, surface = line.split("\t")
            entities.append((int(offsets.split()[1]), doc_id, re.sub(r"\s", "", surface)))
        expected.extend((doc, surface) for _, doc, surface in sorted(entities))
    found = [
        (instance.id.rsplit("-", 1)[0], "".join(instance.tokens[span.start : span.end]))
        for instance in jnlpba["train"]
        for span in instance.spans
    ]
    assert len(found) == 46750
    assert found == expected


def test_jnlpba_mention_inside_a_word_is_cut_out(data_dir: Path):
    """'M-CSF-induced' with the entity 'M-CSF' becomes the tokens 'M-CSF', '-induced'."""
    folder = data_dir / JNLPBA_STANDOFF_DIR
    sentences, needed_cut = read_standoff_document(folder / "91291720.txt", folder / "91291720.ann", None)
    assert needed_cut >= 1
    sentence = next(s for s in sentences if "-induced" in s.tokens)
    i = sentence.tokens.index("-induced")
    assert sentence.tokens[i - 1] == "M-CSF"
    assert Span(i - 1, i, "protein") in sentence.spans


def test_jnlpba_rebuilt_devel_matches_crichton_devel(data_dir: Path, jnlpba):
    """Rebuilding the 200 devel abstracts from standoff gives Crichton's devel mentions exactly, which
    shows that the tokenization and sentence splitting used for train agree with GENIA's."""
    devel_ids = (data_dir / JNLPBA_DEVEL_IDS).read_text().split()
    rebuilt, _ = read_jnlpba_standoff(data_dir, devel_ids, "Entity")

    def surfaces(instances: list[TaggingInstance]) -> list[str]:
        return [
            "".join(instance.tokens[span.start : span.end]).replace("``", '"').replace("''", '"')
            for instance in instances
            for span in instance.spans
        ]

    assert surfaces(rebuilt) == surfaces(jnlpba["dev"])
    assert abs(len(rebuilt) - len(jnlpba["dev"])) <= 10


def test_nested_brat_entities_keep_the_outermost(tmp_path: Path):
    (tmp_path / "1.txt").write_text("Title.\nThe IL-2-induced human IL-2 receptor binds. Then it stops.\n")
    (tmp_path / "1.ann").write_text(
        "T1\tprotein 11 15\tIL-2\nT2\tprotein 30 34\tIL-2\nT3\tprotein 24 43\thuman IL-2 receptor\n"
    )
    sentences, needed_cut = read_standoff_document(tmp_path / "1.txt", tmp_path / "1.ann", "Entity")
    assert [s.tokens for s in sentences] == [
        ("Title", "."),
        ("The", "IL-2", "-induced", "human", "IL-2", "receptor", "binds", "."),
        ("Then", "it", "stops", "."),
    ]
    assert sentences[1].spans == (Span(1, 2, "Entity"), Span(3, 6, "Entity"))
    assert needed_cut == 1
    assert [s.id for s in sentences] == ["1-0", "1-1", "1-2"]


# ------------------------------------------------------------------------------------------ EBM-PICO


def test_pico_documents_and_segments(data_dir: Path, pico):
    ids = pico_document_ids(data_dir)
    assert len(ids["train"]) + len(ids["dev"]) == 960 and len(ids["test"]) == 191
    assert 0.08 < len(ids["dev"]) / 960 < 0.12
    assert len(pico["train"]) + len(pico["dev"]) == 7049 and len(pico["test"]) == 2064
    for split in SPLITS:
        assert_well_formed(pico[split])
        assert {span.label for instance in pico[split] for span in instance.spans} == {"PAR", "INT", "OUT"}
        assert {instance.id.split("-")[0] for instance in pico[split]} == set(ids[split])


def test_pico_splits_do_not_share_documents(data_dir: Path):
    ids = {split: set(pmids) for split, pmids in pico_document_ids(data_dir).items()}
    assert not ids["train"] & ids["dev"]
    assert not ids["train"] & ids["test"]
    assert not ids["dev"] & ids["test"]


def test_pico_split_is_deterministic(data_dir: Path, pico):
    assert read_ebm_pico(data_dir) == pico
    pool = pico_document_ids(data_dir)["train"] + pico_document_ids(data_dir)["dev"]
    assert split_pool(list(reversed(pool))) == split_pool(pool)


def test_pico_io_labels_become_maximal_runs(tmp_path: Path):
    path = tmp_path / "pico.txt"
    path.write_text(
        "-DOCSTART- (123)\n\nAspirin NN O I-INT\nin NN O O\nadult NN O I-PAR\nmen NN O I-PAR\n"
        ". NN O O\n\nPain NN O I-OUT\n\n\n\n-DOCSTART- (456)\n\nNone NN O O\n"
    )
    documents = read_pico_file(path)
    assert [pmid for pmid, _ in documents] == ["123", "456"]
    first, second = documents[0][1]
    assert (first.id, second.id) == ("123-0", "123-1")
    assert first.spans == (Span(0, 1, "INT"), Span(2, 4, "PAR"))
    assert second.spans == (Span(0, 1, "OUT"),)


# ------------------------------------------------------------------------------------ malformed files


def test_conll_reader_tolerates_docstart_trailing_space_and_no_final_blank(tmp_path: Path):
    path = tmp_path / "sample.tsv"
    path.write_text("-DOCSTART-\tO\n\nIL-2\tB-protein \ngene\tI-DNA\n\nok\tO")
    first, second = read_conll_file(path, "Entity")
    assert first == TaggingInstance("sample-0", ("IL-2", "gene"), (Span(0, 2, "Entity"),))
    assert second == TaggingInstance("sample-1", ("ok",), ())


@pytest.mark.parametrize(
    "bad_line",
    ["IL-2 B-protein", "IL-2\tX-protein", "IL-2\tB-", "\tO", "IL-2\tB-protein\textra"],
    ids=["no-tab", "bad-tag", "untyped-tag", "empty-token", "three-columns"],
)
def test_conll_malformed_line_names_file_and_line(tmp_path: Path, bad_line: str):
    path = tmp_path / "bad.tsv"
    path.write_text(f"The\tO\ncell\tO\n\n{bad_line}\n")
    with pytest.raises(DataFormatError) as error:
        read_conll_file(path, None)
    assert error.value.path == path and error.value.line == 4
    assert f"{path}:4" in str(error.value) and "token<TAB>tag" in str(error.value)


@pytest.mark.parametrize(
    "bad_line",
    ["Aspirin I-INT", "Aspirin NN O I-FOO", "-DOCSTART- 123"],
    ids=["two-columns", "bad-label", "bad-header"],
)
def test_pico_malformed_line_names_file_and_line(tmp_path: Path, bad_line: str):
    path = tmp_path / "bad.txt"
    path.write_text(f"-DOCSTART- (1)\n\nAspirin NN O I-INT\n{bad_line}\n")
    with pytest.raises(DataFormatError) as error:
        read_pico_file(path)
    assert error.value.line == 4 and f"{path}:4" in str(error.value)


def test_pico_tokens_before_header_are_rejected(tmp_path: Path):
    path = tmp_path / "bad.txt"
    path.write_text("Aspirin NN O I-INT\n")
    with pytest.raises(DataFormatError, match=r"bad\.txt:1: token line before"):
        read_pico_file(path)


def test_brat_surface_mismatch_names_ann_file(tmp_path: Path):
    (tmp_path / "1.txt").write_text("IL-2 binds.\n")
    (tmp_path / "1.ann").write_text("T1\tprotein 0 4\tIL-3\n")
    with pytest.raises(DataFormatError, match=r"1\.ann:1: entity surface 'IL-3'"):
        read_standoff_document(tmp_path / "1.txt", tmp_path / "1.ann", None)

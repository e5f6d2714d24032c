"""Relation-extraction readers (ChemProt, DDI, GAD) on the real staged files.

Each corpus is read once per module (and once more for the determinism check). Expected numbers come
from the paper's Table 3 and the data MANIFEST (sections 3-5).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from bioablate_core.errors import DataFormatError
from datamodules.instances import Mention, RelationInstance
from datamodules.readers.chemprot import (
    chemprot_files,
    read_chemprot,
    read_chemprot_split,
    split_sentences,
)
from datamodules.readers.ddi import ddi_document_split, read_ddi, read_ddi_file
from datamodules.readers.gad import read_gad, read_gad_test_file, read_gad_train_file

SPLITS = ("train", "dev", "test")


@pytest.fixture(scope="module")
def chemprot(data_dir: Path) -> dict[str, list[RelationInstance]]:
    return read_chemprot(data_dir)


@pytest.fixture(scope="module")
def ddi(data_dir: Path) -> dict[str, list[RelationInstance]]:
    return read_ddi(data_dir)


@pytest.fixture(scope="module")
def gad(data_dir: Path) -> dict[str, list[RelationInstance]]:
    return read_gad(data_dir)


def _surface(instance: RelationInstance, mention: Mention) -> str:
    return instance.text[mention.start : mention.end]


def _assert_well_formed(splits: dict[str, list[RelationInstance]]) -> None:
    assert set(splits) == set(SPLITS)
    ids = [x.id for split in SPLITS for x in splits[split]]
    assert len(ids) == len(set(ids)), "instance ids must be unique across splits"
    for split in SPLITS:
        for x in splits[split]:
            for m in (x.head, x.tail):
                assert 0 <= m.start < m.end <= len(x.text), x.id


def _assert_disjoint(documents: dict[str, set[str]]) -> None:
    train, dev, test = (documents[s] for s in SPLITS)
    assert not (train & dev or train & test or dev & test)


# --------------------------------------------------------------------------------------------------
# ChemProt

CHEMPROT_PAPER = {"train": 18035, "dev": 11268, "test": 15745}
# Distinct gold (PMID, chemical, gene) pairs: the gold-standard files have 4,157 / 2,416 / 3,458 rows,
# 10 / 4 / 14 of which repeat a pair under a second CPR group.
CHEMPROT_POSITIVE_PAIRS = {"train": 4147, "dev": 2412, "test": 3444}


def _chemprot_entities(data_dir: Path, split: str) -> dict[tuple[str, str], tuple[str, str]]:
    """(PMID, T<n>) -> (type, surface), parsed independently of the reader."""
    path = data_dir / chemprot_files(split)["entities"]
    rows = (line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line)
    return {(r[0], r[1]): (r[2], r[5]) for r in rows}


def _chemprot_gold(data_dir: Path, split: str) -> dict[tuple[str, str, str], set[str]]:
    path = data_dir / chemprot_files(split)["relations"]
    gold: dict[tuple[str, str, str], set[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        pmid, group, flag, _, arg1, arg2 = line.split("\t")
        if flag == "Y " and group in ("CPR:3", "CPR:4", "CPR:5", "CPR:6", "CPR:9"):
            gold.setdefault((pmid, arg1[5:], arg2[5:]), set()).add(group)
    return gold


@pytest.mark.parametrize("split", SPLITS)
def test_chemprot_counts_within_two_percent_of_paper(chemprot, split):
    n = len(chemprot[split])
    assert abs(n - CHEMPROT_PAPER[split]) <= 0.02 * CHEMPROT_PAPER[split], (split, n)


@pytest.mark.parametrize("split", SPLITS)
def test_chemprot_mentions_reproduce_entities_and_labels_match_gold(chemprot, data_dir, split):
    entities = _chemprot_entities(data_dir, split)
    gold = _chemprot_gold(data_dir, split)
    positives = set()
    for x in chemprot[split]:
        pmid, sentence, chem, gene = x.id.split(".")
        assert sentence.startswith("s")
        assert (x.head.type, x.tail.type) == ("CHEMICAL", "GENE")
        assert entities[(pmid, chem)] == ("CHEMICAL", _surface(x, x.head)), x.id
        gene_type, gene_surface = entities[(pmid, gene)]
        assert gene_type in ("GENE-Y", "GENE-N") and gene_surface == _surface(x, x.tail), x.id
        if (pmid, chem, gene) in gold:
            assert x.label == min(gold[(pmid, chem, gene)], key=lambda g: int(g[4:])), x.id
            positives.add((pmid, chem, gene))
        else:
            assert x.label == "false", x.id
    # No gold relation is lost to a sentence boundary.
    assert len(positives) == len(gold) == CHEMPROT_POSITIVE_PAIRS[split]


def test_chemprot_label_set_and_well_formed(chemprot):
    _assert_well_formed(chemprot)
    labels = Counter(x.label for split in SPLITS for x in chemprot[split])
    assert set(labels) == {"false", "CPR:3", "CPR:4", "CPR:5", "CPR:6", "CPR:9"}


def test_chemprot_documents_in_one_split(chemprot):
    _assert_disjoint({split: {x.id.split(".")[0] for x in chemprot[split]} for split in SPLITS})


def test_chemprot_deterministic(chemprot, data_dir):
    assert read_chemprot_split(data_dir, "dev") == chemprot["dev"]


@pytest.mark.parametrize(
    "sentences",
    [
        # abbreviations, species, decimals and dotted routes do not end a sentence
        ["Cells (e.g. HeLa) grew.", "Rats got i.v. CCK-8 daily."],
        ["Up vs. Day 5 in S. cerevisiae at 0.05 mM.", "The end."],
        ["As Li et al. (2004) showed.", "See Fig. 2 for E. coli."],
        # a single capital ends a gene name, except inside an author list
        ["It binds protein kinase C.", "Ingenol acts."],
        ["Wanders, R. J. A. Carnitine is made."],
        # lowercase starts only for gene/chemical-like tokens; NO (nitric oxide) ends a sentence
        ["It made NO.", "mRNA fell. it rose."],
        # enumeration markers stay with their sentence
        ["Drugs are tested.", "2. We found it.", "Really?"],
    ],
)
def test_split_sentences_rules(sentences):
    text = " ".join(sentences)
    assert [text[s:e] for s, e in split_sentences(text)] == sentences


def test_split_sentences_never_cuts_a_protected_span():
    text = "We used compound X. Y was inert."
    assert len(split_sentences(text)) == 2
    assert split_sentences(text, [(text.index("X"), text.index("Y") + 1)]) == [(0, len(text))]


def _write_chemprot(root: Path, abstracts: str, entities: str, relations: str) -> Path:
    for kind, content in (("abstracts", abstracts), ("entities", entities), ("relations", relations)):
        for split in SPLITS:
            path = root / chemprot_files(split)[kind]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
    return root / chemprot_files("train")["entities"]


def test_chemprot_pairs_from_a_tiny_corpus(tmp_path):
    _write_chemprot(
        tmp_path,
        "1\tAspirin blocks COX-1.\tIt also binds TP53. No gene here.\n",
        "1\tT1\tCHEMICAL\t0\t7\tAspirin\n1\tT2\tGENE-Y\t15\t20\tCOX-1\n1\tT3\tGENE-N\t36\t40\tTP53\n",
        "1\tCPR:4\tY \tINHIBITOR\tArg1:T1\tArg2:T2\n",
    )
    (pair,) = read_chemprot(tmp_path)["train"]
    assert pair == RelationInstance(
        id="1.s0.T1.T2",
        text="Aspirin blocks COX-1.",
        head=Mention(0, 7, "CHEMICAL"),
        tail=Mention(15, 20, "GENE"),
        label="CPR:4",
    )


ASPIRIN = "1\tT1\tCHEMICAL\t0\t7\tAspirin\n"


@pytest.mark.parametrize(
    "entities, relations, message",
    [
        ("1\tT1\tCHEMICAL\t0\t7\n", "", "expected 6 TAB-separated columns"),
        ("1\tT1\tDRUG\t0\t7\tAspirin\n", "", "expected entity type CHEMICAL, GENE-Y or GENE-N"),
        ("1\tT1\tCHEMICAL\t1\t7\tAspirin\n", "", "do not cover the entity text"),
        (ASPIRIN, "1\tCPR:4\tY\tINHIBITOR\tArg1:T1\tArg2:T2\n", "expected evaluation flag"),
        (ASPIRIN, "1\tCPR:4\tY \tINHIBITOR\tArg1:T1\tArg2:T9\n", "expected Arg1 a CHEMICAL"),
    ],
)
def test_chemprot_malformed_line_names_file_and_line(tmp_path, entities, relations, message):
    entities_path = _write_chemprot(tmp_path, "1\tAspirin blocks COX-1.\tText.\n", entities, relations)
    with pytest.raises(DataFormatError) as err:
        read_chemprot(tmp_path)
    bad = entities_path if not relations else tmp_path / chemprot_files("train")["relations"]
    assert err.value.path == bad and err.value.line == 1
    assert f"{bad}:1:" in str(err.value) and message in str(err.value)


# --------------------------------------------------------------------------------------------------
# DDI

DDI_LABELS = {
    "train+dev": {"false": 23771 + 1, "mechanism": 1319, "effect": 1687, "advise": 826, "int": 188},
    "test": {"false": 4737, "mechanism": 302, "effect": 360, "advise": 221, "int": 96},
}
# Source annotation error: "(R)-warfarin" is annotated one character early ("95-98;107-114" covers
# " (R)" and "-warfari"); documented in docs/data.md.
DDI_KNOWN_BAD_ENTITY = "DDI-DrugBank.d216.s16.e2"


def test_ddi_counts_and_labels(ddi):
    assert {s: len(ddi[s]) for s in SPLITS} == {"train": 25296, "dev": 2496, "test": 5716}
    train_dev = Counter(x.label for s in ("train", "dev") for x in ddi[s])
    assert dict(train_dev) == DDI_LABELS["train+dev"]
    assert dict(Counter(x.label for x in ddi["test"])) == DDI_LABELS["test"]
    _assert_well_formed(ddi)


def test_ddi_document_split(data_dir, ddi):
    files = ddi_document_split(data_dir)
    assert {s: len(files[s]) for s in SPLITS} == {"train": 624, "dev": 90, "test": 191}
    assert not set(files["train"]) & set(files["dev"])
    _assert_disjoint({s: {x.id.split(".s")[0] for x in ddi[s]} for s in SPLITS})
    assert files == ddi_document_split(data_dir)


def test_ddi_mentions_reproduce_entities(data_dir, ddi):
    entities: dict[str, ET.Element] = {}
    pairs: dict[str, ET.Element] = {}
    for split_files in ddi_document_split(data_dir).values():
        for path in split_files:
            root = ET.parse(path).getroot()
            entities.update((e.get("id"), e) for e in root.iter("entity"))
            pairs.update((p.get("id"), p) for p in root.iter("pair"))
    for x in (x for s in SPLITS for x in ddi[s]):
        pair = pairs[x.id]
        for mention, entity in ((x.head, entities[pair.get("e1")]), (x.tail, entities[pair.get("e2")])):
            assert mention.type == "DRUG"
            surface = _surface(x, mention)
            if ";" not in entity.get("charOffset"):
                assert surface == entity.get("text"), x.id
            elif entity.get("id") != DDI_KNOWN_BAD_ENTITY:
                # discontinuous: the span runs from the first fragment to the last one
                fragments = entity.get("charOffset").split(";")
                first, *_, last = [tuple(map(int, f.split("-"))) for f in fragments]
                compact = entity.get("text").replace(" ", "")
                assert compact.startswith(x.text[first[0] : first[1] + 1].replace(" ", "")), x.id
                assert compact.endswith(x.text[last[0] : last[1] + 1].replace(" ", "")), x.id
                assert (mention.start, mention.end) == (first[0], last[1] + 1)


def test_ddi_untyped_true_pair_is_false(ddi):
    (pair,) = [x for x in ddi["train"] + ddi["dev"] if x.id == "DDI-DrugBank.d236.s29.p0"]
    assert pair.label == "false"


def test_ddi_deterministic(data_dir, ddi):
    assert read_ddi(data_dir) == ddi


def _ddi_sentence(offsets: str, pair: str | None = None) -> str:
    """A one-entity sentence "aspirin", optionally with a self-pair carrying the `pair` attributes."""
    entity = f'<entity id="D.s0.e0" charOffset="{offsets}" type="drug" text="aspirin"/>'
    pair_xml = f'<pair id="D.s0.p0" e1="D.s0.e0" e2="D.s0.e0" {pair}/>' if pair else ""
    return f'<sentence id="D.s0" text="aspirin">{entity}{pair_xml}</sentence>'


def _write_ddi(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "doc.xml"
    path.write_text(f'<?xml version="1.0" encoding="UTF-8"?>\n<document id="D">\n{body}\n</document>\n')
    return path


def test_ddi_offsets_are_inclusive_and_discontinuous_spans_joined(tmp_path):
    path = _write_ddi(
        tmp_path,
        '<sentence id="D.s0" text="loop and thiazide diuretics with digoxin&#xd;&#xa;">'
        '<entity id="D.s0.e0" charOffset="0-3;18-26" type="group" text="loop diuretics"/>'
        '<entity id="D.s0.e1" charOffset="33-39" type="drug" text="digoxin"/>'
        '<pair id="D.s0.p0" e1="D.s0.e0" e2="D.s0.e1" ddi="true" type="effect"/></sentence>',
    )
    (pair,) = read_ddi_file(path)
    assert pair.text.endswith("\r\n")
    assert (pair.head, pair.tail) == (Mention(0, 27, "DRUG"), Mention(33, 40, "DRUG"))
    assert pair.label == "effect"


@pytest.mark.parametrize(
    "body, message",
    [
        ('<sentence id="D.s0" text="x"', "not well-formed XML"),
        (_ddi_sentence("0_6"), "expected charOffset"),
        (_ddi_sentence("0-5"), "covers 'aspiri', not 'aspirin'"),
        (_ddi_sentence("0-6", 'ddi="maybe"'), "expected ddi='true' or 'false'"),
        ('<sentence id="D.s0"/>', "expected a 'text' attribute"),
    ],
)
def test_ddi_malformed_file_names_the_file(tmp_path, body, message):
    path = _write_ddi(tmp_path, body)
    with pytest.raises(DataFormatError) as err:
        read_ddi_file(path)
    assert err.value.path == path and message in str(err.value)


# --------------------------------------------------------------------------------------------------
# GAD


def test_gad_counts_and_labels(gad):
    assert {s: len(gad[s]) for s in SPLITS} == {"train": 4261, "dev": 535, "test": 534}
    assert dict(Counter(x.label for s in ("train", "dev") for x in gad[s])) == {"1": 2520, "0": 2276}
    assert dict(Counter(x.label for x in gad["test"])) == {"1": 281, "0": 253}
    _assert_well_formed(gad)


def test_gad_mentions_are_the_placeholders(gad):
    for x in (x for s in SPLITS for x in gad[s]):
        assert (_surface(x, x.head), x.head.type) == ("@GENE$", "GENE")
        assert (_surface(x, x.tail), x.tail.type) == ("@DISEASE$", "DISEASE")


def test_gad_dev_shares_no_sentence_with_train_and_is_deterministic(data_dir, gad):
    assert not {x.text for x in gad["train"]} & {x.text for x in gad["dev"]}
    assert read_gad(data_dir) == gad


@pytest.mark.parametrize(
    "content, line, message",
    [
        ("@GENE$ causes @DISEASE$.\t1\nno tab here\n", 2, "expected 2 TAB-separated columns"),
        ("@GENE$ causes @DISEASE$.\t1\n@GENE$ causes @DISEASE$.\tyes\n", 2, "expected label 0 or 1"),
        ("\n@GENE$ causes cancer.\t0\n", 2, "expected exactly one @DISEASE$"),
    ],
)
def test_gad_malformed_train_line_names_file_and_line(tmp_path, content, line, message):
    path = tmp_path / "train.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataFormatError) as err:
        read_gad_train_file(path)
    assert (err.value.path, err.value.line) == (path, line)
    assert f"{path}:{line}:" in str(err.value) and message in str(err.value)


GAD_TEST_HEADER = "index\tsentence\tlabel\n"


@pytest.mark.parametrize(
    "content, line, message",
    [
        ("@GENE$ causes @DISEASE$.\t1\n", 1, "expected the header 'index<TAB>sentence<TAB>label'"),
        (f"{GAD_TEST_HEADER}0\t@GENE$ causes @DISEASE$.\n", 2, "expected 3 TAB-separated columns"),
        (f"{GAD_TEST_HEADER}0\t@GENE$ @DISEASE$\t1\n0\t@GENE$ @DISEASE$\t0\n", 3, "duplicate index"),
    ],
)
def test_gad_malformed_test_file_names_file_and_line(tmp_path, content, line, message):
    path = tmp_path / "test.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataFormatError) as err:
        read_gad_test_file(path)
    assert (err.value.path, err.value.line) == (path, line)
    assert message in str(err.value)

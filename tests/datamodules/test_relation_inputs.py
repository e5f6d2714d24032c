"""Relation input transforms on real ChemProt and DDI sentences: exact texts, entity ranges, nesting."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import BertTokenizer

from bioablate_core.errors import UnknownNameError
from datamodules.readers.chemprot import read_chemprot
from datamodules.readers.ddi import read_ddi
from datamodules.relation_inputs import MARKERS, dummify, get_transform, markers, original


@pytest.fixture(scope="module")
def chemprot(data_dir: Path):
    return {x.id: x for split in read_chemprot(data_dir).values() for x in split}


@pytest.fixture(scope="module")
def ddi(data_dir: Path):
    return {x.id: x for split in read_ddi(data_dir).values() for x in split}


def test_separate_mentions(chemprot):
    x = chemprot["23414802.s0.T4.T12"]  # CPR:4, chemical then gene
    assert dummify(x).text == "Discovery of novel @CHEMICAL$ derivatives as @GENE$ inhibitors."
    assert markers(x).text == ("Discovery of novel [E1] 2-hydroxydiarylamide [/E1] derivatives as "
                               "[E2] TMPRSS4 [/E2] inhibitors.")
    assert original(x).text == x.text
    d = dummify(x)
    assert (d.text[slice(*d.head)], d.text[slice(*d.tail)]) == ("@CHEMICAL$", "@GENE$")
    m = markers(x)
    assert m.text[slice(*m.head)] == "[E1] 2-hydroxydiarylamide [/E1]" and m.text[m.tail_marker:].startswith("[E2]")


def test_nested_mentions(chemprot):
    x = chemprot["16789740.s1.T1.T6"]  # chemical "Methionine" inside gene "Methionine aminopeptidase-2"
    assert dummify(x).text == "@CHEMICAL-GENE$ (MetAP2) is a novel target for cancer therapy."
    assert markers(x).text == ("[E2] [E1] Methionine [/E1] aminopeptidase-2 [/E2] (MetAP2) is a novel "
                               "target for cancer therapy.")
    y = chemprot["17199504.s0.T11.T16"]  # chemical "adenine" inside the gene name, not at its start
    assert markers(y).text.endswith(
        "recombinant [E2] human [E1] adenine [/E1] phosphoribosyltransferase [/E2].")
    d = dummify(y)
    assert d.head == d.tail and d.text[slice(*d.head)] == "@CHEMICAL-GENE$"


def test_ddi_drug_pair(ddi):
    x = ddi["DDI-DrugBank.d572.s5.p0"]  # advise
    assert dummify(x).text == ("Co-administration of @DRUG$ with @DRUG$ is not recommended until use in patients "
                               "is studied. ")
    assert markers(x).text == ("Co-administration of [E1] ZETIA [/E1] with [E2] fibrates [/E2] is not "
                               "recommended until use in patients is studied. ")


def test_every_real_instance_transforms_consistently(chemprot, ddi):
    for x in list(chemprot.values()) + list(ddi.values()):
        m = markers(x)
        assert all(m.text.count(marker) == 1 for marker in MARKERS), x.id
        assert m.text.replace("[E1] ", "").replace("[E2] ", "").replace(" [/E1]", "").replace(" [/E2]", "") == x.text
        d = dummify(x)
        assert d.text[slice(*d.head)].startswith("@") and d.text[slice(*d.tail)].endswith("$")


def test_markers_are_single_tokens(data_dir, chemprot):
    tokenizer = BertTokenizer(vocab=str(data_dir / "vocab" / "pubmedbert-uncased" / "vocab.txt"))
    tokenizer.add_special_tokens({"additional_special_tokens": list(MARKERS)})
    tokens = tokenizer.tokenize(markers(chemprot["16789740.s1.T1.T6"]).text)
    assert tokens[:4] == ["[E2]", "[E1]", "methionine", "[/E1]"] and "[/E2]" in tokens
    for marker in MARKERS:
        assert tokenizer.tokenize(marker) == [marker]


def test_unknown_transform():
    with pytest.raises(UnknownNameError, match="known: dummify, markers, original"):
        get_transform("mask")

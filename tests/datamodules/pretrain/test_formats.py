"""Every document format reads real documents from the staged corpora."""

from __future__ import annotations

from pathlib import Path

from datamodules.pretrain import formats


def test_every_reader_yields_real_documents(data_dir: Path):
    base = data_dir / "pretrain"
    medline = list(formats.read_medline_xml(base / "pubmed-abstracts/medline16n0902.xml.gz"))
    assert len(medline) == 526 and all(d.pmid and d.pmid.isdigit() for d in medline)
    csv_docs = list(formats.read_csv(base / "pubmed-abstracts/processed_data.csv"))
    assert len(csv_docs) == 1620 and csv_docs[0].pmid == "25529590"
    assert len(list(formats.read_csv(base / "pubmed-abstracts/medical-abstracts-tc/medical_tc_test.csv"))) == 2888
    assert len(list(formats.read_kd_dti_json(base / "pubmed-abstracts/kd-dti/valid.json"))) == 1000
    assert len(list(formats.read_lines(base / "pubmed-abstracts/PubMedAbstract_1MB.txt"))) == 725
    craft = list(formats.read_text_file(base / "pmc-fulltext/craft-txt/11532192.txt"))[0]
    assert craft.pmid == "11532192" and len(craft.text.split()) > 1000
    elife = list(formats.read_jats_xml(base / "pmc-fulltext/elife-xml/elife00003.xml"))[0]
    assert "lipid droplets" in elife.text and "<" not in elife.text and len(elife.text.split()) > 2000
    wiki = list(formats.read_wikiextractor(base / "general/wikipedia-2015-wikiextractor/wiki_00"))
    assert wiki[0].id == "wiki:12" and wiki[0].text.startswith("Anarchism is")
    wikitext = list(formats.read_wikitext(base / "general/wikitext-2/valid.txt"))
    assert wikitext[0].id == "wikitext:Homarus gammarus" and len(wikitext) > 50
    book = list(formats.read_book(base / "general/gutenberg-nltk/melville-moby_dick.txt"))[0]
    assert "\r" not in book.text and len(book.text.split()) > 200000

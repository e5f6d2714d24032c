"""Every document format reads real documents from the staged corpora; JATS also from the tar archives of
PMC's Open Access bulk packages, with one-line errors naming the member or the archive."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from bioablate_core.errors import DataFormatError
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


# ---- PMC OA bulk packages: JATS articles inside tar archives ----

ELIFE = "pretrain/pmc-fulltext/elife-xml"


def pmc_package(data_dir: Path, folder: Path, articles: int = 12) -> tuple[Path, list[Path]]:
    """A tar.gz laid out as a PMC OA bulk package (`oa_comm_xml.PMC000xxxxxx.baseline.<date>.tar.gz`:
    a folder per PMC range, one .xml per article) of the first staged eLife articles, with a file list
    that is not an article; returns the archive and the articles' staged files in archive order."""
    files = sorted((data_dir / ELIFE).glob("*.xml"))[:articles]
    folder.mkdir(parents=True, exist_ok=True)
    archive = folder / "oa_comm_xml.PMC000xxxxxx.baseline.2024-06-18.tar.gz"
    listing = folder / "filelist.txt"
    listing.write_text("".join(f"PMC000xxxxxx/{f.name}\n" for f in files))
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(listing, arcname="oa_comm_xml.filelist.txt")
        for f in files:
            tar.add(f, arcname=f"PMC000xxxxxx/{f.name}")
    return archive, files


def test_a_pmc_oa_tar_archive_reads_as_its_article_files(data_dir: Path, tmp_path: Path):
    archive, files = pmc_package(data_dir, tmp_path)
    from_archive = list(formats.read_documents(archive, "jats-xml"))
    loose = [doc for f in files for doc in formats.read_documents(f, "jats-xml")]
    assert len(from_archive) == len(files) == 12  # the file list is no article
    assert [(d.text, d.pmid) for d in from_archive] == [(d.text, d.pmid) for d in loose]
    assert [d.id for d in from_archive] == [d.id for d in loose]  # eLife files carry no PMID: named by file


def test_archive_errors_are_one_line_naming_the_member_or_the_archive(data_dir: Path, tmp_path: Path):
    archive, _ = pmc_package(data_dir, tmp_path, articles=2)
    broken = tmp_path / "broken.tar.gz"
    bad = tmp_path / "bad.nxml"
    bad.write_text("<article>\n<front>\n</article>\n")
    with tarfile.open(broken, "w:gz") as tar:
        tar.add(bad, arcname="PMC001xxxxxx/PMC1234567.nxml")
    with pytest.raises(DataFormatError, match=rf"^{broken}:PMC001xxxxxx/PMC1234567.nxml:3: not valid JATS XML"):
        list(formats.read_documents(broken, "jats-xml"))
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(archive.read_bytes()[:archive.stat().st_size // 2])  # an interrupted download
    with pytest.raises(DataFormatError, match=rf"^{cut}: cannot read the file \(") as error:
        list(formats.read_documents(cut, "jats-xml"))
    assert "\n" not in str(error.value)
    with pytest.raises(DataFormatError, match=rf"^{archive}: a tar archive, which format 'lines' does not read"):
        list(formats.read_documents(archive, "lines"))

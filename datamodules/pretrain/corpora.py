"""Pretraining corpora: readers for the staged text (``<data_dir>/pretrain``), filters, named corpora.

Every reader yields `Document`s (an id, the PMID where the source has one, the text). `load_corpus`
applies the filters (minimum words, exact de-duplication, BLURB evaluation PMIDs) and a word cap, and
splits documents into sentences.

Corpus names (the `pretrain.corpus` key):

- a part: ``pubmed`` (PubMed abstracts), ``pmc`` (PMC full text), ``general`` (Wikipedia + books +
  WikiText, the stand-in for Wikipedia + BookCorpus);
- a mixture: parts joined by ``+`` (``pubmed+pmc``), documents pooled and shuffled together;
- a sequence for continual pretraining: mixtures joined by ``>`` (``general>pubmed``), trained in order.
"""

from __future__ import annotations

import csv
import functools
import gzip
import hashlib
import json
import random
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from core.fingerprints import hash_files
from core.errors import ConfigError, DataFormatError, MissingDataError, UnknownNameError

PRETRAIN_DIR = "pretrain"


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    pmid: str | None = None


# --------------------------------------------------------------------------------------------- readers

def read_lines(path: Path) -> Iterator[Document]:
    """One document per non-empty line (PubMedAbstract_1MB.txt)."""
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if line.strip():
                yield Document(f"{path.name}:{i + 1}", line.strip())


def read_medline_xml(path: Path) -> Iterator[Document]:
    """MEDLINE citation XML (optionally gzipped): title + abstract of each citation with an abstract."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            for _, elem in ET.iterparse(f, events=("end",)):
                if elem.tag != "MedlineCitation":
                    continue
                pmid = elem.findtext("PMID")
                title = "".join(elem.find(".//ArticleTitle").itertext()) if elem.find(".//ArticleTitle") is not None else ""
                parts = ["".join(a.itertext()) for a in elem.iterfind(".//Abstract/AbstractText")]
                if parts:
                    yield Document(f"pmid:{pmid}", " ".join(p.strip() for p in [title, *parts] if p.strip()),
                                   pmid)
                elem.clear()
    except ET.ParseError as e:
        raise DataFormatError(path, e.position[0], f"not valid MEDLINE XML: {e}") from None


def read_csv(path: Path) -> Iterator[Document]:
    """CSV abstracts: columns PMID/Title/Abstract (processed_data.csv) or medical_abstract."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        fields = set(reader.fieldnames or [])
        if "Abstract" in fields:
            for i, row in enumerate(reader):
                text = " ".join(t.strip() for t in (row.get("Title") or "", row["Abstract"] or "") if t.strip())
                pmid = (row.get("PMID") or "").strip() or None
                yield Document(f"pmid:{pmid}" if pmid else f"{path.name}:{i + 2}", text, pmid)
        elif "medical_abstract" in fields:
            for i, row in enumerate(reader):
                yield Document(f"{path.name}:{i + 2}", row["medical_abstract"].strip())
        else:
            raise DataFormatError(path, 1, f"CSV header {sorted(fields)} has neither an 'Abstract' nor a "
                                           "'medical_abstract' column")


def read_kd_dti_json(path: Path) -> Iterator[Document]:
    """KD-DTI JSON: PMID -> {title, abstract}."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DataFormatError(path, e.lineno, f"not valid JSON: {e.msg}") from None
    for pmid, item in data.items():
        text = " ".join(t.strip() for t in (item.get("title", ""), item.get("abstract", "")) if t.strip())
        yield Document(f"pmid:{pmid}", text, str(pmid))


def read_text_file(path: Path) -> Iterator[Document]:
    """A whole plain-text article (CRAFT: <PMID>.txt); paragraphs joined by newlines."""
    pmid = path.stem if path.stem.isdigit() else None
    yield Document(f"pmid:{pmid}" if pmid else path.name, path.read_text(encoding="utf-8", errors="replace"),
                   pmid)


_JATS_SKIP = {"ref-list", "table-wrap", "fig", "disp-formula", "inline-formula", "xref", "sub-article",
              "ack", "supplementary-material", "table"}


def _jats_paragraphs(elem: ET.Element, out: list[str]) -> None:
    tag = elem.tag.rsplit("}", 1)[-1]
    if tag in _JATS_SKIP:
        return
    if tag in ("p", "title", "article-title"):
        text = " ".join("".join(_jats_text(elem)).split())
        if text:
            out.append(text)
        return
    for child in elem:
        _jats_paragraphs(child, out)


def _jats_text(elem: ET.Element) -> Iterator[str]:
    """Text of an element, skipping floats and cross-references' bodies (kept: inline text)."""
    if elem.text:
        yield elem.text
    for child in elem:
        if child.tag.rsplit("}", 1)[-1] not in _JATS_SKIP - {"xref"}:
            yield from _jats_text(child)
        if child.tail:
            yield child.tail


def read_jats_xml(path: Path) -> Iterator[Document]:
    """JATS (PMC) XML: article title, abstract and body paragraphs; references, figures, tables and
    decision letters (sub-articles) are left out."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise DataFormatError(path, e.position[0], f"not valid JATS XML: {e}") from None
    pmid = root.findtext(".//article-meta/article-id[@pub-id-type='pmid']")
    paragraphs: list[str] = []
    meta = root.find("./front/article-meta")
    if meta is not None:
        for part in (meta.find("./title-group/article-title"), *meta.findall("./abstract")):
            if part is not None:
                _jats_paragraphs(part, paragraphs)
    body = root.find("./body")
    if body is not None:
        _jats_paragraphs(body, paragraphs)
    yield Document(f"pmid:{pmid}" if pmid else path.stem, "\n".join(paragraphs), pmid)


_DOC_OPEN = re.compile(r'<doc id="([^"]*)"[^>]*>')


def read_wikiextractor(path: Path) -> Iterator[Document]:
    """WikiExtractor shard: <doc id=.. url=.. title=..> title line, text </doc> blocks."""
    doc_id, lines = None, []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            opened = _DOC_OPEN.match(line)
            if opened:
                doc_id, lines = opened.group(1), []
            elif line.startswith("</doc>"):
                if doc_id is None:
                    raise DataFormatError(path, n, "</doc> without a matching <doc ...>")
                yield Document(f"wiki:{doc_id}", "\n".join(lines[1:]).strip())  # line 0 is the title
                doc_id = None
            elif doc_id is not None:
                lines.append(line.rstrip("\n"))


_WIKITEXT_TITLE = re.compile(r"^ = [^=].* = $")


def read_wikitext(path: Path) -> Iterator[Document]:
    """WikiText (tokenised, one paragraph a line): a document per ' = Title = ' article."""
    title, lines = None, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if _WIKITEXT_TITLE.match(line):
                if title is not None:
                    yield Document(f"wikitext:{title}", "\n".join(lines))
                title, lines = line.strip(" ="), []
            elif line.strip() and not line.strip().startswith("="):
                lines.append(line.strip())
    if title is not None:
        yield Document(f"wikitext:{title}", "\n".join(lines))


def read_book(path: Path) -> Iterator[Document]:
    """A Project Gutenberg book (hard-wrapped lines): one document, paragraphs unwrapped."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.replace("\r\n", "\n"))]
    yield Document(f"book:{path.stem}", "\n".join(p for p in paragraphs if p))


# ------------------------------------------------------------------------------------------ sources

@dataclass(frozen=True)
class Source:
    """Files (a glob under <data_dir>/pretrain) and the reader for each."""

    pattern: str
    reader: Callable[[Path], Iterable[Document]]


PARTS: dict[str, tuple[Source, ...]] = {
    "pubmed": (
        Source("pubmed-abstracts/PubMedAbstract_1MB.txt", read_lines),
        Source("pubmed-abstracts/medline16n0902.xml.gz", read_medline_xml),
        Source("pubmed-abstracts/processed_data.csv", read_csv),
        Source("pubmed-abstracts/kd-dti/*.json", read_kd_dti_json),
        Source("pubmed-abstracts/medical-abstracts-tc/medical_tc_test.csv", read_csv),
    ),
    "pmc": (
        Source("pmc-fulltext/craft-txt/*.txt", read_text_file),
        Source("pmc-fulltext/elife-xml/*.xml", read_jats_xml),
    ),
    "general": (
        Source("general/wikipedia-2015-wikiextractor/wiki_*", read_wikiextractor),
        Source("general/gutenberg-nltk/*.txt", read_book),
        Source("general/wikitext-2/*.txt", read_wikitext),
    ),
}


def parse_corpus(name: str) -> list[list[str]]:
    """'general>pubmed+pmc' -> [['general'], ['pubmed', 'pmc']] (stages of mixtures of parts)."""
    stages = [[p.strip() for p in stage.split("+")] for stage in name.split(">")]
    for stage in stages:
        for part in stage:
            if part not in PARTS:
                raise UnknownNameError("corpus", part or name, list(PARTS))
    return stages


def corpus_files(part: str, data_dir: Path) -> list[tuple[Path, Source]]:
    base = Path(data_dir) / PRETRAIN_DIR
    files, missing = [], []
    for source in PARTS[part]:
        matched = sorted(p for p in base.glob(source.pattern) if p.is_file())
        if not matched:
            missing.append(f"{PRETRAIN_DIR}/{source.pattern}")
        files += [(p, source) for p in matched]
    if missing:
        raise MissingDataError(Path(data_dir), {f"corpus {part}": missing})
    return files


def files_fingerprint(paths: Iterable[Path]) -> str:
    """Content hash of the given files plus this module's source (a changed reader = a new corpus)."""
    return hash_files(paths, seed=Path(__file__).read_bytes())


# ------------------------------------------------------------------------------------------ filters

_PMID_ID = re.compile(r"^(\d{7,9})(?:[.\-]|$)")


@functools.lru_cache(maxsize=4)
def evaluation_pmids(data_dir: Path) -> frozenset[str]:
    """PMIDs of every BLURB document where the staged data carry them: instance ids of JNLPBA,
    EBM-PICO, ChemProt, HoC and PubMedQA, plus the derived BC5CDR list."""
    from datamodules.registry import dataset_names, get_dataset

    pmids: set[str] = set()
    for name in dataset_names():
        spec = get_dataset(name)
        if spec.missing_files(data_dir):
            continue
        for instances in spec.read(data_dir).values():
            for instance in instances:
                match = _PMID_ID.match(instance.id)
                if match:
                    pmids.add(match.group(1))
    bc5 = Path(data_dir) / PRETRAIN_DIR / "pubmed-abstracts" / "bc5cdr_pmids.derived.txt"
    if bc5.is_file():
        pmids |= {line.strip() for line in bc5.read_text().splitlines() if line.strip()}
    return frozenset(pmids)


_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """Paragraphs (lines), then sentence ends: '.', '!' or '?' followed by space and a capital/digit,
    not after a common abbreviation or a single capital (initials, 'E. coli' stays whole)."""
    sentences = []
    for paragraph in text.split("\n"):
        start = 0
        for match in _SENTENCE_END.finditer(paragraph):
            before = paragraph[start:match.start()].rsplit(" ", 1)[-1].lstrip("([\"'")
            if re.fullmatch(r"(?:[A-Z]|[A-Z][a-z]{0,2}|al|vs|et|i\.e|e\.g|approx|Fig|Figs|Eq|No|cf)\.", before):
                continue
            sentences.append(paragraph[start:match.start() + 1].strip())
            start = match.end()
        tail = paragraph[start:].strip()
        if tail:
            sentences.append(tail)
    return [s for s in sentences if s]


@dataclass
class CorpusStats:
    documents: int = 0
    words: int = 0
    dropped_short: int = 0
    dropped_duplicate: int = 0
    dropped_eval_pmid: int = 0
    dropped_cap: int = 0
    by_part: dict[str, int] = field(default_factory=dict)


@dataclass
class Corpus:
    """Stages (one for a plain corpus or mixture, several for a sequence) of documents as sentences."""

    name: str
    stages: list[list[list[str]]]  # stage -> document -> sentences
    stats: CorpusStats


def load_corpus(name: str, data_dir: Path, *, max_words: int | None = None, min_words: int = 0,
                dedup: bool = True, exclude_pmids: frozenset[str] | set[str] | None = None, seed: int = 0) -> Corpus:
    """Read, filter, cap and sentence-split a named corpus.

    Within a stage, documents of all its parts are shuffled (seeded) and the stage keeps documents
    until it holds `max_words / number of stages` words (the document that crosses the cap is cut at a
    sentence boundary). With a cap, each part's files are read in a seeded order and reading
    stops once the part has twice the cap in words (so a 20k-word corpus does not read 17M words)."""
    stages_spec = parse_corpus(name)
    stats = CorpusStats()
    seen: set[str] = set()
    stages = []
    cap = None if max_words is None else max(1, max_words // len(stages_spec))
    for stage_parts in stages_spec:
        docs: list[tuple[str, Document]] = []
        for part in stage_parts:
            files = corpus_files(part, data_dir)
            if cap is not None:  # a capped corpus reads files in a seeded order, only as many as needed
                random.Random(seed).shuffle(files)
            part_words = 0
            for path, source in files:
                if cap is not None and part_words >= 2 * cap:
                    break
                for doc in source.reader(path):
                    words = len(doc.text.split())
                    if words < max(min_words, 1):
                        stats.dropped_short += 1
                        continue
                    if exclude_pmids and doc.pmid in exclude_pmids:
                        stats.dropped_eval_pmid += 1
                        continue
                    if dedup:
                        key = hashlib.md5(" ".join(doc.text.lower().split()).encode()).hexdigest()
                        if key in seen:
                            stats.dropped_duplicate += 1
                            continue
                        seen.add(key)
                    docs.append((part, doc))
                    part_words += words
        random.Random(seed).shuffle(docs)
        stage, words_in_stage = [], 0
        for part, doc in docs:
            if cap is not None and words_in_stage >= cap:
                stats.dropped_cap += 1
                continue
            sentences, n = [], 0
            for sentence in split_sentences(doc.text):
                if cap is not None and words_in_stage + n >= cap:
                    break  # the document crossing the cap is cut at a sentence boundary
                sentences.append(sentence)
                n += len(sentence.split())
            stage.append(sentences)
            words_in_stage += n
            stats.by_part[part] = stats.by_part.get(part, 0) + 1
        stats.documents += len(stage)
        stats.words += words_in_stage
        stages.append(stage)
    if not any(stages):
        raise ConfigError(f"pretrain.corpus '{name}': no document is left after filtering "
                          f"(min_words={min_words}, max_words={max_words})")
    return Corpus(name, stages, stats)


def corpus_fingerprint(name: str, data_dir: Path) -> str:
    return files_fingerprint(p for stage in parse_corpus(name) for part in stage
                             for p, _ in corpus_files(part, data_dir))

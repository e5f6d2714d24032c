"""Document readers for pretraining text, one per file format, registered by the name a corpus YAML uses.

Readers yield `Document`s lazily; a file that cannot be read, or is not in its declared format, raises one
`DataFormatError` naming the file and, where known, the line. Tar archives stream one member at a time.

| format          | a document is                                     | fields                            |
|-----------------|---------------------------------------------------|-----------------------------------|
| `medline-xml`   | a MedlineCitation with an abstract (.xml / .xml.gz: the PubMed baseline) | title + abstract |
| `jats-xml`      | a JATS article (PMC OA): title, abstract, body paragraphs; a `.nxml`/`.xml` file, or each such member of a `.tar.gz` / `.tgz` / `.tar` archive (the PMC OA bulk packages) | - |
| `lines`         | a non-empty line (.txt / .gz)                     | -                                 |
| `text-file`     | a whole file (CRAFT `<PMID>.txt`)                 | -                                 |
| `jsonl`         | a JSON object per line (.jsonl / .gz)             | `text` (default [text]), `pmid`   |
| `csv`           | a row                                             | `text` (columns, required), `pmid`|
| `wikiextractor` | a `<doc ...>` block of a WikiExtractor shard      | -                                 |
| `wikitext`      | a ` = Title = ` article of WikiText               | -                                 |
| `gutenberg`     | a hard-wrapped book, paragraphs unwrapped         | -                                 |
| `kd-dti-json`   | an entry of a JSON object PMID -> {title, abstract} | -                               |
"""  # noqa: E501 (a markdown table's row is one line)

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import tarfile
import xml.etree.ElementTree as ET
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from bioablate_core.errors import DataFormatError
from bioablate_core.registry import Registry
from datamodules.textfiles import read_text


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    pmid: str | None = None


@dataclass(frozen=True)
class Format:
    reader: Callable[..., Iterable[Document]]
    fields: bool = False  # takes `text` and `pmid` field names
    costly: bool = False  # parsing costs about as much as tokenizing (XML): worth a pool worker's time
    # reads one member of a tar archive: (archive path, member name, member bytes) -> Document
    read_member: Callable[[Path, str, bytes], Document] | None = None
    member_suffixes: tuple[str, ...] = ()  # the members it reads; the others are skipped


ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz")


def is_archive(path: Path) -> bool:
    return path.name.endswith(ARCHIVE_SUFFIXES)


def archive_members(path: Path, suffixes: tuple[str, ...]) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each regular member of a tar archive whose name ends in one of `suffixes`, streamed.
    `gzip` decompresses, since it raises on a stream cut short where tarfile's would read a shorter archive."""
    with (gzip.open(path, "rb") if path.name.endswith((".gz", ".tgz")) else open(path, "rb")) as raw, \
            tarfile.open(fileobj=raw, mode="r|") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(suffixes):
                yield member.name, tar.extractfile(member).read()
        raw.read()  # to the end of the stream: what follows the archive's end marker must be whole too


FORMATS: Registry[Format] = Registry("corpus format")


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based number, line) of a UTF-8 text file, gzipped or not; a decoding error names its line."""
    with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataFormatError(path, n, f"not UTF-8 text ({e.reason} at byte {e.start} of the line); "
                                               "convert the file to UTF-8") from None
            yield n, line


def read_lines(path: Path) -> Iterator[Document]:
    """One document per non-empty line (PubMedAbstract_1MB.txt)."""
    for n, line in _lines(path):
        if line.strip():
            yield Document(f"{path.name}:{n}", line.strip())


def read_medline_xml(path: Path) -> Iterator[Document]:
    """MEDLINE citation XML (optionally gzipped): title + abstract of each citation with an abstract."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            for _, elem in ET.iterparse(f, events=("end",)):
                if elem.tag != "MedlineCitation":
                    continue
                pmid = elem.findtext("PMID")
                title_elem = elem.find(".//ArticleTitle")
                title = "".join(title_elem.itertext()) if title_elem is not None else ""
                parts = ["".join(a.itertext()) for a in elem.iterfind(".//Abstract/AbstractText")]
                if parts:
                    yield Document(f"pmid:{pmid}", " ".join(p.strip() for p in [title, *parts] if p.strip()),
                                   pmid)
                elem.clear()
    except ET.ParseError as e:
        raise DataFormatError(path, e.position[0], f"not valid MEDLINE XML: {e}") from None


def _fields(path: Path, n: int, row: dict, text: Sequence[str], pmid: str | None) -> tuple[str, str | None]:
    missing = [k for k in text if k not in row]  # a record without the PMID field simply has no PMID
    if missing:
        raise DataFormatError(path, n, f"no field {', '.join(repr(k) for k in missing)} (fields: "
                                       f"{', '.join(map(str, row))}); set the part's `text`/`pmid` keys")
    body = " ".join(str(row[k]).strip() for k in text if row[k] is not None and str(row[k]).strip())
    value = str(row[pmid]).strip() if pmid and row.get(pmid) is not None else ""
    return body, value or None


def read_csv(path: Path, text: Sequence[str] = (), pmid: str | None = None) -> Iterator[Document]:
    """CSV with a header row: the `text` columns joined (e.g. [Title, Abstract]), `pmid` the PMID column.
    Without `text`: PMID/Title/Abstract (processed_data.csv) or medical_abstract, as the header says."""
    lines = _lines(path)
    reader = csv.DictReader(line for _, line in lines)
    header = set(reader.fieldnames or [])
    if not text:
        if "Abstract" in header:
            text, pmid = ("Title", "Abstract"), pmid or ("PMID" if "PMID" in header else None)
        elif "medical_abstract" in header:
            text = ("medical_abstract",)
        else:
            raise DataFormatError(path, 1, f"CSV header {sorted(header)} has no 'Abstract' or 'medical_abstract' "
                                           "column; set the part's `text` to the text column(s)")
    try:
        for row in reader:
            n = reader.line_num
            body, doc_pmid = _fields(path, n, row, text, pmid)
            yield Document(f"pmid:{doc_pmid}" if doc_pmid else f"{path.name}:{n}", body, doc_pmid)
    except csv.Error as e:
        raise DataFormatError(path, reader.line_num, f"not valid CSV: {e}") from None


def read_jsonl(path: Path, text: Sequence[str] = (), pmid: str | None = None) -> Iterator[Document]:
    """One JSON object per line; `text` fields (default: text) joined, `pmid` the PMID field."""
    text = tuple(text) or ("text",)
    for n, line in _lines(path):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataFormatError(path, n, f"not valid JSON: {e.msg} (column {e.colno})") from None
        if not isinstance(row, dict):
            raise DataFormatError(path, n, f"expected a JSON object, got {type(row).__name__}")
        body, doc_pmid = _fields(path, n, row, text, pmid)
        yield Document(f"pmid:{doc_pmid}" if doc_pmid else f"{path.name}:{n}", body, doc_pmid)


def read_kd_dti_json(path: Path) -> Iterator[Document]:
    """KD-DTI JSON: PMID -> {title, abstract}."""
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise DataFormatError(path, e.lineno, f"not valid JSON: {e.msg}") from None
    if not isinstance(data, dict):
        raise DataFormatError(path, 1, "expected a JSON object PMID -> {title, abstract}")
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


def _jats_document(source, where: str, fallback_id: str) -> Document:
    """The document of one JATS article in `source` (a path or file object); `where` names it in errors."""
    try:
        root = ET.parse(source).getroot()
    except ET.ParseError as e:
        raise DataFormatError(where, e.position[0], f"not valid JATS XML: {e}") from None
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
    return Document(f"pmid:{pmid}" if pmid else fallback_id, "\n".join(paragraphs), pmid)


def read_jats_member(path: Path, member: str, data: bytes) -> Document:
    """One article of a tar archive of JATS files; an error names `archive:member` and the line."""
    return _jats_document(io.BytesIO(data), f"{path}:{member}", Path(member).stem)


JATS_SUFFIXES = (".nxml", ".xml")


def read_jats_xml(path: Path) -> Iterator[Document]:
    """JATS (PMC) XML: title, abstract and body paragraphs, without references, floats or sub-articles."""
    yield _jats_document(path, str(path), path.stem)


_DOC_OPEN = re.compile(r'<doc id="([^"]*)"[^>]*>')


def read_wikiextractor(path: Path) -> Iterator[Document]:
    """WikiExtractor shard: <doc id=.. url=.. title=..> title line, text </doc> blocks."""
    doc_id, lines = None, []
    for n, line in _lines(path):
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
    for _, line in _lines(path):
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


FORMATS.register("medline-xml", Format(read_medline_xml, costly=True))
FORMATS.register("jats-xml", Format(read_jats_xml, costly=True, read_member=read_jats_member,
                                    member_suffixes=JATS_SUFFIXES))
FORMATS.register("lines", Format(read_lines))
FORMATS.register("text-file", Format(read_text_file))
FORMATS.register("jsonl", Format(read_jsonl, fields=True))
FORMATS.register("csv", Format(read_csv, fields=True))
FORMATS.register("wikiextractor", Format(read_wikiextractor))
FORMATS.register("wikitext", Format(read_wikitext))
FORMATS.register("gutenberg", Format(read_book))
FORMATS.register("kd-dti-json", Format(read_kd_dti_json))


def unreadable(path: Path, error: Exception) -> DataFormatError:
    """The one-line error for a file that cannot be read (I/O error, truncated or corrupt gzip or tar)."""
    if isinstance(error, UnicodeDecodeError):
        return DataFormatError(path, None, f"not UTF-8 text at byte {error.start}; convert the file to UTF-8")
    return DataFormatError(path, None, f"cannot read the file ({type(error).__name__}: {error}); "
                                       "re-download it or drop it from the corpus")


READ_ERRORS = (OSError, EOFError, zlib.error, tarfile.TarError, UnicodeDecodeError)


def read_documents(path: Path, format_name: str, text: Sequence[str] = (), pmid: str | None = None
                   ) -> Iterator[Document]:
    """The documents of one file, or of each member of a tar archive the format reads members of."""
    fmt = FORMATS.get(format_name)
    if is_archive(path) and fmt.read_member is None:
        raise DataFormatError(path, None, f"a tar archive, which format '{format_name}' does not read; "
                                          "extract it, or list its files with a format that reads archives "
                                          "(jats-xml)")
    try:
        if is_archive(path):
            for member, data in archive_members(path, fmt.member_suffixes):
                yield fmt.read_member(path, member, data)
        elif fmt.fields:
            yield from fmt.reader(path, text=text, pmid=pmid)
        else:
            yield from fmt.reader(path)
    except READ_ERRORS as e:
        raise unreadable(path, e) from None

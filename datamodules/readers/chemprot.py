"""ChemProt (BioCreative VI track 5) as BLURB-style sentence-level chemical–gene candidate pairs.

The corpus is distributed per abstract: `*_abstracts*.tsv` (PMID, title, abstract), `*_entities*.tsv`
(character offsets into `title + " " + abstract`) and `*_relations*.tsv`. BLURB (following BLUE)
classifies *sentence-level* pairs: every CHEMICAL x GENE pair of mentions inside one sentence is
a candidate, labelled with its CPR group when the corpus annotates it with one of the five evaluated
groups, else `false`. No preprocessed copy exists, so the sentence split is ours (`split_sentences`); it
was tuned until the pair counts land within 1% of the paper's Table 3 (18,035 / 11,268 / 15,745).

Decisions (see docs/data.md, "Relation extraction"):

- Pairs whose two mentions overlap (the chemical "tyrosine" inside the gene "tyrosine kinase"; 1,647 /
  946 / 1,373 pairs, 15 of them positive) are kept, as BLUE did (it dummified them as `@CHEM-GENE$`);
  dropping them undercounts the paper by 7-9%.
- A pair annotated with two evaluated groups (10 / 4 / 14 pairs in train / dev / test) gets the
  numerically smallest group, so every pair is exactly one instance.
- No annotated relation is lost to a sentence boundary: every gold pair lies inside one sentence.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from bioablate_core.errors import DataFormatError
from datamodules.instances import Mention, RelationInstance
from datamodules.spec import Splits
from datamodules.textfiles import decode_utf8, read_bytes

# Bumped whenever the instances this module's readers return change: it enters their datasets'
# fingerprints in place of the code's bytes (DatasetSpec.fingerprint).
READER_VERSION = 1

# Only these CPR groups are evaluated (ChemProt guidelines, BLURB); everything else is `false`.
EVALUATED_GROUPS = ("CPR:3", "CPR:4", "CPR:5", "CPR:6", "CPR:9")
NEGATIVE_LABEL = "false"

# split -> (folder, file stem, file suffix): the test files carry an extra `_gs` suffix.
_SPLIT_FILES = {
    "train": ("chemprot_training", "chemprot_training", ""),
    "dev": ("chemprot_development", "chemprot_development", ""),
    "test": ("chemprot_test_gs", "chemprot_test", "_gs"),
}

# The separator between title and abstract that the entity offsets assume.
_TITLE_SEPARATOR = " "

_ENTITY_TYPES = {"CHEMICAL": "CHEMICAL", "GENE-Y": "GENE", "GENE-N": "GENE"}


def chemprot_files(split: str) -> dict[str, str]:
    """Paths, relative to the data directory, of a split's abstracts, entities and relations files."""
    folder, stem, suffix = _SPLIT_FILES[split]
    return {
        kind: f"ChemProt/{folder}/{stem}_{kind}{suffix}.tsv"
        for kind in ("abstracts", "entities", "relations")
    }


# --------------------------------------------------------------------------------------------------
# Sentence splitting


# Tokens that end with a period without ending the sentence, even before a capital or a digit:
# "e.g. TNF", "vs. Day 5", "et al. (2004)", "Fig. 2", "approx. 5 mg", "Streptomyces sp. MK931".
# Case-sensitive on purpose: "NO." (nitric oxide) and "No." (number) must differ.
_ABBREVIATIONS = frozenset(
    """eg ie cf viz vs al approx ca resp sp spp subsp var
       Fig Figs fig figs Ref Refs ref refs Eq Eqs Exp Expt No Nos Vol Dr Drs Prof Mr Mrs Ms""".split()
)

# Candidate boundary: terminal punctuation, optionally closing quotes/brackets, then whitespace. A full
# stop glued to the next word ("Alzheimer's disease.The drugs ...", structured abstracts that lost their
# line breaks) is not a boundary: the annotators did not split there either, and gold relations span
# such stops (3 in the training set).
_TERMINATOR = re.compile(r"[.?!][\"'\u201d\u2019)\]]*(?=\s)")
_NEXT_TOKEN = re.compile(r"\s+(\S+)")
_LAST_TOKEN = re.compile(r"(\S+)\.$")
_SINGLE_CAPITAL = re.compile(r"[A-Z]")
# Dotted abbreviations: "e.g.", "i.v.", "i.c.v.", "U.S." (the token excludes the final period).
_DOTTED = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
# A preceding initial or comma marks an author list: "Wanders, R. J. A. Carnitine ..."
_AUTHOR_CONTEXT = re.compile(r"(?:,|\b[A-Z]\.)\s+$")
_ENUMERATION = re.compile(r"\(?(?:\d{1,2}|[a-z]|[ivx]{1,4})[.)]")


def _starts_sentence(token: str) -> bool:
    """Whether `token` can begin a sentence.

    Capitals, digits and opening brackets do ("The", "5-HT", "[3H]dopamine", "(1)"). A lowercase token
    only does when it has a capital or digit inside (gene and chemical names: "mRNA", "p53",
    "alpha-Tocopherol"); plain lowercase words after a period are continuations of species names
    ("E. coli"), routes ("i.v. injection") and similar abbreviations far more often than new sentences.
    """
    first = token[0]
    if first.isupper() or first.isdigit() or first in "([":
        return True
    return first.isalpha() and any(ch.isupper() or ch.isdigit() for ch in token)


def _ends_sentence(before: str) -> bool:
    """Whether the text up to a candidate boundary (ending in terminal punctuation) really ends there."""
    match = _LAST_TOKEN.search(before)
    if match is None:  # "?" / "!" / closing bracket: always terminal
        return True
    token = match.group(1).lstrip("([\"'")
    # Dotted abbreviations are followed by what they qualify more often than they end a sentence:
    # "after i.v. mCPP", "provoked by i.v. CCK-8", "the U.S. Food and Drug Administration".
    if token in _ABBREVIATIONS or _DOTTED.fullmatch(token):
        return False
    # A single capital is usually the end of a name ("protein kinase C.", "vitamin K."); only inside an
    # author list ("Wanders, R. J. A.") is it an initial.
    if _SINGLE_CAPITAL.fullmatch(token):
        return _AUTHOR_CONTEXT.search(before[: match.start(1)]) is None
    return True


def split_sentences(text: str, protected: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    """Character spans (start, end) of the sentences of `text`, whitespace trimmed.

    A boundary is terminal punctuation followed by whitespace and a token that can start a sentence
    (`_starts_sentence`), unless the punctuation closes an abbreviation or initial (`_ends_sentence`) or
    the boundary falls inside one of the `protected` (start, end) spans: a mention cut in two could pair
    with nothing (on ChemProt the rules above never cut one; this guarantees it for any text). An
    enumeration marker ("2.", "(b)") left alone as a sentence is glued to the sentence it numbers.
    """
    inside = bytearray(len(text) + 1)  # inside[i]: a cut before character i would split a mention
    for start, end in protected:
        start, end = max(start + 1, 0), min(end, len(text))
        if start < end:
            inside[start:end] = b"\x01" * (end - start)

    cuts = [0]
    for match in _TERMINATOR.finditer(text):
        end = match.end()
        following = _NEXT_TOKEN.match(text, end)
        if following is None or inside[end] or inside[following.start(1)]:
            continue
        if _starts_sentence(following.group(1)) and _ends_sentence(text[cuts[-1] : end]):
            cuts.append(following.start(1))
    cuts.append(len(text))

    spans: list[tuple[int, int]] = []
    for start, end in zip(cuts, cuts[1:]):
        stripped = text[start:end].strip()
        if not stripped:
            continue
        start += len(text[start:end]) - len(text[start:end].lstrip())
        end = start + len(stripped)
        if spans and _ENUMERATION.fullmatch(text[spans[-1][0] : spans[-1][1]]):
            start = spans.pop()[0]
        spans.append((start, end))
    return spans


# --------------------------------------------------------------------------------------------------
# File parsing


@dataclass(frozen=True)
class _Entity:
    id: str
    type: str  # CHEMICAL or GENE
    start: int
    end: int


def _rows(path: Path, columns: int, what: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of every non-empty line; exactly `columns` TAB-separated fields each."""
    # split on "\n" only: a stray "\r" or U+2028 inside an abstract is text, not a line break
    lines = decode_utf8(path, read_bytes(path)).split("\n")
    for number, line in enumerate(lines, start=1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != columns:
            raise DataFormatError(
                path, number, f"expected {columns} TAB-separated columns ({what}), got {len(fields)}"
            )
        yield number, fields


@dataclass(frozen=True)
class _Document:
    text: str  # title + separator + abstract: what the entity offsets index into
    title_length: int


def _read_abstracts(path: Path) -> dict[str, _Document]:
    documents: dict[str, _Document] = {}
    for number, (pmid, title, abstract) in _rows(path, 3, "PMID, title, abstract"):
        if pmid in documents:
            raise DataFormatError(path, number, f"duplicate PMID {pmid}")
        documents[pmid] = _Document(title + _TITLE_SEPARATOR + abstract, len(title))
    return documents


def _read_entities(path: Path, documents: dict[str, _Document]) -> dict[str, list[_Entity]]:
    entities: dict[str, list[_Entity]] = defaultdict(list)
    seen: set[tuple[str, str]] = set()
    what = "PMID, T<n>, CHEMICAL|GENE-Y|GENE-N, start, end, text"
    for number, (pmid, ent_id, typ, start, end, surface) in _rows(path, 6, what):
        if pmid not in documents:
            raise DataFormatError(path, number, f"PMID {pmid} is not in the abstracts file")
        if (pmid, ent_id) in seen:
            raise DataFormatError(path, number, f"duplicate entity id {ent_id} in PMID {pmid}")
        seen.add((pmid, ent_id))
        if typ not in _ENTITY_TYPES:
            raise DataFormatError(
                path, number, f"expected entity type CHEMICAL, GENE-Y or GENE-N, got {typ!r}"
            )
        if not (start.isdigit() and end.isdigit()):
            raise DataFormatError(path, number, f"expected integer offsets, got {start!r} {end!r}")
        # Checking the surface here validates the title-separator assumption for every document.
        if documents[pmid].text[int(start) : int(end)] != surface:
            raise DataFormatError(
                path, number, f"offsets {start}-{end} do not cover the entity text {surface!r}"
            )
        entities[pmid].append(_Entity(ent_id, _ENTITY_TYPES[typ], int(start), int(end)))
    return entities


def _read_relations(path: Path, entities: dict[str, list[_Entity]]) -> dict[tuple[str, str, str], str]:
    """(PMID, chemical id, gene id) -> label, for the pairs annotated with an evaluated CPR group."""
    types = {(pmid, e.id): e.type for pmid, ents in entities.items() for e in ents}
    groups: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    what = "PMID, CPR:<k>, evaluation flag, fine label, Arg1:T<a>, Arg2:T<b>"
    for number, (pmid, group, flag, _fine, arg1, arg2) in _rows(path, 6, what):
        if flag not in ("Y ", "N "):
            raise DataFormatError(path, number, f"expected evaluation flag 'Y ' or 'N ', got {flag!r}")
        if not (arg1.startswith("Arg1:") and arg2.startswith("Arg2:")):
            raise DataFormatError(path, number, f"expected Arg1:T<a> Arg2:T<b>, got {arg1!r} {arg2!r}")
        chem, gene = arg1[5:], arg2[5:]
        if types.get((pmid, chem)) != "CHEMICAL" or types.get((pmid, gene)) != "GENE":
            raise DataFormatError(
                path,
                number,
                f"expected Arg1 a CHEMICAL and Arg2 a GENE entity of PMID {pmid}, got {chem}, {gene}",
            )
        if flag == "Y " and group in EVALUATED_GROUPS:
            groups[(pmid, chem, gene)].add(group)
    return {pair: min(labels, key=lambda g: int(g[4:])) for pair, labels in groups.items()}


# --------------------------------------------------------------------------------------------------
# Pairs


def document_sentences(document: _Document, entities: list[_Entity]) -> list[tuple[int, int]]:
    """Sentence spans of a document. The title is split on its own, so that its end is always a
    boundary: a title ending in an abbreviation ("... from Streptomyces sp.") would otherwise swallow
    the first abstract sentence."""
    protected = [(e.start, e.end) for e in entities]
    title = split_sentences(document.text[: document.title_length], protected)
    offset = document.title_length + len(_TITLE_SEPARATOR)
    shifted = [(s - offset, e - offset) for s, e in protected]
    abstract = split_sentences(document.text[offset:], shifted)
    return title + [(start + offset, end + offset) for start, end in abstract]


def _pairs(
    pmid: str, document: _Document, entities: list[_Entity], labels: dict[tuple[str, str, str], str]
) -> list[RelationInstance]:
    """All within-sentence CHEMICAL x GENE candidate pairs of one document."""
    ordered = sorted(entities, key=lambda e: (e.start, e.end, e.id))
    text = document.text
    instances = []
    for index, (start, end) in enumerate(document_sentences(document, ordered)):
        inside = [e for e in ordered if start <= e.start and e.end <= end]
        sentence = text[start:end]
        for chem in (e for e in inside if e.type == "CHEMICAL"):
            for gene in (e for e in inside if e.type == "GENE"):
                instances.append(
                    RelationInstance(
                        id=f"{pmid}.s{index}.{chem.id}.{gene.id}",
                        text=sentence,
                        head=Mention(chem.start - start, chem.end - start, "CHEMICAL"),
                        tail=Mention(gene.start - start, gene.end - start, "GENE"),
                        label=labels.get((pmid, chem.id, gene.id), NEGATIVE_LABEL),
                    )
                )
    return instances


def read_chemprot_split(data_dir: Path, split: str) -> list[RelationInstance]:
    """Candidate pairs of one split ("train", "dev" or "test"), documents in file order."""
    files = {kind: Path(data_dir) / rel for kind, rel in chemprot_files(split).items()}
    documents = _read_abstracts(files["abstracts"])
    entities = _read_entities(files["entities"], documents)
    labels = _read_relations(files["relations"], entities)
    return [
        instance
        for pmid, document in documents.items()
        for instance in _pairs(pmid, document, entities.get(pmid, []), labels)
    ]


def read_chemprot(data_dir: Path) -> Splits:
    """ChemProt train / dev / test as sentence-level candidate pairs (BLURB Table 3 units)."""
    return {split: read_chemprot_split(data_dir, split) for split in _SPLIT_FILES}

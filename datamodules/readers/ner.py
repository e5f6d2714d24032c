"""Readers for the five BLURB NER datasets (Crichton et al. 2017 IOB files, plus JNLPBA train from brat).

BC5CDR-chem, BC5CDR-disease, NCBI-disease and BC2GM are staged as Crichton's `{train,devel,test}.tsv`
and read as they are. JNLPBA's Crichton `train.tsv` could not be staged (MANIFEST section 1), so its
training split is rebuilt from the original brat standoff abstracts: the 2 000 JNLPBA training
abstracts minus the 200 that Crichton moved into `devel.tsv`, which gives exactly the paper's 1 800
abstracts and 46 750 mentions.

BLURB scores every NER dataset with one collapsed entity type, so all readers take a `collapse_type`
that replaces the type of every tag (JNLPBA's five types included) before spans are built.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from pathlib import Path

from bioablate_core.errors import DataFormatError
from datamodules.instances import Span, TaggingInstance, iob_to_spans
from datamodules.readers import bound
from datamodules.spec import Reader, Splits, shown
from datamodules.textfiles import conll_blocks, open_text, read_text

# Bumped whenever the instances this module's readers return change: it enters their datasets'
# fingerprints in place of the code's bytes (DatasetSpec.fingerprint).
READER_VERSION = 1

# Crichton file name per split; "devel" is their name for the development set.
CRICHTON_FILES = {"train": "train.tsv", "dev": "devel.tsv", "test": "test.tsv"}

_TAG = re.compile(r"O|[BI]-\S+")


def _format_error(path: Path, line_number: int, line: str) -> DataFormatError:
    return DataFormatError(
        path,
        line_number,
        f"expected 'token<TAB>tag' with a non-empty token and a tag O, B-<type> or I-<type>, got {shown(line)}; "
        "fix or remove this line (sentences are separated by blank lines)",
    )


def read_conll_file(path: Path, collapse_type: str | None = None) -> list[TaggingInstance]:
    """Read a Crichton-style IOB file: `token<TAB>tag` lines, a blank line after each sentence.

    `-DOCSTART-` lines (JNLPBA marks every abstract with one) carry no tokens and are skipped.
    Instance ids are `<file stem>-<sentence index>`. With `collapse_type`, every tag's type is replaced
    before spans are built, which is how BLURB merges e.g. adjacent `B-protein I-DNA` into one mention.
    Trailing whitespace and a missing final blank line are accepted.
    """
    path = Path(path)
    instances: list[TaggingInstance] = []
    # Validating each distinct tag once keeps the loop cheap on the 370k-line BC2GM train file.
    known_tags: dict[str, str] = {}
    for sentence in conll_blocks(path):
        tokens: list[str] = []
        tags: list[str] = []
        for line_number, line in sentence:
            if line.startswith("-DOCSTART-"):
                continue
            token, sep, tag = line.partition("\t")
            token, tag = token.strip(), tag.strip()
            collapsed = known_tags.get(tag)
            if collapsed is None:
                if not _TAG.fullmatch(tag):
                    raise _format_error(path, line_number, line)
                collapsed = tag if tag == "O" or collapse_type is None else f"{tag[0]}-{collapse_type}"
                known_tags[tag] = collapsed
            if not sep or not token:
                raise _format_error(path, line_number, line)
            tokens.append(token)
            tags.append(collapsed)
        if tokens:
            instances.append(TaggingInstance(f"{path.stem}-{len(instances)}", tuple(tokens), iob_to_spans(tags)))
    return instances


def read_crichton(folder: str, collapse_type: str | None) -> Reader:
    """A reader for `<data_dir>/<folder>/{train,devel,test}.tsv` (a partial of a module-level function, not a
    closure: DDP's spawn start method pickles the dataset spec that holds it)."""
    return bound(_read_crichton, folder, collapse_type)


def _read_crichton(folder: str, collapse_type: str | None, data_dir: Path) -> Splits:
    base = Path(data_dir) / folder
    return {split: read_conll_file(base / name, collapse_type) for split, name in CRICHTON_FILES.items()}


# ---------------------------------------------------------------------------------------------------
# JNLPBA training split from brat standoff

JNLPBA_DIR = "JNLPBA"
JNLPBA_STANDOFF_DIR = "JNLPBA/standoff-train"
JNLPBA_DEVEL_IDS = "JNLPBA/crichton_devel_standoff_ids.txt"

# GENIA-style tokenization, reverse-engineered from the staged devel.tsv: tokenizing the standoff text of
# its 200 abstracts (with the cuts at mention boundaries below) reproduces 99.8% of its tokens. GENIA
# splits off brackets, commas (even inside numbers: "1 , 25-dihydroxyvitamin"), colons, semicolons,
# quotes, `=`, `%`, `<`, `>` and sentence-final periods, but keeps hyphens, slashes, `+`, and periods
# and primes followed by more word ("NF-kappa", "C/EBP", "Ca2+", "PU.1", "0.001", "5'-flanking")
# inside a word. GENIA also splits a word where a mention starts or ends ("IL-2 -induced"); `_tokenize`
# does the same by cutting tokens at mention offsets. Most remaining differences are author initials
# in reference lists, where no mention occurs.
_SPLIT_CHARS = r"""\s()\[\]{},;:"'`?!<>=%."""
_WORD_CHAR = f"[^{_SPLIT_CHARS}]"
_TOKEN = re.compile(
    rf"""
      can(?=not\b)                          # GENIA writes "cannot" as "can not"
    | '[sS]\b                               # possessive 's
    | (?:[A-Za-z]\.){{2,}}(?!{_WORD_CHAR})   # dotted abbreviations: e.g. i.e. u.v.
    | [A-Z]\.(?=\s+[a-z]|\s*[A-Z]\.|,)      # initials: "P. aeruginosa", "Luciw, P. A.,"
    | (?:{_WORD_CHAR}|(?<=\d)'(?={_WORD_CHAR})|\.(?={_WORD_CHAR}))+  # a word
    | \S                                    # any other single character
    """,
    re.VERBOSE,
)
_SENTENCE_END = {".", "?", "!"}


def _read_brat_entities(path: Path, text: str) -> list[tuple[int, int, str]]:
    """`(start, end, type)` of the `T` lines of a brat `.ann` file, each checked against the text."""
    entities: list[tuple[int, int, str]] = []
    with open_text(path) as handle:
        for line_number, raw in enumerate(handle, start=1):
            line = raw.rstrip("\n")
            if not line.startswith("T"):
                continue
            fields = line.split("\t")
            offsets = fields[1].split() if len(fields) == 3 else []
            if len(offsets) != 3 or not (offsets[1].isdigit() and offsets[2].isdigit()):
                raise DataFormatError(
                    path,
                    line_number,
                    f"expected 'T<n><TAB><type> <start> <end><TAB><surface>' (discontinuous entities are not "
                    f"supported), got {shown(line)}",
                )
            start, end = int(offsets[1]), int(offsets[2])
            if text[start:end] != fields[2]:
                raise DataFormatError(
                    path,
                    line_number,
                    f"entity surface {fields[2]!r} does not match the text at {start}-{end} "
                    f"({text[start:end]!r}); the .ann file does not belong to its .txt file",
                )
            entities.append((start, end, offsets[0]))
    return entities


def _outermost(entities: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Drop entities nested in (or crossing into) an earlier, longer one: BIO tags hold one layer."""
    kept: list[tuple[int, int, str]] = []
    for entity in sorted(entities, key=lambda e: (e[0], -e[1])):
        if not kept or entity[0] >= kept[-1][1]:
            kept.append(entity)
    return kept


def _tokenize(text: str, cuts: list[int]) -> tuple[list[tuple[int, int]], set[int]]:
    """Token character spans of `text`, with tokens also cut at every offset in `cuts` (sorted).

    Cutting puts a mention boundary that falls inside a word ("IL-2-induced" with the entity "IL-2") on
    a token boundary, as GENIA's own tokenization does, so no mention is lost. Also returns the offsets
    that actually cut a token.
    """
    spans: list[tuple[int, int]] = []
    used: set[int] = set()
    for match in _TOKEN.finditer(text):
        start, end = match.span()
        for cut in cuts[bisect_right(cuts, start) : bisect_left(cuts, end)]:
            spans.append((start, cut))
            used.add(cut)
            start = cut
        spans.append((start, end))
    return spans, used


def _sentence_starts(text: str, tokens: list[tuple[int, int]], inside: list[bool]) -> list[int]:
    """Indices of the tokens that start a sentence.

    A sentence ends at a line break (the title is its own line) unless the line ends with a colon
    (GENIA keeps a structured abstract's "RESULTS:" with its first sentence), and after a `.`, `?` or
    `!` token followed by a token that starts with an uppercase letter; abbreviations such as "e.g."
    are single tokens and so never end a sentence. No sentence starts inside a mention (`inside[i]`:
    token `i` continues a mention), so every mention stays whole. On the 200 devel abstracts this
    gives 1 744 sentences where GENIA has 1 739.
    """
    starts = [0]
    for i in range(1, len(tokens)):
        if inside[i]:
            continue
        prev_start, prev_end = tokens[i - 1]
        start = tokens[i][0]
        previous = text[prev_start:prev_end]
        if "\n" in text[prev_end:start] and previous != ":":
            starts.append(i)
        elif previous in _SENTENCE_END and text[start].isupper():
            starts.append(i)
    return starts


def read_standoff_document(
    txt_path: Path, ann_path: Path, collapse_type: str | None
) -> tuple[list[TaggingInstance], int]:
    """One brat abstract as sentences, and how many of its mentions needed a token cut.

    Overlapping or nested entities would not fit one BIO layer; the outermost one is kept, and of two
    crossing ones the earlier (the staged JNLPBA training files contain neither, so all 46 750
    mentions survive). Instance ids are `<document id>-<sentence index>`. Tokens are substrings of the
    text, so quotes stay `"` where GENIA writes `` and ''.
    """
    text = read_text(txt_path)
    entities = _outermost(_read_brat_entities(ann_path, text))
    cuts = sorted({offset for start, end, _ in entities for offset in (start, end)})
    tokens, used_cuts = _tokenize(text, cuts)
    token_starts = [start for start, _ in tokens]

    spans: list[Span] = []
    inside = [False] * len(tokens)
    for start, end, typ in entities:
        first = bisect_left(token_starts, start)
        last = bisect_left(token_starts, end)
        inside[first + 1 : last] = [True] * (last - first - 1)
        spans.append(Span(first, last, collapse_type if collapse_type is not None else typ))
    needed_cut = sum(start in used_cuts or end in used_cuts for start, end, _ in entities)

    bounds = _sentence_starts(text, tokens, inside) + [len(tokens)]
    sentences: list[TaggingInstance] = []
    spans_left = iter(spans)
    span = next(spans_left, None)
    for begin, end in zip(bounds, bounds[1:]):
        sentence_spans = []
        while span is not None and span.start < end:
            sentence_spans.append(Span(span.start - begin, span.end - begin, span.label))
            span = next(spans_left, None)
        words = tuple(text[s:e] for s, e in tokens[begin:end])
        sentences.append(TaggingInstance(f"{txt_path.stem}-{len(sentences)}", words, tuple(sentence_spans)))
    return sentences, needed_cut


def jnlpba_train_document_ids(data_dir: Path) -> list[str]:
    """The 1 800 standoff ids of BLURB's JNLPBA train split: all training abstracts but Crichton's devel."""
    data_dir = Path(data_dir)
    devel_ids = set(read_text(data_dir / JNLPBA_DEVEL_IDS).split())
    all_ids = sorted(p.stem for p in (data_dir / JNLPBA_STANDOFF_DIR).glob("*.txt"))
    return [doc_id for doc_id in all_ids if doc_id not in devel_ids]


def read_jnlpba_standoff(
    data_dir: Path, doc_ids: list[str], collapse_type: str | None
) -> tuple[list[TaggingInstance], int]:
    """Sentences of the given standoff abstracts, in order, and how many mentions needed a token cut."""
    folder = Path(data_dir) / JNLPBA_STANDOFF_DIR
    instances: list[TaggingInstance] = []
    needed_cut = 0
    for doc_id in doc_ids:
        txt_path, ann_path = folder / f"{doc_id}.txt", folder / f"{doc_id}.ann"
        sentences, cut = read_standoff_document(txt_path, ann_path, collapse_type)
        instances.extend(sentences)
        needed_cut += cut
    return instances, needed_cut


def read_jnlpba(data_dir: Path, collapse_type: str | None = "Entity") -> Splits:
    """JNLPBA: dev/test from Crichton's `devel.tsv`/`test.tsv`, train rebuilt from brat standoff."""
    data_dir = Path(data_dir)
    train, _ = read_jnlpba_standoff(data_dir, jnlpba_train_document_ids(data_dir), collapse_type)
    return {
        "train": train,
        "dev": read_conll_file(data_dir / JNLPBA_DIR / "devel.tsv", collapse_type),
        "test": read_conll_file(data_dir / JNLPBA_DIR / "test.tsv", collapse_type),
    }

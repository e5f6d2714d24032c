"""Tagged tokens (task types ner and pico): CoNLL column files, and the tag rules JSONL shares with them.

A CoNLL line holds a token and its tag in the columns the YAML's `columns:` names (default: the first
and the last; any other column is ignored), TAB-separated or, on lines without a TAB, separated by
spaces. A blank line ends a sentence. `-DOCSTART-` lines end a document; one written as
`-DOCSTART- (<id>)` (EBM-PICO) names it, and its sentences get the ids `<id>-<k>`, as the built-in
PICO reader gives them; elsewhere ids are `<file stem>-<n>`, as the built-in NER reader gives them.

Tags are read in the scheme they ship in, found from the prefixes the file uses (said once per file where
the ends of mentions are marked):
IOB2 or IO (`B-`, `I-`), IOBES / BIOES (`E-` ends a mention, `S-` is a one-word one) or BILOU (`L-`, `U-`
for the same), typed (`B-Chemical`, `S-PAR`) or untyped (`B`, `S`: their type is `entity_type`). They
become spans as their scheme means them: IOB2 and IO the way conlleval reads them, IOBES and BILOU by
`datamodules.tagging`'s BIOUL decoding (E-/L- close a mention, S-/U- are one). The entity F1 a run reports
equals conlleval's on IOB2 tags, and on IOBES tags converted to IOB2 first (conlleval's `E-` is IOE's, and
it knows no `S-`).
The YAML's `tagging:` (bio, io, iobes, bilou; default auto: detected) declares the scheme instead: a tag
outside it is refused, naming the file, the line and the scheme, and the scheme is said for every file.
`collapse_type` renames every type before spans are built (BLURB scores NER with one type). A YAML without
`labels` (nor `entity_type`, `collapse_type`) takes the entity types of its training split, sorted
(`entity_types`); a type that only dev or test use is then an error naming it.
"""

from __future__ import annotations

import logging
import re
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path

from bioablate_core.errors import DataFormatError
from datamodules.custom.lines import text_lines
from datamodules.custom.schema import TAGGINGS, Definition
from datamodules.instances import TaggingInstance, iob_to_spans
from datamodules.spec import shown
from datamodules.split_checks import SplitSummary
from datamodules.tagging import get_scheme

log = logging.getLogger("bioablate")
_TAG = re.compile(r"O|[BIESLU](?:-\S+)?")
_AS_BIOUL = {"S": "U", "E": "L"}  # IOBES / BIOES prefixes as their BILOU equivalents
BIOUL = get_scheme("bioul")
_SCHEME_NAMES = (({"S", "E"}, "IOBES"), ({"U", "L"}, "BILOU"), ({"B"}, "IOB2"), ({"I"}, "IO"))
_DECLARED_NAMES = {"bio": "IOB2", "io": "IO", "iobes": "IOBES", "bilou": "BILOU"}  # `tagging:` -> as said
_DOCSTART = re.compile(r"-DOCSTART-(?:\s+\((\S+)\))?")


class TagRules:
    """Checks and normalizes the tags of one dataset: every tag becomes `O` or `B-<type>` / `I-<type>`
    with a type among the YAML's `labels` (any type while the labels are being read from the training
    split: `labels_from_train` and no labels yet)."""

    def __init__(self, definition: Definition):
        self.definition = definition
        self._known: dict[str, str] = {"O": "O"}  # tag as written -> normalized (most files use few tags)
        self.prefixes: set[str] = set()  # the prefixes written, for the scheme said (`scheme`)

    def scheme(self) -> str:
        """The scheme the tags read so far were written in (IOBES, BILOU, IOB2 or IO): the declared one, if any."""
        if self.definition.tagging in _DECLARED_NAMES:
            return _DECLARED_NAMES[self.definition.tagging]
        return next((name for marks, name in _SCHEME_NAMES if marks & self.prefixes), "IOB2")

    def normalize(self, tag: str, path: Path, line: int) -> str:
        known = self._known.get(tag)
        if known is not None:
            return known
        d, said = self.definition, shown(tag)  # the tag as an error line quotes it
        if not _TAG.fullmatch(tag):
            raise DataFormatError(path, line, f"tag {said} is not O or a prefix B, I, E, S, L or U, alone or "
                                              "as <prefix>-<type> (IOB2, IO, IOBES / BIOES or BILOU tags)")
        prefix, _, typ = tag.partition("-")
        if prefix not in TAGGINGS[d.tagging]:
            owners = ", ".join(name for name, allowed in TAGGINGS.items() if name != "auto" and prefix in allowed)
            raise DataFormatError(path, line, f"tag {said} is outside tagging scheme {d.tagging} ({self.scheme()}: "
                                              f"O and {', '.join(TAGGINGS[d.tagging])} tags), the key 'tagging' of "
                                              f"{d.source}; {prefix}- tags are written in {owners}: declare that, or "
                                              "tagging: auto to detect it")
        self.prefixes.add(prefix)
        prefix = _AS_BIOUL.get(prefix, prefix)
        if not typ:
            if d.entity_type is None and d.collapse_type is None:
                raise DataFormatError(path, line, f"untyped tag {said}: set the key 'entity_type' in {d.source} "
                                                  "to name the type of B/I tags")
            typ = d.entity_type or d.collapse_type
        typ = d.collapse_type or typ
        if typ not in d.labels and (d.labels or not d.labels_from_train):  # no labels yet: reading them
            if d.labels_from_train:
                raise DataFormatError(path, line, f"entity type {shown(typ)} (tag {said}) is not among the types of "
                                                  f"the training split {list(d.labels)}, which {d.source} takes as "
                                                  "its labels; list every type under 'labels' or set collapse_type")
            raise DataFormatError(path, line, f"entity type {shown(typ)} (tag {said}) is not in labels "
                                              f"{list(d.labels)} of {d.source}; add it there or set collapse_type")
        self._known[tag] = f"{prefix}-{typ}"
        return self._known[tag]


def tags_to_spans(tags: list[str]) -> tuple:
    """Normalized tags (`TagRules`) -> spans: with an end marked (L-, U-), BIOUL's decoding, else IOB2's."""
    return BIOUL.decode(tags) if any(tag[0] in "LU" for tag in tags) else iob_to_spans(tags)


_SAID: set[tuple[str, str]] = set()  # (file, scheme) already said


# A file above this size is read on demand (`ConllSentences`): held whole, a sentence's objects take
# about 12 times its bytes, and a run may use 32 of a million sentences.
STREAMED_ABOVE = 8 << 20


def _sentences(definition: Definition, path: Path, rules: TagRules, start: int = 0) -> Iterator[tuple]:
    """(byte offset of its first line, document id or None, its position in that document, tokens,
    normalized tags) of each sentence of `path` from byte `start` (a sentence's first line)."""
    token_column, tag_column = definition.columns["token"], definition.columns["tag"]
    width = max(c + 1 if c >= 0 else -c for c in (token_column, tag_column))
    tokens: list[str] = []
    tags: list[str] = []
    first = start
    document: str | None = None  # the id of the current -DOCSTART- (<id>) document
    in_document = 0  # sentences so far in that document
    for number, offset, raw in text_lines(path, start):
        line = raw.strip()
        if not line or line.startswith("-DOCSTART-"):
            if tokens:
                yield first, document, in_document, tuple(tokens), tags
                in_document += 1
                tokens, tags = [], []
            match = _DOCSTART.match(line) if line else None
            if match and match.group(1):
                document, in_document = match.group(1), 0
            continue
        if not tokens:
            first = offset
        parts = line.split("\t") if "\t" in line else line.split()
        if len(parts) < width:
            raise DataFormatError(path, number, f"expected at least {width} columns (token in column "
                                                f"{token_column}, tag in column {tag_column}: the key "
                                                f"'columns' of {definition.source}), got {len(parts)}")
        token = parts[token_column].strip()
        if not token:
            raise DataFormatError(path, number, f"empty token in column {token_column}")
        tokens.append(token)
        tags.append(rules.normalize(parts[tag_column].strip(), path, number))
    if tokens:
        yield first, document, in_document, tuple(tokens), tags


def _ident(path: Path, document: str | None, in_document: int, position: int) -> str:
    return f"{document}-{in_document}" if document is not None else f"{path.stem}-{position}"


class ConllSentences(Sequence):
    """A large CoNLL file's sentences, read from the file when indexed or iterated: it holds each
    sentence's byte offset and id (a few bytes each) and the `SplitSummary` the split checks read, not the
    sentences. `take` reads a subsample's sentences; a file changed since it was indexed is refused."""

    def __init__(self, definition: Definition, path: Path, rules: TagRules):
        self.definition, self.path, self.rules = definition, path, rules
        self.starts, self.in_document, self.document = array("q"), array("q"), array("q")
        self.documents: list[str] = []  # -DOCSTART- (<id>) ids; `document` indexes them (-1: none)
        self.summary = SplitSummary()
        self._stamp = self._now()
        index: dict[str, int] = {}
        for start, document, in_document, tokens, tags in _sentences(definition, path, rules):
            position = len(self.starts)
            if document is not None and document not in index:
                index[document] = len(self.documents)
                self.documents.append(document)
            self.starts.append(start)
            self.in_document.append(in_document)
            self.document.append(-1 if document is None else index[document])
            self.summary.add(TaggingInstance(_ident(path, document, in_document, position), tokens,
                                             tags_to_spans(tags)))

    def _now(self) -> tuple[int, int]:
        stat = self.path.stat()
        return stat.st_size, stat.st_mtime_ns

    def _check(self) -> None:
        if self._now() != self._stamp:
            raise DataFormatError(self.path, None, "changed since it was read; run the command again")

    def _instance(self, position: int, tokens: tuple[str, ...], tags: list[str]) -> TaggingInstance:
        d = self.document[position]
        ident = _ident(self.path, self.documents[d] if d >= 0 else None, self.in_document[position], position)
        return TaggingInstance(ident, tokens, tags_to_spans(tags))

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, position):
        if isinstance(position, slice):
            return self.take(range(*position.indices(len(self))))
        if not -len(self) <= position < len(self):
            raise IndexError(position)
        return self.take([position % len(self)])[0]

    def take(self, positions) -> list[TaggingInstance]:
        """The sentences at `positions`, in that order, each read from its offset."""
        self._check()
        out = []
        for position in positions:
            _, _, _, tokens, tags = next(_sentences(self.definition, self.path, self.rules, self.starts[position]))
            out.append(self._instance(position, tokens, tags))
        return out

    def __iter__(self) -> Iterator[TaggingInstance]:
        self._check()
        for position, (_, _, _, tokens, tags) in enumerate(_sentences(self.definition, self.path, self.rules)):
            yield self._instance(position, tokens, tags)


def read_conll(definition: Definition, path: Path,
               streamed_above: int = STREAMED_ABOVE) -> list[TaggingInstance] | ConllSentences:
    """The sentences of CoNLL file `path`: a list, or for a file over `streamed_above` bytes a
    `ConllSentences` read on demand (the same instances, in the same order)."""
    rules = TagRules(definition)
    if path.is_file() and path.stat().st_size > streamed_above:
        instances: list[TaggingInstance] | ConllSentences = ConllSentences(definition, path, rules)
    else:
        instances = [TaggingInstance(_ident(path, document, in_document, position), tokens, tags_to_spans(tags))
                     for position, (_, document, in_document, tokens, tags)
                     in enumerate(_sentences(definition, path, rules))]
    declared = definition.tagging != "auto"
    # detected IOB2 and IO are read as ever, unsaid
    if (declared or rules.prefixes & set("ESLU")) and (str(path), rules.scheme()) not in _SAID:
        _SAID.add((str(path), rules.scheme()))
        log.info("%s: %s tags read as %s (%s, prefixes %s)", definition.name, path.name, rules.scheme(),
                 f"declared: tagging: {definition.tagging}" if declared else "detected",
                 ", ".join(sorted(rules.prefixes)) or "none")
    return instances


def entity_types(instances: Sequence[TaggingInstance]) -> tuple[str, ...]:
    """The entity types the instances' spans have, sorted."""
    summary = getattr(instances, "summary", None)
    if summary is not None:
        return tuple(sorted(summary.span_types))
    return tuple(sorted({span.label for x in instances for span in x.spans}))

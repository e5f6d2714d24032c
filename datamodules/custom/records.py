"""JSONL and TSV user files: each line a record of named fields, turned into the instance of its task type.

- JSONL: one JSON object a line; `fields:` maps each field (`text`, `label`, `head`, ...) to the key the
  lines use (default: the field's own name).
- TSV: TAB-separated columns; `columns:` maps each field to its 0-based column (-1: the last), `header:
  true` reads each file's first line as its header (said once, never as an example; one that looks like an
  example is an error); a file may give its own (`files: {test: {path: test.tsv, header: true, columns:
  {text: 1, label: 2}}}`, layouts.py). Multi-label lines join their labels with `label_separator`.

Fields by task type (schema.KINDS; the builder is its input form's, `_Builder.BY_INPUTS`): ner/pico `tokens` +
`tags` (lists, JSONL only); re `text`, `label` and `head` / `tail` mentions (`{"start": 0, "end": 5, "type":
"GENE"}` or `[0, 5, "GENE"]`, character offsets, end exclusive), or, with `entity_types: [HEAD, TAIL]`, the text
holding `@HEAD$` and `@TAIL$` (BLURB's GAD and BLUE's files); similarity and pair-classification `text_a`, `text_b`,
`label`; classification `text`, `label` (a list with multi_label); qa `question`, `context` (a string or a list of
passages, joined by spaces), `label`. Every kind takes an optional `id` (default `<file stem>-<n>`).
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any, Iterator

from bioablate_core.errors import DataFormatError
from datamodules.custom.layouts import FileLayout
from datamodules.custom.schema import Definition
from datamodules.custom.tagged import TagRules, tags_to_spans
from datamodules.instances import (
    Instance,
    Mention,
    PairInstance,
    RelationInstance,
    TaggingInstance,
    TextInstance,
)
from datamodules.readers.jsonfile import BOM
from datamodules.spec import QUOTE_LIMIT, shown
from datamodules.textfiles import read_text, text_problem

Record = dict[str, Any]  # field -> value (absent fields are missing)

log = logging.getLogger("bioablate")
_HEADERS_SAID: set[tuple[Path, str]] = set()  # (YAML file, header) already said
# The largest similarity score taken: its square in the loss stays far inside float32's range (a score of
# 1e308 is inf once cast), and no scale of similarity in use comes near it.
MAX_SCORE = 1e6


def read_records(definition: Definition, path: Path, layout: FileLayout | None = None) -> list[Instance]:
    """Every instance of one JSONL or TSV file (`layout`: the TSV file's header and columns, default the
    dataset's)."""
    layout = layout or FileLayout(definition.header, definition.columns)
    lines = _jsonl(definition, path) if definition.format == "jsonl" else _tsv(definition, path, layout)
    build = _Builder(definition, path, layout)
    instances, lines_of = [], {}  # id -> the line that gave it
    for index, (number, record) in enumerate(lines):
        instance = build(index, number, record)
        if instance.id in lines_of:  # two examples, one id: predictions and overlaps would mix them up
            raise DataFormatError(path, number, f"id {shown(instance.id)} occurs twice (also line "
                                                f"{lines_of[instance.id]}); give each example its own id")
        lines_of[instance.id] = number
        instances.append(instance)
    return instances


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based number, text) of the non-blank lines, split on newlines only: a stray carriage return or
    U+2028 inside a sentence is text."""
    text = read_text(path)  # a missing file, a directory, a bad byte: one line naming the path (and line)
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if line.strip():
            yield number, line


def _jsonl(definition: Definition, path: Path) -> Iterator[tuple[int, Record]]:
    for number, line in _lines(path):
        try:
            data = json.loads(line.removeprefix(BOM) if number == 1 else line)
        except json.JSONDecodeError as err:
            raise DataFormatError(path, number, f"not a JSON object ({err.msg}); a jsonl file has one a line")
        if not isinstance(data, dict):
            raise DataFormatError(path, number, f"expected a JSON object, got {type(data).__name__}")
        yield number, {field: data[key] for field, key in definition.fields.items() if key in data}


def _looks_like_data(definition: Definition, value: str) -> bool:
    """A header row's label column holds a class of `labels` (a score, for similarity): an example."""
    if definition.kind.entry.scored:
        try:
            float(value)
            return True
        except ValueError:
            return False
    values = value.split(definition.label_separator) if definition.multi_label else [value]
    return any(v.strip() in definition.labels for v in values)


def _header_shown(parts: list[str]) -> str:
    text = " | ".join(parts)
    return text if len(text) <= QUOTE_LIMIT else shown(text)


def _tsv(definition: Definition, path: Path, layout: FileLayout) -> Iterator[tuple[int, Record]]:
    columns = layout.columns
    required = [f for f in columns if f != "id"]
    width = max(c + 1 if c >= 0 else -c for c in columns.values())
    lines = _lines(path)
    if layout.header:  # read as the header, and said: never an example dropped in silence
        number, line = next(lines, (0, ""))
        parts = line.split("\t")
        label = parts[columns["label"]] if number and "label" in columns and len(parts) >= width else None
        if label is not None and _looks_like_data(definition, label):
            raise DataFormatError(path, number, f"header: true reads this line as the header, but it looks like "
                                                f"an example (label {shown(label.strip())}); if the file has no "
                                                f"header, set header: false for it ({definition.source}: files: "
                                                f"{{<split>: {{path: {path.name}, header: false}}}})")
        if number and (definition.source, line) not in _HEADERS_SAID:  # once per header text, for all its files
            _HEADERS_SAID.add((definition.source, line))
            log.info("%s: line %d of %s is its header (%s), not an example (header: true)", definition.name,
                     number, path, _header_shown(parts))
    first = not layout.header
    for number, line in lines:
        parts = line.split("\t")
        if first and "label" in columns and len(parts) >= width and \
                not _looks_like_data(definition, parts[columns["label"]]):  # a header row, read as data?
            raise DataFormatError(path, number, f"label {shown(parts[columns['label']].strip())} (column "
                                                f"{columns['label']}) is not in labels {list(definition.labels)}: if "
                                                f"this first line is a header, set header: true for the file "
                                                f"({definition.source}: files: {{<split>: {{path: {path.name}, header: "
                                                "true}}), else add the label to labels")
        first = False
        if len(parts) < width:
            where = ", ".join(f"{f} {columns[f]}" for f in required)
            raise DataFormatError(path, number, f"expected at least {width} TAB-separated columns ({where}: the "
                                                f"key 'columns' of {definition.source}), got {len(parts)}")
        record: Record = {field: parts[column] for field, column in columns.items()}
        if definition.multi_label:
            record["label"] = [x.strip() for x in record["label"].split(definition.label_separator) if x.strip()]
        yield number, record


class _Builder:
    """Record -> instance for one file of one dataset; every problem names the file, line and key."""

    def __init__(self, definition: Definition, path: Path, layout: FileLayout):
        self.d, self.path, self.layout = definition, path, layout
        self.tag_rules = TagRules(definition) if definition.kind.entry.tagged else None
        self.labels = set(definition.labels)
        self.build = self.BY_INPUTS[definition.kind.inputs]

    def __call__(self, index: int, number: int, record: Record) -> Instance:
        self.number, self.record = number, record
        return self.build(self, str(record["id"]) if record.get("id") is not None else f"{self.path.stem}-{index}")

    # -- one instance, by the input form of the task type (datamodules/task_types.py)

    def words(self, ident: str) -> TaggingInstance:
        tokens, tags = self.strings("tokens"), self.strings("tags")
        if len(tokens) != len(tags):
            raise self.error(f"{len(tokens)} tokens but {len(tags)} tags ({self.key('tokens')}, {self.key('tags')})")
        tags = [self.tag_rules.normalize(tag, self.path, self.number) for tag in tags]
        return TaggingInstance(ident, tuple(tokens), tags_to_spans(tags))

    def relation(self, ident: str) -> RelationInstance:
        text = self.text("text")
        head, tail = self.placeholders(text) if self.d.entity_types else (self.mention("head", text),
                                                                           self.mention("tail", text))
        return RelationInstance(ident, text, head, tail, self.label())

    def pair(self, ident: str) -> PairInstance:
        first, second = self.text("text_a"), self.text("text_b")
        return PairInstance(ident, first, second, self.score() if self.d.kind.entry.scored else self.label())

    def question_text(self, ident: str) -> PairInstance:
        context = self.need("context")
        if isinstance(context, list) and all(isinstance(x, str) for x in context):
            context = " ".join(context)
        elif not isinstance(context, str):
            raise self.error(f"{self.key('context')}: expected a string or a list of strings")
        return PairInstance(ident, self.text("question"), context, self.label())

    def one_text(self, ident: str) -> TextInstance:
        labels = tuple(self.labels_list()) if self.d.multi_label else (self.label(),)
        return TextInstance(ident, self.text("text"), labels)

    BY_INPUTS = {"words": words, "relation": relation, "pair": pair, "question-text": question_text,
                 "text": one_text}

    # -- fields

    def key(self, field: str) -> str:
        """How the YAML names the place of `field` in a line, for messages."""
        if self.d.format == "jsonl":
            return f"field '{self.d.fields[field]}' (fields.{field})"
        return f"column {self.layout.columns[field]} (columns.{field})"

    def error(self, message: str) -> DataFormatError:
        return DataFormatError(self.path, self.number, f"{message}; see {self.d.source}")

    def need(self, field: str) -> Any:
        if field not in self.record:
            raise self.error(f"missing {self.key(field)}")
        return self.record[field]

    def text(self, field: str) -> str:
        value = self.need(field)
        if not isinstance(value, str) or not value.strip():
            raise self.error(f"{self.key(field)}: expected non-empty text, got {shown(value)}")
        problem = text_problem(value)
        if problem:
            raise self.error(f"{self.key(field)}: the text {problem}")
        return value

    def strings(self, field: str) -> list[str]:
        value = self.need(field)
        if not isinstance(value, list) or not value or not all(isinstance(x, str) and x for x in value):
            raise self.error(f"{self.key(field)}: expected a non-empty list of non-empty strings")
        if field == "tokens":
            for i, token in enumerate(value):
                problem = text_problem(token)
                if problem:
                    raise self.error(f"{self.key(field)}: token {i} ({shown(token)}) {problem}")
        return value

    def label(self, value: Any = None) -> str:
        value = self.need("label") if value is None else value
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # 0 / 1 in JSON are the classes "0" / "1"
        if not isinstance(value, str):
            raise self.error(f"{self.key('label')}: expected a class name, got {shown(value)}")
        value = value.strip()
        if value not in self.labels:
            raise self.error(f"label {shown(value)} ({self.key('label')}) is not in labels {list(self.d.labels)}; "
                             "add it there")
        return value

    def labels_list(self) -> list[str]:
        value = self.need("label")
        if isinstance(value, str):
            value = [x for x in value.split(self.d.label_separator) if x.strip()]
        if not isinstance(value, list):
            raise self.error(f"{self.key('label')}: expected a list of class names (multi_label)")
        return sorted({self.label(x) for x in value})

    def score(self) -> float:
        """A finite number: in JSON a number (not the text "2.5", not `true`), in a TSV column its text.
        NaN would be trained on and scored as `nan`; a huge one overflows the squared-error loss to inf."""
        value = self.need("label")
        text = isinstance(value, str) and self.d.format == "tsv"
        try:
            if not (text or (isinstance(value, (int, float)) and not isinstance(value, bool))):
                raise TypeError
            score = float(value)
        except (TypeError, ValueError, OverflowError):
            raise self.error(f"{self.key('label')}: expected a number (similarity score), got {shown(value)}") from None
        if not math.isfinite(score) or abs(score) > MAX_SCORE:
            raise self.error(f"{self.key('label')}: similarity score {shown(value)} is not a finite number within "
                             f"+-{MAX_SCORE:,.0f}; fix the line or rescale the scores")
        return score

    def mention(self, field: str, text: str) -> Mention:
        value = self.need(field)
        if isinstance(value, dict):
            value = [value.get("start"), value.get("end"), value.get("type")]
        if not (isinstance(value, list) and len(value) == 3 and all(isinstance(v, int) for v in value[:2])
                and isinstance(value[2], str) and value[2]):
            raise self.error(f"{self.key(field)}: expected {{\"start\": <int>, \"end\": <int>, \"type\": <name>}} "
                             f"or [start, end, type], got {shown(value)}")
        start, end, typ = value
        if not 0 <= start < end <= len(text):
            raise self.error(f"{self.key(field)}: characters {start}-{end} are not inside the text "
                             f"({len(text)} characters; offsets are 0-based, end exclusive)")
        return Mention(start, end, typ)

    def placeholders(self, text: str) -> tuple[Mention, Mention]:
        """Head and tail at the `@TYPE$` placeholders of `entity_types` (the same type twice: the first
        occurrence is the head)."""
        head_type, tail_type = self.d.entity_types
        tags = (f"@{head_type}$", f"@{tail_type}$")
        starts = []
        for tag in dict.fromkeys(tags):
            expected = tags.count(tag)
            found = [i for i in range(len(text)) if text.startswith(tag, i)]
            if len(found) != expected:
                raise self.error(f"expected {expected} {tag} in {self.key('text')} (entity_types), found "
                                 f"{len(found)}")
            starts += found
        return (Mention(starts[0], starts[0] + len(tags[0]), head_type),
                Mention(starts[1], starts[1] + len(tags[1]), tail_type))

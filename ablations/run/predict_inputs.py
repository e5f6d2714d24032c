"""The input file of `bioablate predict` (its form: ablations/run/predict.py's docstring): one example per
line, plain text or JSONL, read into the task's instances (`datamodules.instances`) with, for tagging, the
text and each word's character span in it; a line that cannot be one is one DataFormatError naming it.

The file is read a line at a time, and an example is held compactly: its words' spans in one array of ints
(`WordSpans`), its words interned per read (a common word is one string however often it occurs).
"""

from __future__ import annotations

import json
import re
import sys
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bioablate_core.errors import ConfigError, DataFormatError
from datamodules.custom.lines import text_lines
from datamodules.instances import (
    Instance,
    Mention,
    PairInstance,
    QAInstance,
    RelationInstance,
    TaggingInstance,
    TextInstance,
)
from datamodules.spec import shown
from datamodules.task_types import TASK_TYPES

WORDS = re.compile(r"\w+|[^\w\s]")  # plain text -> words for tagging: runs of word characters, punctuation


class WordSpans(Sequence):
    """Words' character spans (start, end) stored flat in one array of ints; a slice shares the array."""

    def __init__(self, flat: array, first: int = 0, count: int | None = None):
        """`flat`: start, end of each word in turn; `first`, `count`: the words of it this one has."""
        self._flat, self._first = flat, first
        self._count = len(flat) // 2 - first if count is None else count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(self._count)
            if step != 1:
                return tuple(self[i] for i in range(start, stop, step))
            return WordSpans(self._flat, self._first + start, max(0, stop - start))
        if not -self._count <= index < self._count:
            raise IndexError(index)
        at = 2 * (self._first + index % self._count)
        return self._flat[at], self._flat[at + 1]

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"WordSpans({list(self)})"


@dataclass(frozen=True)
class Example:
    """One input: the task's instance and, for tagging, the text with each word's character span in it
    (what entity offsets index)."""

    instance: Instance
    text: str = ""
    words: Sequence[tuple[int, int]] = ()


def _placeholder_label(spec) -> Any:
    """Encoders build a training label from every instance; new text has none, so it gets a dummy one
    (never read: only the predictions come back)."""
    return 0.0 if TASK_TYPES.of(spec.task_type).scored else spec.labels[0]


def _word_spans(tokens: list[str], text: str, where: tuple[Path, int]) -> WordSpans:
    """Each token's character span in `text`, found in order with only whitespace between them."""
    spans, at = array("q"), 0
    for token in tokens:
        start = text.find(token, at)
        if start < 0 or text[at:start].strip():
            raise DataFormatError(where[0], where[1], f"token {shown(token)} is not where the text continues "
                                                      f"({text[at:at + 20]!r}); give tokens in the text's order, "
                                                      "or the text alone")
        spans.extend((start, start + len(token)))
        at = start + len(token)
    return WordSpans(spans)


def _words(record: dict[str, Any], spec, rid: str, where: tuple[Path, int]) -> Example:
    if "text" in record:
        text = str(record["text"])
        if "tokens" in record:
            tokens = [str(t) for t in record["tokens"]]
            words = _word_spans(tokens, text, where)
        else:
            found = list(WORDS.finditer(text))
            tokens, words = [m.group() for m in found], WordSpans(array("q", (n for m in found for n in m.span())))
    else:
        tokens = [str(t) for t in record["tokens"]]
        text = " ".join(tokens)
        words = _word_spans(tokens, text, where)
    return Example(TaggingInstance(rid, tuple(sys.intern(t) for t in tokens), ()), text, words)


def _relation(record: dict[str, Any], spec, rid: str, where: tuple[Path, int]) -> Example:
    head, tail = (Mention(int(m["start"]), int(m["end"]), str(m["type"])) for m in (record["head"], record["tail"]))
    return Example(RelationInstance(rid, record["text"], head, tail, _placeholder_label(spec)))


def _question_context(record: dict[str, Any], spec, rid: str, where: tuple[Path, int]) -> Example:
    return Example(QAInstance(rid, str(record.get("question_id", rid)), str(record["question"]),
                              str(record["context"]), answers=()))


def _pair(record: dict[str, Any], spec, rid: str, where: tuple[Path, int]) -> Example:
    return Example(PairInstance(rid, record["text_a"], record["text_b"], _placeholder_label(spec)))


def _text(record: dict[str, Any], spec, rid: str, where: tuple[Path, int]) -> Example:
    return Example(TextInstance(rid, record["text"], (_placeholder_label(spec),)))


@dataclass(frozen=True)
class InputForm:
    """How one example of an input form (datamodules/task_types.py) is read."""

    needs: str  # the JSONL fields it needs, for messages
    example: Callable[[dict[str, Any], Any, str, tuple[Path, int]], Example]  # (record, spec, id, where)
    # the record keys of a plain-text line: one (the line) or two (two texts separated by a tab); () JSONL only
    keys: tuple[str, ...] = ("text",)


INPUT_FORMS = {
    "words": InputForm("tokens or text", _words),
    "relation": InputForm("text, head and tail {start, end, type}", _relation, ()),
    "pair": InputForm("text_a and text_b", _pair, ("text_a", "text_b")),
    "question-text": InputForm("text_a and text_b", _pair, ("text_a", "text_b")),
    "question-context": InputForm("question and context", _question_context, ("question", "context")),
    "text": InputForm("text", _text),
}


def _input_form(spec) -> InputForm:
    return INPUT_FORMS[TASK_TYPES.of(spec.task_type).inputs]


def example_from_json(record: dict[str, Any], spec, where: tuple[Path, int]) -> Example:
    """One JSONL record -> the task's instance (`datamodules.instances`), with the text and word offsets
    that tagging output indexes."""
    form = _input_form(spec)
    try:
        return form.example(record, spec, str(record.get("id", where[1])), where)
    except (KeyError, TypeError, ValueError) as error:
        raise DataFormatError(where[0], where[1], f"a {spec.name} record needs {form.needs} "
                                                  f"({type(error).__name__}: {error})") from None


def check_input_file(path: Path) -> None:
    """One line when `path` is no file to read examples from."""
    if path.is_dir():
        raise ConfigError(f"--input {path} is a folder; name the file to read (plain text or JSONL, one example "
                          "per line), e.g. --input " + str(path / "examples.txt"))
    if not path.is_file():
        raise ConfigError(f"--input {path}: no such file")


def _input_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(number, line) of the file's non-blank lines, read a line at a time; lines are what
    `str.splitlines` gives of the file's text (a not-UTF-8 byte is one DataFormatError naming its line)."""
    number = 0
    for _, _, text in text_lines(path):
        for line in text.splitlines() or [""]:
            number += 1
            if line.strip():
                yield number, line


def read_inputs(path: Path, spec) -> list[Example]:
    """The examples of an input file (module docstring)."""
    check_input_file(path)
    lines = _input_lines(path)
    first = next(lines, None)
    if first is None:
        raise DataFormatError(path, None, "no examples (one per line)")
    jsonl = path.suffix == ".jsonl" or first[1].lstrip().startswith("{")
    keys = _input_form(spec).keys
    examples = []
    for n, line in _chained(first, lines):
        if jsonl:
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise DataFormatError(path, n, f"not a JSON object ({error.msg}); write one object per line")
            if not isinstance(record, dict):
                raise DataFormatError(path, n, "not a JSON object; write one object per line")
        elif not keys:
            raise DataFormatError(path, n, f"{spec.name} needs JSONL with {_input_form(spec).needs} (character "
                                           "offsets)")
        elif len(keys) == 2:
            parts = line.split("\t")
            if len(parts) != 2:
                raise DataFormatError(path, n, "a pair task needs two texts separated by one tab")
            record = dict(zip(keys, parts))
        else:
            record = {keys[0]: line}
        examples.append(example_from_json(record, spec, (path, n)))
    return examples


def _chained(first: tuple[int, str], rest: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    yield first
    yield from rest

"""The input file of `bioablate predict` (its form: ablations/run/predict.py's docstring): one example per
line, plain text or JSONL, read into the task's instances (`datamodules.instances`) with, for tagging, the
text and each word's character span in it; a line that cannot be one is one DataFormatError naming it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bioablate_core.errors import ConfigError, DataFormatError
from datamodules.instances import (
    Instance,
    Mention,
    PairInstance,
    QAInstance,
    RelationInstance,
    TaggingInstance,
    TextInstance,
)
from datamodules.task_types import TASK_TYPES
from datamodules.textfiles import read_text

WORDS = re.compile(r"\w+|[^\w\s]")  # plain text -> words for tagging: runs of word characters, punctuation


@dataclass(frozen=True)
class Example:
    """One input: the task's instance and, for tagging, the text with each word's character span in it
    (what entity offsets index)."""

    instance: Instance
    text: str = ""
    words: tuple[tuple[int, int], ...] = ()


def _placeholder_label(spec) -> Any:
    """Encoders build a training label from every instance; new text has none, so it gets a dummy one
    (never read: only the predictions come back)."""
    return 0.0 if TASK_TYPES.of(spec.task_type).scored else spec.labels[0]


def _word_spans(tokens: list[str], text: str, where: tuple[Path, int]) -> tuple[tuple[int, int], ...]:
    """Each token's character span in `text`, found in order with only whitespace between them."""
    spans, at = [], 0
    for token in tokens:
        start = text.find(token, at)
        if start < 0 or text[at:start].strip():
            raise DataFormatError(where[0], where[1], f"token {token!r} is not where the text continues "
                                                      f"({text[at:at + 20]!r}); give tokens in the text's order, "
                                                      "or the text alone")
        spans.append((start, start + len(token)))
        at = start + len(token)
    return tuple(spans)


def _words(record: dict[str, Any], spec, rid: str, where: tuple[Path, int]) -> Example:
    if "text" in record:
        text = str(record["text"])
        if "tokens" in record:
            tokens = [str(t) for t in record["tokens"]]
            words = _word_spans(tokens, text, where)
        else:
            found = list(WORDS.finditer(text))
            tokens, words = [m.group() for m in found], tuple(m.span() for m in found)
    else:
        tokens = [str(t) for t in record["tokens"]]
        text = " ".join(tokens)
        words = _word_spans(tokens, text, where)
    return Example(TaggingInstance(rid, tuple(tokens), ()), text, words)


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


def read_inputs(path: Path, spec) -> list[Example]:
    """The examples of an input file (module docstring)."""
    check_input_file(path)
    lines = [(n, line) for n, line in enumerate(read_text(path).splitlines(), 1) if line.strip()]  # not UTF-8: one line
    if not lines:
        raise DataFormatError(path, None, "no examples (one per line)")
    jsonl = path.suffix == ".jsonl" or lines[0][1].lstrip().startswith("{")
    keys = _input_form(spec).keys
    examples = []
    for n, line in lines:
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

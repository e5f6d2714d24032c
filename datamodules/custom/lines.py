"""A data file's lines read one at a time, with the byte offset each starts at, so that a large file is
never held whole and a line can be read again later by seeking to it.

    for number, offset, line in text_lines(path): ...        # every line, its line breaks removed
    for number, offset, line in text_lines(path, offset): ... # from a line start found before

Lines are what `datamodules.textfiles.read_text` gives ("\\r\\n", "\\r" and "\\n" end a line), decoded as
UTF-8 one line at a time. A fault (no such file, a folder, a device, unreadable, a byte that is not UTF-8, a
NUL byte) is the same DataFormatError `read_text` raises, naming the line: on a fault the file is read once
whole by it, to say so in its words.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from bioablate_core.errors import DataFormatError
from datamodules.textfiles import read_text


def _fault(path: Path) -> DataFormatError:
    """The error `read_text` gives for `path` (which has a fault this module met)."""
    try:
        read_text(path)
    except DataFormatError as error:
        return error
    return DataFormatError(path, None, "changed while it was read; run the command again")


BLOCK = 1 << 20  # bytes read at a time


def text_lines(path: Path, start: int = 0) -> Iterator[tuple[int, int, str]]:
    """(line number, byte offset, line) of each line of `path` from byte `start` (a line's start); the
    numbers count from 1 at `start`."""
    if not path.is_file():
        raise _fault(path)
    try:
        handle = open(path, "rb")
    except OSError:
        raise _fault(path) from None
    number, offset = 0, start
    with handle:
        handle.seek(start)
        for chunk in _chunks(handle):
            if b"\r" in chunk:  # a CR ends a line too, alone or before LF: line by line
                lines = _split_cr(chunk)
            else:
                lines = chunk.split(b"\n")
                if chunk.endswith(b"\n"):
                    lines.pop()
                lines = [(line, len(line) + 1) for line in lines]
            for line, size in lines:
                number += 1
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError:
                    raise _fault(path) from None
                if "\x00" in text:
                    raise _fault(path)
                yield number, offset, text
                offset += size


def _chunks(handle) -> Iterator[bytes]:
    """The file from where it stands in blocks that end at a line end (the last one where the file does)."""
    pending: list[bytes] = []  # a line longer than a block, so far
    while True:
        block = handle.read(BLOCK)
        if not block:
            if pending:
                yield b"".join(pending)
            return
        cut = block.rfind(b"\n") + 1
        if not cut:
            pending.append(block)
            continue
        yield b"".join([*pending, block[:cut]]) if pending else block[:cut]
        pending = [block[cut:]] if cut < len(block) else []


def _split_cr(chunk: bytes) -> list[tuple[bytes, int]]:
    """(line, bytes it takes with its line end) of a chunk where "\r\n", "\r" and "\n" end lines (as
    bytes.splitlines splits)."""
    return [(raw.rstrip(b"\r\n"), len(raw)) for raw in chunk.splitlines(keepends=True)]

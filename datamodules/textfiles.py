"""Reading a text data file with every fault (missing, a directory, unreadable, not UTF-8) as one
`DataFormatError` naming the file and, for bad bytes, the line.

    lines = read_text_lines(path)        # str lines, newline characters removed
    for number, line in enumerate(open_text(path), 1): ...   # lines with their "\n", like a file handle
"""

from __future__ import annotations

import io
import unicodedata
from pathlib import Path
from typing import Iterator

from bioablate_core.errors import DataFormatError


def read_bytes(path: Path | str) -> bytes:
    """The file's bytes; a missing file, a directory or a permission problem is a DataFormatError."""
    path = Path(path)
    if path.exists() and not path.is_dir() and not path.is_file():  # /dev/zero never ends; a FIFO blocks
        raise DataFormatError(path, None, "is a device, pipe or socket, expected a regular file")
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DataFormatError(path, None, "file not found; check --data-dir / BIOABLATE_DATA") from None
    except IsADirectoryError:
        raise DataFormatError(path, None, "is a directory, expected a file") from None
    except OSError as e:
        raise DataFormatError(path, None, f"cannot read the file ({e.strerror or e})") from None


UTF16_MARKS = (b"\xff\xfe", b"\xfe\xff")  # a UTF-16 file's byte order mark (little, big endian)
TO_UTF8 = "convert the file to UTF-8 (e.g. iconv -f {} -t utf-8)"


def decode_utf8(path: Path | str, data: bytes) -> str:
    """`data` (the bytes of `path`) as text; a non-UTF-8 or NUL byte (binary, UTF-16) names its line."""
    utf16 = data.startswith(UTF16_MARKS) or data[:200].count(0) * 4 >= min(len(data), 200)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise DataFormatError(path, line, f"not UTF-8 text (byte 0x{data[e.start]:02x}: {e.reason}); "
                              + TO_UTF8.format("utf-16" if utf16 else "latin1")) from None
    nul = text.find("\x00")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise DataFormatError(path, line, "holds a NUL byte, which no text has; " +
                              (TO_UTF8.format("utf-16") if utf16 else "is it a binary file? remove the NUL bytes"))
    return text


def text_problem(text: str) -> str | None:
    """Why `text` cannot be a model input (a NUL, or nothing visible, which tokenizes to nothing), or None."""
    if "\x00" in text:
        return "holds a NUL character"
    if not any(unicodedata.category(c)[0] in VISIBLE for c in text):
        return "holds no visible character (only spaces, zero-width or control characters)"
    return None


VISIBLE = "LMNPS"  # Unicode's letters, marks, numbers, punctuation, symbols (not separators, controls, format)


def read_text(path: Path | str) -> str:
    """The file as text with universal newlines ("\r\n" and "\r" read as "\n"), as `open` reads it."""
    return decode_utf8(path, read_bytes(path)).replace("\r\n", "\n").replace("\r", "\n")


def read_text_lines(path: Path | str) -> list[str]:
    return read_text(path).splitlines()


def open_text(path: Path | str) -> io.StringIO:
    """The decoded file as an in-memory handle: iterating it yields lines as a text-mode file does."""
    return io.StringIO(read_text(path))


def conll_blocks(path: Path | str) -> Iterator[list[tuple[int, str]]]:
    """The blank-line-separated blocks of a CoNLL-style file, as (line number, stripped line) pairs."""
    block: list[tuple[int, str]] = []
    with open_text(path) as handle:
        for number, raw in enumerate(handle, start=1):
            line = raw.rstrip()
            if line:
                block.append((number, line))
            elif block:
                yield block
                block = []
    if block:
        yield block

"""Reading a JSON data file, with format problems reported as `DataFormatError`s naming the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bioablate_core.errors import DataFormatError
from datamodules.textfiles import read_text

BOM = "\ufeff"  # U+FEFF at the start of a file: a byte order mark, which `json.loads` refuses


def load_json_object(path: Path, expected: str) -> dict[str, Any]:
    """The top-level JSON object of `path`; `expected` describes it for the error message. A UTF-8 byte
    order mark before it (Windows editors write one) is read as `utf-8-sig` reads it: not text."""
    try:
        data = json.loads(read_text(path).removeprefix(BOM))
    except json.JSONDecodeError as err:
        raise DataFormatError(path, err.lineno, f"invalid JSON ({err.msg}); expected {expected}") from err
    if not isinstance(data, dict):
        raise DataFormatError(path, None, f"expected {expected}, found {type(data).__name__}")
    return data

"""Reading a JSON data file, with format problems reported as `DataFormatError`s naming the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.errors import DataFormatError
from datamodules.textfiles import read_text


def load_json_object(path: Path, expected: str) -> dict[str, Any]:
    """The top-level JSON object of `path`; `expected` describes it for the error message."""
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise DataFormatError(path, err.lineno, f"invalid JSON ({err.msg}); expected {expected}") from err
    if not isinstance(data, dict):
        raise DataFormatError(path, None, f"expected {expected}, found {type(data).__name__}")
    return data

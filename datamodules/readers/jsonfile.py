"""Reading a JSON data file, with format problems reported as `DataFormatError`s naming the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.errors import DataFormatError


def load_json_object(path: Path, expected: str) -> dict[str, Any]:
    """The top-level JSON object of `path`; `expected` describes it for the error message."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DataFormatError(path, err.lineno, f"invalid JSON ({err.msg}); expected {expected}") from err
    except UnicodeDecodeError as err:
        raise DataFormatError(path, None, f"not UTF-8 text ({err.reason})") from err
    if not isinstance(data, dict):
        raise DataFormatError(path, None, f"expected {expected}, found {type(data).__name__}")
    return data

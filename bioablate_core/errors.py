"""User-facing errors.

Everything a user can cause raises a `BioablateError`, which the CLI prints as one line (exit status 2);
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Iterable


class BioablateError(Exception):
    """An error caused by user input, printed as a single line by the CLI."""


class UnknownNameError(BioablateError):
    """A name looked up in a registry (dataset, head, ...) does not exist; suggests the nearest one."""

    def __init__(self, kind: str, name: str, known: Iterable[str]):
        self.kind, self.name, self.known = kind, name, sorted(known)
        close = difflib.get_close_matches(str(name), self.known, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        super().__init__(f"unknown {kind} '{name}'; known: {', '.join(self.known)}{hint}")


class MissingDataError(BioablateError):
    """Dataset files are not where they are expected."""

    def __init__(self, data_dir: Path, missing: dict[str, list[str]], hint: str | None = None):
        """`hint`: how to fix it, where not by pointing at the staged data (a user dataset's YAML file)."""
        self.data_dir, self.missing = data_dir, missing
        parts = [f"{name}: {', '.join(files)}" for name, files in sorted(missing.items())]
        hint = hint or ("point --data-dir or BIOABLATE_DATA at the folder that holds the staged datasets (see "
                        "README, 'Data')")
        super().__init__(f"data directory {data_dir} is missing files ({'; '.join(parts)}); {hint}")


class DataFormatError(BioablateError):
    """A data file does not have the expected format; names the file and (1-based) line."""

    def __init__(self, path: Path | str, line: int | None, message: str):
        self.path, self.line = Path(path), line
        where = f"{path}:{line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {message}")


class ConfigError(BioablateError):
    """A configuration value or key is invalid."""

"""Per-file TSV layouts: datasets as they ship, where one file of a dataset has a header row or other
columns than the rest (BioBERT's relation folds: a headerless `sentence<TAB>label` train.tsv beside a
test.tsv with an `index<TAB>sentence<TAB>label` header).

A file under `files:` or in a `folds:` pair is a name, or a mapping that gives its own `header` and
`columns` (each defaulting to the dataset's keys of the same name):

    header: false                            # every file, unless it says otherwise
    columns: {text: 0, label: 1}
    files:
      train: train.tsv
      test: {path: test.tsv, header: true, columns: {text: 1, label: 2}}

`split_names` turns those entries into plain file names (what the protocol and the fingerprint's file list
read) and collects each named file's own keys; `schema.check` validates them as the dataset-level keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

LAYOUT_KEYS = ("path", "header", "columns")


@dataclass(frozen=True)
class FileLayout:
    """How one TSV file is read: whether its first line is a header, and each field's column."""

    header: bool
    columns: dict[str, int]


def _entry(value: Any, where: str, layouts: dict[str, dict], fail: Callable[[str], Exception]) -> Any:
    """A file entry -> its name; a mapping's own keys go to `layouts` under that name."""
    if not isinstance(value, dict):
        return value  # a name (checked where names are: protocol.parse)
    unknown = [key for key in value if key not in LAYOUT_KEYS]
    if unknown:
        raise fail(f"unknown key '{where}.{unknown[0]}'; a file given as a mapping has keys "
                   f"{', '.join(LAYOUT_KEYS)} (e.g. {{path: test.tsv, header: true}})")
    name = value.get("path")
    if not isinstance(name, str) or not name.strip():
        raise fail(f"{where}.path: expected a file name (relative to path), got {name!r}")
    if "header" in value and not isinstance(value["header"], bool):
        raise fail(f"{where}.header: expected true or false, got {value['header']!r}")
    if "columns" in value and not isinstance(value["columns"], dict):
        raise fail(f"{where}.columns: expected a mapping of field -> 0-based column, e.g. {{text: 1, label: 2}}")
    own = {key: value[key] for key in ("header", "columns") if key in value}
    if name in layouts and layouts[name] != own:
        raise fail(f"{where}: {name} is given twice with different header or columns; give it one layout")
    layouts[name] = own
    return name


def split_names(files: dict[str, Any], folds: Any, fail: Callable[[str], Exception]
                ) -> tuple[dict[str, Any], Any, dict[str, dict]]:
    """(`files` with names only, `folds` with names only, {file name: its own keys}) of the YAML's entries."""
    layouts: dict[str, dict] = {}
    # a number under files: is a file name, as when the schema read these keys as strings
    names = {split: _entry(str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value,
                           f"files.{split}", layouts, fail) for split, value in files.items()}
    if isinstance(folds, list):
        folds = [{split: _entry(value, f"folds[{i}].{split}", layouts, fail) for split, value in pair.items()}
                 if isinstance(pair, dict) else pair for i, pair in enumerate(folds)]
    return names, folds, layouts

"""Cross-validation folds stored as files named one by one (a user dataset YAML's `folds:` list): the
`FileFolds` of datamodules/protocols.py without a `{fold}` template. A spec's fingerprint holds its repr.
"""

from __future__ import annotations

from dataclasses import dataclass

from datamodules.protocols import FileFolds


@dataclass(frozen=True)
class ListedFolds:
    """`files_by_fold[k - 1]` are fold k's files (train, test)."""

    files_by_fold: tuple[tuple[str, ...], ...]

    @property
    def count(self) -> int:
        return len(self.files_by_fold)

    def files(self, fold: int) -> tuple[str, ...]:
        return self.files_by_fold[fold - 1]

    def all_files(self) -> tuple[str, ...]:
        """Every fold's files, each once, in order of first mention."""
        return tuple(dict.fromkeys(f for files in self.files_by_fold for f in files))


# Folds whose files the reader reads per fold: `reader(path, k)`
FILE_FOLDS = (FileFolds, ListedFolds)

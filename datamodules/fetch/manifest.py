"""The package manifest (`manifest.json`): every file the 13 BLURB readers and the vocabularies need,
with its public origin, size and sha256, and where it goes in the data folder.

`scripts/make_fetch_manifest.py` writes it. A source is one folder of a pinned origin repository: raw files
(`<base>/<owner>/<repo>/<commit>/<origin_dir>/<origin>`, `<base>` raw.githubusercontent.com or a mirror),
members of a zip `archive`, or id lists packaged in `derived/`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from bioablate_core.errors import UnknownNameError

ORIGIN_BASE = "https://raw.githubusercontent.com"
MANIFEST_FILE = Path(__file__).resolve().parent / "manifest.json"
DERIVED_DIR = Path(__file__).resolve().parent / "derived"
VOCAB_GROUP = "vocab"  # the one group that is not a dataset name
KINDS = ("raw", "archive", "packaged")


@dataclass(frozen=True)
class FileEntry:
    origin: str  # raw: path below origin_dir; archive: member below origin_dir; packaged: below derived/<dest_dir>
    dest: str  # relative to the data folder
    size: int
    sha256: str


@dataclass(frozen=True)
class Source:
    kind: str
    group: str  # a dataset name (`bioablate list tasks`) or "vocab"; what `--only` selects
    dest_dir: str
    files: tuple[FileEntry, ...]
    repo: str = ""  # owner/name on GitHub
    commit: str = ""
    origin_dir: str = ""
    archive: str = ""  # archive sources: the zip's path in the repository

    def url(self, path: str, base: str = ORIGIN_BASE) -> str:
        """The URL of `path` (a path in the repository) at the pinned commit."""
        return f"{base.rstrip('/')}/{self.repo}/{self.commit}/{quote(path)}"

    def file_url(self, entry: FileEntry, base: str = ORIGIN_BASE) -> str:
        return self.url(_join(self.origin_dir, entry.origin), base)

    def archive_url(self, base: str = ORIGIN_BASE) -> str:
        return self.url(self.archive, base)

    def packaged_path(self, entry: FileEntry) -> Path:
        return DERIVED_DIR / self.dest_dir / entry.origin


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


def load_manifest(path: Path = MANIFEST_FILE) -> list[Source]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    sources = []
    for item in raw["sources"]:
        dest_dir = item["dest_dir"]
        files = tuple(FileEntry(f["origin"], _join(dest_dir, f["dest"]), int(f["size"]), f["sha256"])
                      for f in item["files"])
        sources.append(Source(kind=item["kind"], group=item["group"], dest_dir=dest_dir, files=files,
                              repo=item.get("repo", ""), commit=item.get("commit", ""),
                              origin_dir=item.get("origin_dir", ""), archive=item.get("archive", "")))
    unknown = {s.kind for s in sources} - set(KINDS)
    if unknown:
        raise ValueError(f"{path}: unknown source kind(s) {sorted(unknown)}")
    return sources


def groups(sources: list[Source]) -> list[str]:
    return list(dict.fromkeys(s.group for s in sources))


def select(sources: list[Source], only: list[str] | None) -> list[Source]:
    """The sources of the named groups (all when `only` is empty); an unknown name is a user error."""
    if not only:
        return sources
    known = groups(sources)
    for name in only:
        if name not in known:
            raise UnknownNameError("dataset (or 'vocab') for --only", name, known)
    return [s for s in sources if s.group in only]


def default_data_dir() -> Path:
    """Where `bioablate data fetch` puts the data unless told `--to`: `data/` in the user data folder."""
    try:
        from platformdirs import user_data_dir
    except ImportError:
        base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        return Path(base) / "bioablate" / "data"
    return Path(user_data_dir("bioablate", appauthor=False)) / "data"

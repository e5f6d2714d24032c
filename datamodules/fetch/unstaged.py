"""Files too large to stage (`unstaged.json`): BioBERT's BioASQ factoid training files and BC4CHEMD,
Bio-ELECTRA's BioASQ training file and reranker training file.

Their bytes are not known, so `size` and `sha256` are null; each file's git blob SHA-1 in the pinned
commit identifies them instead. Kept apart from `manifest.json`, so `bioablate data fetch` skips them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from datamodules.fetch.manifest import ORIGIN_BASE

UNSTAGED_FILE = Path(__file__).resolve().parent / "unstaged.json"


@dataclass(frozen=True)
class UnstagedFile:
    group: str
    repo: str
    commit: str
    path: str  # in the repository
    dest: str  # relative to the data folder
    git_blob_sha1: str
    size: int | None = None  # null until known from a download
    sha256: str | None = None

    def url(self, base: str = ORIGIN_BASE) -> str:
        return f"{base.rstrip('/')}/{self.repo}/{self.commit}/{self.path}"


def load_unstaged(path: Path = UNSTAGED_FILE) -> list[UnstagedFile]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [UnstagedFile(f["group"], f["repo"], f["commit"], f["path"], f["dest"], f["git_blob_sha1"],
                         f.get("size"), f.get("sha256")) for f in raw["files"]]


def git_blob_sha1(data: bytes) -> str:
    """Git's object id of a file's bytes: SHA-1 over `blob <size>\\0` and the bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def verify(entry: UnstagedFile, data: bytes) -> bool:
    """Whether downloaded bytes are the pinned file (and match size / sha256 where those are known)."""
    return (git_blob_sha1(data) == entry.git_blob_sha1
            and (entry.size is None or entry.size == len(data))
            and (entry.sha256 is None or entry.sha256 == hashlib.sha256(data).hexdigest()))

"""`bioablate data fetch`: bring the files of the package manifest into a data folder.

Every file is written as `<dest>.part`, verified and renamed into place, so a data folder never holds an
unverified file under its final name; a rerun skips what verifies and resumes cut downloads. Not `pooch`:
it fetches one file at a time over new connections and cannot resume.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import zipfile
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from datamodules.fetch.download import (
    ChecksumError,
    DiskFullError,
    FetchError,
    Stopped,
    download,
    file_sha256,
    human_size,
    is_complete,
    pool_manager,
    write_chunks,
)
from datamodules.fetch.manifest import (
    MANIFEST_FILE,
    ORIGIN_BASE,
    FileEntry,
    Source,
    default_data_dir,
    load_manifest,
    select,
)

log = logging.getLogger(__name__)

MARKER_FILE = ".bioablate-fetch.json"  # written after a successful fetch: which groups are complete
DEFAULT_JOBS = 8


@dataclass
class FetchResult:
    data_dir: Path
    groups: list[str]
    fetched_files: int = 0
    fetched_bytes: int = 0
    complete_files: int = 0  # already there and verified
    replaced: list[str] = field(default_factory=list)  # present but not matching the manifest


def fetched_data_dir() -> Path | None:
    """The default data folder if `bioablate data fetch` completed there, else None."""
    path = default_data_dir()
    return path if (path / MARKER_FILE).is_file() else None


def part_of(path: Path) -> Path:
    return path.with_name(path.name + ".part")


class _Progress:
    """One byte bar for all workers (tqdm's update is guarded by its own lock)."""

    def __init__(self, total: int, initial: int, show: bool):
        self.bar = tqdm(total=total, initial=initial, unit="B", unit_scale=True, unit_divisor=1024,
                        desc="fetch", disable=not show, leave=show)
        self.lock = threading.Lock()

    def __call__(self, count: int) -> None:
        self.bar.update(count)

    def grow(self, count: int) -> None:
        with self.lock:
            self.bar.total += count
            self.bar.refresh()


class _Fetcher:
    def __init__(self, to: Path, base: str, progress: _Progress, needed: int, workers: int):
        self.to, self.base, self.progress, self.needed = to, base, progress, needed
        self.stop = threading.Event()
        self.http = pool_manager(base, workers)

    def close(self) -> None:
        self.http.clear()

    def guarded(self, job, *args) -> None:
        """Run one job unless another has failed; a failure stops the jobs not yet started at once."""
        if self.stop.is_set():
            raise Stopped
        try:
            job(*args)
        except BaseException:
            self.stop.set()
            raise

    def raw(self, source: Source, entry: FileEntry) -> None:
        dest = self.to / entry.dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        part, url = part_of(dest), source.file_url(entry, self.base)
        download(self.http, url, part, entry.size, self.progress, self.needed, self.stop)
        self._install(part, dest, entry, url)

    def packaged(self, source: Source, entry: FileEntry) -> None:
        dest = self.to / entry.dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = part_of(dest)
        with source.packaged_path(entry).open("rb") as f:
            write_chunks(iter(lambda: f.read(1 << 16), b""), part, "wb", self.progress, self.needed, self.stop)
        self._install(part, dest, entry, str(source.packaged_path(entry)))

    def archive(self, source: Source, entries: list[FileEntry]) -> None:
        """Download the zip, unpack and verify the members the manifest pins, then rename them into place."""
        url = source.archive_url(self.base)
        folder = self.to / source.dest_dir
        folder.mkdir(parents=True, exist_ok=True)
        zip_part = part_of(folder / Path(source.archive).name)
        counted = zip_part.stat().st_size if zip_part.exists() else 0  # already in the bar's total
        download(self.http, url, zip_part, None, self.progress, self.needed, self.stop,
                 on_total=lambda total: self.progress.grow(total - counted))
        parts: list[tuple[Path, Path]] = []
        try:
            with zipfile.ZipFile(zip_part) as archive:
                names = set(archive.namelist())
                for entry in entries:
                    member = "/".join(p for p in (source.origin_dir, entry.origin) if p)
                    if member not in names:
                        raise FetchError(f"{url} has no member {member!r} (needed for {entry.dest}); a "
                                         "mirror must serve the origin's archive")
                    dest = self.to / entry.dest
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    parts.append((part_of(dest), dest))
                    with archive.open(member) as f:
                        write_chunks(iter(lambda: f.read(1 << 16), b""), parts[-1][0], "wb",
                                     lambda n: None, self.needed, self.stop)
                    self._verify(parts[-1][0], entry, f"{url} ({member})")
        except BaseException as error:
            for part, _ in parts:
                part.unlink(missing_ok=True)
            if not isinstance(error, (Stopped, KeyboardInterrupt)):  # a bad zip is not worth resuming
                zip_part.unlink(missing_ok=True)
            if isinstance(error, zipfile.BadZipFile):  # also a member whose CRC-32 does not match
                raise FetchError(f"{url} is not a readable zip file ({error}); nothing of it was kept, "
                                 "run again, or use another --mirror") from error
            raise
        for part, dest in parts:
            os.replace(part, dest)
        zip_part.unlink()

    def _verify(self, part: Path, entry: FileEntry, origin: str) -> None:
        """Size and sha256 of a finished part; a mismatch removes it (nothing half-written is kept)."""
        actual = file_sha256(part)
        if part.stat().st_size != entry.size or actual != entry.sha256:
            part.unlink()
            raise ChecksumError(entry.dest, origin, entry.sha256, actual)

    def _install(self, part: Path, dest: Path, entry: FileEntry, origin: str) -> None:
        self._verify(part, entry, origin)
        os.replace(part, dest)


def _plan(sources: list[Source], to: Path) -> tuple[list[tuple[Source, list[FileEntry]]], FetchResult]:
    """The (source, files) still to fetch; files already complete are counted and skipped."""
    result = FetchResult(to, list(dict.fromkeys(s.group for s in sources)))
    todo = []
    for source in sources:
        missing = []
        for entry in source.files:
            dest = to / entry.dest
            if is_complete(dest, entry.size, entry.sha256):
                result.complete_files += 1
                continue
            if dest.exists():
                result.replaced.append(entry.dest)
            missing.append(entry)
        if missing:
            todo.append((source, missing))
    return todo, result


def _partial_bytes(todo: list[tuple[Source, list[FileEntry]]], to: Path) -> tuple[int, int]:
    """Bytes already in `.part` files that a resumed download keeps: (single files, archives)."""
    files = archives = 0
    for source, entries in todo:
        if source.kind == "raw":
            for entry in entries:
                part = part_of(to / entry.dest)
                files += part.stat().st_size if part.exists() and part.stat().st_size < entry.size else 0
        elif source.kind == "archive":
            part = part_of(to / source.dest_dir / Path(source.archive).name)
            archives += part.stat().st_size if part.exists() else 0
    return files, archives


def _space_needed(todo: list[tuple[Source, list[FileEntry]]]) -> int:
    """Bytes this fetch writes; an archive counts twice (the zip and its members)."""
    total = 0
    for source, entries in todo:
        size = sum(e.size for e in entries)
        total += 2 * size if source.kind == "archive" else size
    return total


def fetch_data(to: Path | None = None, only: list[str] | None = None, mirror: str | None = None,
               jobs: int = DEFAULT_JOBS, show_progress: bool = True,
               manifest: Path = MANIFEST_FILE) -> FetchResult:
    """Fetch the manifest's files of the groups in `only` (default all) into `to` (default:
    `default_data_dir()`), from `mirror` instead of raw.githubusercontent.com when given, on `jobs` threads."""
    if jobs < 1:
        raise FetchError(f"--jobs must be at least 1, got {jobs}")
    to = Path(to).expanduser() if to is not None else default_data_dir()
    sources = select(load_manifest(manifest), only)
    try:
        to.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise FetchError(f"{to}: cannot create the data folder ({error.strerror}); choose another with "
                         "--to DIR") from error
    todo, result = _plan(sources, to)
    for dest in result.replaced:
        log.info(f"{to / dest}: does not match the manifest, fetching it again")
    needed = _space_needed(todo)
    partial_files, partial_archives = _partial_bytes(todo, to)
    free = shutil.disk_usage(to).free
    if needed - partial_files - partial_archives > free:
        raise DiskFullError(to, needed - partial_files - partial_archives, free)
    # an archive's size is not in the manifest: the bar grows by it when the server says it
    known = sum(e.size for source, entries in todo if source.kind != "archive" for e in entries)
    progress = _Progress(known + partial_archives, partial_files + partial_archives, show_progress)
    fetcher = _Fetcher(to, mirror or ORIGIN_BASE, progress, needed, jobs)
    jobs_list = []
    for source, entries in todo:
        if source.kind == "archive":
            jobs_list.append((fetcher.archive, (source, entries)))
        else:
            jobs_list += [(getattr(fetcher, source.kind), (source, entry)) for entry in entries]
    try:
        _run_all(fetcher, jobs_list, jobs)
    finally:
        fetcher.close()
        progress.bar.close()
    result.fetched_files = sum(len(entries) for _, entries in todo)
    result.fetched_bytes = sum(e.size for _, entries in todo for e in entries)
    _write_marker(to, result.groups, manifest)
    return result


def _run_all(fetcher: _Fetcher, jobs_list: list, workers: int) -> None:
    """Run the jobs on `workers` threads; the first error stops the rest and is raised."""
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fetch") as pool:
        futures = [pool.submit(fetcher.guarded, fn, *args) for fn, args in jobs_list]
        try:
            wait(futures, return_when=FIRST_EXCEPTION)
        finally:  # an error, or Ctrl-C here: running downloads stop at their next chunk
            fetcher.stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
    errors = [f.exception() for f in futures if f.done() and not f.cancelled() and f.exception()]
    if errors:  # the failure itself, not the jobs it stopped
        raise next((e for e in errors if not isinstance(e, Stopped)), errors[0])


def _write_marker(to: Path, groups: list[str], manifest: Path) -> None:
    marker = to / MARKER_FILE
    previous = json.loads(marker.read_text(encoding="utf-8")).get("groups", []) if marker.is_file() else []
    digest = hashlib.sha256(manifest.read_bytes()).hexdigest()
    marker.write_text(json.dumps({"manifest_sha256": digest, "groups": sorted({*previous, *groups})},
                                 indent=1) + "\n", encoding="utf-8")


def summary(result: FetchResult) -> str:
    fetched = f"fetched {result.fetched_files} files ({human_size(result.fetched_bytes)})"
    return f"{result.data_dir}: {fetched}, {result.complete_files} already complete and verified"

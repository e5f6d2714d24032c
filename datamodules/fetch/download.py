"""One file over HTTP into a `.part` file (resumed with a Range request), and the errors a user can meet.
urllib3 directly, not `requests`, whose per-request cost shows over the manifest's thousands of files."""

from __future__ import annotations

import errno
import threading
import urllib.request
from pathlib import Path
from typing import Callable, Iterable
from urllib.parse import urlsplit

import urllib3

from bioablate_core.console import one_line
from bioablate_core.errors import BioablateError
from bioablate_core.fingerprints import file_sha256  # re-exported: the fetch step and scripts read it here

CHUNK = 1 << 16
TIMEOUT = urllib3.Timeout(connect=15, read=60)  # seconds; read: between two reads
# a refused or failed connection is tried again; a cut body is not (the rerun resumes it)
RETRIES = urllib3.Retry(total=3, connect=2, read=0, status=0, other=0, redirect=3, backoff_factor=0.5)

Progress = Callable[[int], None]  # called with each number of bytes received (negative: discarded)


class FetchError(BioablateError):
    """Fetching the data failed in a way the user can act on."""


class ChecksumError(FetchError):
    def __init__(self, dest: str, url: str, expected: str, actual: str):
        super().__init__(
            f"{dest}: checksum mismatch for {url}: expected sha256 {expected}, got {actual}; the file "
            "was not kept (a changed or corrupted origin or mirror; run again, or use another --mirror)")


class DownloadError(FetchError):
    def __init__(self, url: str, reason: str):
        super().__init__(
            f"cannot download {url}: {reason}; check the network and run the command again (finished "
            "files are kept, a cut download resumes), or fetch from a mirror with --mirror URL (a "
            "tree of <owner>/<repo>/<commit>/<path> files)")


class DiskFullError(FetchError):
    def __init__(self, path: Path, needed: int, free: int | None = None):
        have = f", {human_size(free)} free" if free is not None else ""
        super().__init__(
            f"{path}: not enough disk space (this fetch needs {human_size(needed)}{have}); free some space "
            "or fetch into another folder with --to DIR")


class Stopped(Exception):
    """Another download failed or the user interrupted: stop early, keeping the `.part` to resume."""


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def is_complete(path: Path, size: int, sha256: str) -> bool:
    return path.is_file() and path.stat().st_size == size and file_sha256(path) == sha256


def write_chunks(chunks: Iterable[bytes], part: Path, mode: str, progress: Progress, needed: int,
                 stop: threading.Event) -> None:
    """Write `chunks` to `part` (opened in `mode` once a chunk has come), telling `progress`, until `stop`;
    a full disk removes the part and says the fetch `needed` that many bytes."""
    f = None
    try:
        try:
            for chunk in chunks:
                if stop.is_set():
                    raise Stopped
                if f is None:
                    f = part.open(mode)
                f.write(chunk)
                progress(len(chunk))
            if f is None:  # an empty file
                f = part.open(mode)
        finally:
            if f is not None:
                f.close()
    except OSError as error:
        if error.errno != errno.ENOSPC:
            raise
        part.unlink(missing_ok=True)
        raise DiskFullError(part, needed) from error


def pool_manager(url: str, workers: int) -> urllib3.PoolManager:
    """Connections for `workers` threads, through HTTPS_PROXY/HTTP_PROXY unless NO_PROXY exempts the host."""
    parts = urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    options = dict(maxsize=workers, block=True, retries=RETRIES, timeout=TIMEOUT,
                   headers={"User-Agent": "bioablate-data-fetch", "Accept-Encoding": "identity"})
    if proxy and not urllib.request.proxy_bypass(parts.hostname or ""):
        return urllib3.ProxyManager(proxy, **options)
    return urllib3.PoolManager(**options)


def download(http: urllib3.PoolManager, url: str, part: Path, expected_size: int | None,
             progress: Progress, needed: int, stop: threading.Event,
             on_total: Callable[[int], None] | None = None) -> None:
    """Bring `part` to the whole body of `url` (`expected_size` where known), asking `http` for the rest with
    `Range`; `progress`, `needed` and `stop` as `write_chunks` takes them, and `on_total` is told the body
    size where the manifest does not know it."""
    offset = part.stat().st_size if part.exists() else 0
    if offset and expected_size is not None and offset >= expected_size:
        part.unlink()  # as long as the file or longer, yet never verified: not worth resuming
        progress(-offset)
        offset = 0
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    response = None
    try:
        response = http.request("GET", url, headers=headers, preload_content=False)
        if response.status not in (200, 206):
            raise DownloadError(url, f"HTTP {response.status} {response.reason}")
        if response.status == 206 and not response.headers.get("Content-Range", "").startswith(
                f"bytes {offset}-"):
            raise DownloadError(url, f"the server answered Range {offset}- with "
                                     f"{response.headers.get('Content-Range')!r}")
        if response.status == 200 and offset:
            progress(-offset)
            offset = 0
        if on_total is not None and response.headers.get("Content-Length"):
            on_total(offset + int(response.headers["Content-Length"]))
        write_chunks(response.stream(CHUNK), part, "ab" if offset else "wb", progress, needed, stop)
        response.release_conn()  # read to the end: the connection serves the next file
    except BaseException as error:
        if response is not None:
            response.close()  # a body left unread would garble the connection's next response
        if not isinstance(error, urllib3.exceptions.HTTPError):
            raise
        # MaxRetryError repeats the URL; what the user needs is why (name resolution, refused, ...)
        reason = error.reason if isinstance(error, urllib3.exceptions.MaxRetryError) and error.reason else error
        raise DownloadError(url, one_line(reason, 200)) from error

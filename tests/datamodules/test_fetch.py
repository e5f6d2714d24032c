"""`bioablate data fetch` against a real HTTP server on 127.0.0.1.

The server serves a mirror tree in the origins' layout (`<owner>/<repo>/<commit>/<path>`), built from the
staged data folder by following the package manifest backwards: symlinks for single files, and the DDI
zip packed from the staged members. It honours `Range`, counts the body bytes it sends per path, and can
be told to flip one byte of a file, to cut a connection after N bytes, or to run a hook before a body.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import os
import re
import socket
import sys
import threading
import zipfile
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import pytest

from ablations.cli import main
from ablations.places import resolve_data_dir
from datamodules.fetch import (
    MARKER_FILE,
    DiskFullError,
    DownloadError,
    FetchError,
    default_data_dir,
    fetch_data,
    fetched_data_dir,
    load_manifest,
)
from datamodules.fetch.manifest import DERIVED_DIR
from datamodules.registry import dataset_names, get_dataset
from datamodules.stats import dataset_stats, render


class Mirror(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path):
        super().__init__(("127.0.0.1", 0), MirrorHandler)
        self.root = root
        self.reset()

    def reset(self) -> None:
        self.served: Counter[str] = Counter()  # body bytes sent, per path below the root
        self.ranges: list[tuple[str, str | None]] = []  # (path, Range header) of each GET
        self.flip: set[str] = set()  # paths served with their middle byte inverted
        self.cut_after: dict[str, int] = {}  # path -> close the connection after this many body bytes (once)
        self.before_body = None  # callable(path), run before a body is sent

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):  # a client gave up
            super().handle_error(request, client_address)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class MirrorHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection serves many files
    disable_nagle_algorithm = True  # headers and body are two writes: without this, 40 ms per file
    server: Mirror

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        rel = unquote(self.path.split("?")[0]).lstrip("/")
        path = self.server.root / rel
        if ".." in rel.split("/") or not path.is_file():
            self.send_error(404)
            return
        data = bytearray(path.read_bytes())
        if rel in self.server.flip:
            data[len(data) // 2] ^= 0xFF
        requested = self.headers.get("Range")
        self.server.ranges.append((rel, requested))
        start = 0
        if requested:
            start = int(re.fullmatch(r"bytes=(\d+)-", requested).group(1))
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        self.send_response(206 if requested else 200)
        if requested:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        body = bytes(data[start:])
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.server.before_body is not None:
            self.server.before_body(rel)
        cut = self.server.cut_after.pop(rel, None)
        if cut is not None:
            body = body[:cut]
        self.wfile.write(body)
        self.wfile.flush()
        self.server.served[rel] += len(body)
        if cut is not None:  # the client expects more: it sees the connection end mid-body
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)


def origin_path(source, entry) -> str:
    return "/".join(p for p in (source.repo, source.commit, source.origin_dir, entry.origin) if p)


@pytest.fixture(scope="module")
def mirror(data_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("mirror")
    for source in load_manifest():
        if source.kind == "raw":
            for entry in source.files:
                link = root / origin_path(source, entry)
                link.parent.mkdir(parents=True, exist_ok=True)
                if not link.is_symlink():  # one origin may feed two datasets (GAD/ and BioBERT/RE/GAD/1/)
                    link.symlink_to(data_dir / entry.dest)
        elif source.kind == "archive":
            archive = root / source.repo / source.commit / source.archive
            archive.parent.mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
                zf.writestr(f"{source.origin_dir}/.DS_Store", b"\0\0\0\1Bud1")  # as in the origin's zip
                for entry in source.files:
                    zf.write(data_dir / entry.dest, f"{source.origin_dir}/{entry.origin}")
    server = Mirror(root)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def server(mirror):
    mirror.reset()
    yield mirror
    mirror.reset()


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def entry_of(dest: str):
    for source in load_manifest():
        for entry in source.files:
            if entry.dest == dest:
                return source, entry
    raise KeyError(dest)


def test_manifest_covers_every_file_the_readers_and_vocabularies_use(data_dir):
    entries = {e.dest: e for s in load_manifest() for e in s.files}
    used = set()
    for name in dataset_names():
        for rel in get_dataset(name).files:
            path = data_dir / rel
            files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
            used |= {p.relative_to(data_dir).as_posix() for p in files}
    used |= {p.relative_to(data_dir).as_posix() for p in (data_dir / "vocab").rglob("*") if p.is_file()}
    assert sorted(used - set(entries)) == []
    for dest, entry in entries.items():
        staged = (data_dir / dest).read_bytes()
        assert (len(staged), sha256(staged)) == (entry.size, entry.sha256), dest
    for source in load_manifest():
        if source.kind == "packaged":  # shipped in the package, byte-identical to the staged file
            for entry in source.files:
                assert sha256(source.packaged_path(entry).read_bytes()) == entry.sha256
                assert DERIVED_DIR in source.packaged_path(entry).parents


@pytest.mark.slow
def test_fetch_from_a_loopback_mirror_gives_the_staged_data_stats(capsys, server, data_dir, tmp_path):
    fetched = tmp_path / "data"
    code, out, err = run_cli(capsys, "data", "fetch", "--mirror", server.url, "--to", str(fetched), "--jobs", "8")
    assert code == 0, err
    staged = render([row for name in dataset_names() for row in dataset_stats(get_dataset(name), data_dir)],
                    {name: get_dataset(name).notes for name in dataset_names()})
    assert out.rstrip("\n") == staged
    assert "0 already complete" in err
    # the archive is unpacked as staged (its .DS_Store left out, the zip removed) and nothing else is left
    assert not list(fetched.rglob("*.part")) and not list(fetched.rglob("*.zip"))
    assert not list(fetched.rglob(".DS_Store"))
    assert (fetched / MARKER_FILE).is_file()
    total = sum(len(s.files) for s in load_manifest())
    assert sum(1 for p in fetched.rglob("*") if p.is_file() and p.name != MARKER_FILE) == total

    server.reset()  # a rerun verifies everything and downloads nothing
    result = fetch_data(fetched, mirror=server.url, show_progress=False)
    assert (result.fetched_files, result.complete_files) == (0, total)
    assert sum(server.served.values()) == 0


def test_a_flipped_byte_is_a_checksum_error_that_keeps_nothing(capsys, server, tmp_path):
    source, entry = entry_of("BIOSSES/annotation_pairs_scores.tsv")
    server.flip.add(origin_path(source, entry))
    flipped = bytearray((server.root / origin_path(source, entry)).read_bytes())
    flipped[len(flipped) // 2] ^= 0xFF
    code, out, err = run_cli(capsys, "data", "fetch", "--mirror", server.url, "--to", str(tmp_path),
                             "--only", "biosses")
    message = err.strip()
    assert code == 2 and len(message.splitlines()) == 1, err
    assert entry.dest in message and entry.sha256 in message and sha256(bytes(flipped)) in message
    assert not (tmp_path / entry.dest).exists() and not (tmp_path / (entry.dest + ".part")).exists()
    assert out == ""


def test_a_corrupted_archive_keeps_nothing_of_it(server, tmp_path):
    ddi = next(s for s in load_manifest() if s.kind == "archive")
    server.flip.add(f"{ddi.repo}/{ddi.commit}/{ddi.archive}")
    with pytest.raises(FetchError) as bad:
        fetch_data(tmp_path, only=["ddi"], mirror=server.url, show_progress=False)
    assert ddi.archive in str(bad.value) and "nothing of it was kept" in str(bad.value)
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()] in ([], ["DDI/README"])

    server.flip.clear()  # the origin's zip again: unpacked as staged, the zip removed
    result = fetch_data(tmp_path, only=["ddi"], mirror=server.url, show_progress=False)
    assert result.fetched_files + result.complete_files == 1018
    assert not list(tmp_path.rglob("*.zip*")) and (tmp_path / "DDI/Train/DrugBank").is_dir()


def test_a_cut_download_resumes_with_range_on_the_rerun(server, tmp_path):
    source, entry = entry_of("BC2GM-IOB/train.tsv")  # the largest single file of the manifest
    path = origin_path(source, entry)
    server.cut_after[path] = entry.size // 2
    with pytest.raises(DownloadError) as cut:
        fetch_data(tmp_path, only=["bc2gm"], mirror=server.url, jobs=1, show_progress=False)
    assert f"{server.url}/{path}" in str(cut.value) and "--mirror" in str(cut.value)
    part = tmp_path / (entry.dest + ".part")
    kept = part.stat().st_size  # what reached the disk before the cut (the last partial chunk may not)
    assert 0 < kept <= entry.size // 2 and not (tmp_path / entry.dest).exists()

    server.reset()
    result = fetch_data(tmp_path, only=["bc2gm"], mirror=server.url, jobs=1, show_progress=False)
    assert result.complete_files == 2 and result.fetched_files == 1  # devel/test finished in the first run
    assert server.ranges == [(path, f"bytes={kept}-")]
    assert server.served[path] == entry.size - kept < entry.size
    assert sha256((tmp_path / entry.dest).read_bytes()) == entry.sha256 and not part.exists()


@pytest.mark.parametrize("where", ["missing path", "no server"])
def test_an_unreachable_url_names_it_and_the_mirror_option(capsys, server, tmp_path, where):
    if where == "missing path":
        mirror = f"{server.url}/not-a-mirror"
    else:
        with socket.socket() as probe:  # a port nobody listens on
            probe.bind(("127.0.0.1", 0))
            mirror = f"http://127.0.0.1:{probe.getsockname()[1]}"
    code, _, err = run_cli(capsys, "data", "fetch", "--mirror", mirror, "--to", str(tmp_path), "--only", "gad")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"cannot download {mirror}/BioMedBERT/biomedbert/" in err and "--mirror" in err
    assert ("HTTP 404" in err) == (where == "missing path")
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_an_unknown_only_name_or_an_unusable_folder_is_a_user_error(capsys, tmp_path):
    code, _, err = run_cli(capsys, "data", "fetch", "--to", str(tmp_path), "--only", "bc5chem")
    assert code == 2 and "did you mean 'bc5-chem'" in err
    (tmp_path / "a-file").write_text("")
    code, _, err = run_cli(capsys, "data", "fetch", "--to", str(tmp_path / "a-file" / "data"))
    assert code == 2 and f"{tmp_path / 'a-file' / 'data'}: cannot create the data folder" in err


def test_without_to_the_data_goes_to_the_user_data_dir(server, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_data_dir() == tmp_path / "xdg" / "bioablate" / "data"
    assert fetched_data_dir() is None
    result = fetch_data(only=["biosses", "vocab"], mirror=server.url, show_progress=False)
    assert result.data_dir == default_data_dir() and fetched_data_dir() == default_data_dir()
    assert (default_data_dir() / "BIOSSES" / "blurb_split.tsv").is_file()  # the packaged [derived] file
    assert (default_data_dir() / "vocab" / "pubmedbert-uncased" / "vocab.txt").is_file()
    # and every command finds it with neither --data-dir nor BIOABLATE_DATA
    monkeypatch.delenv("BIOABLATE_DATA", raising=False)
    assert resolve_data_dir(None) == default_data_dir()


@pytest.fixture
def small_disk(tmp_path):
    """A real 1 MiB filesystem (tmpfs); needs the right to mount."""
    mount = tmp_path / "small"
    mount.mkdir()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"tmpfs", str(mount).encode(), b"tmpfs", 0, b"size=1m") != 0:
        pytest.skip(f"cannot mount a tmpfs here ({os.strerror(ctypes.get_errno())}); needs root")
    yield mount
    libc.umount2(str(mount).encode(), 0)


def test_a_fetch_larger_than_the_free_space_says_how_much_it_needs(server, small_disk):
    with pytest.raises(DiskFullError) as full:
        fetch_data(small_disk, only=["bc2gm"], mirror=server.url, show_progress=False)
    needed = sum(e.size for s in load_manifest() if s.group == "bc2gm" for e in s.files)
    assert str(small_disk) in str(full.value) and f"{needed / 2**20:.1f} MiB" in str(full.value)
    assert list(small_disk.iterdir()) == [] and sum(server.served.values()) == 0


def test_a_disk_that_fills_up_during_the_download_is_a_clear_error(server, small_disk):
    def fill_the_disk(path: str) -> None:  # another program takes the free space after the check
        server.before_body = None
        with (small_disk / "filler").open("wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError as error:
                assert error.errno == errno.ENOSPC

    server.before_body = fill_the_disk
    with pytest.raises(DiskFullError) as full:
        fetch_data(small_disk, only=["gad"], mirror=server.url, jobs=1, show_progress=False)
    assert "GAD" in str(full.value) and "not enough disk space" in str(full.value)
    assert [p.name for p in small_disk.rglob("*") if p.is_file()] == ["filler"]  # no .part left


def test_unstaged_files_name_their_origin_and_verify_by_git_blob_id(data_dir):
    from datamodules.fetch.unstaged import git_blob_sha1, load_unstaged, verify

    entries = load_unstaged()
    assert {e.group for e in entries} == {"biobert-qa-train", "bc4chemd", "bioelectra-qa-train",
                                          "bioelectra-rerank-train"}
    assert all(e.size is None and e.sha256 is None for e in entries)  # not staged: not known, not invented
    pins = (data_dir / "MANIFEST.md").read_text(encoding="utf-8")
    assert all(f"{e.repo} @ {e.commit}" in pins for e in entries)
    assert not any((data_dir / e.dest).exists() for e in entries)
    # git's id of the staged BioELECTRA/yesno/train.tsv, as `git ls-tree` lists it at the pinned commit
    staged = (data_dir / "BioELECTRA/yesno/train.tsv").read_bytes()
    assert git_blob_sha1(staged) == "2b53cf61b9d93a195da9a727a3ef4dddc8140936"
    assert git_blob_sha1(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # git's empty blob
    assert not verify(entries[0], staged)
    assert entries[0].url() == ("https://raw.githubusercontent.com/BioMedBERT/biomedbert/"
                                "9e5e1019d79d07c7aecc4eb49106203af1012663/datasets/QA/BioASQ/BioASQ-train-factoid-4b.json")

"""Checkpoint IO (lightning_modules/checkpoints.py): atomic writes inside the checkpoint folder (never the
system temp dir), weights-only reads, unreadable or damaged checkpoints set aside, write errors naming the
file."""

from __future__ import annotations

import errno
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
import torch
from pytorch_lightning.plugins import TorchCheckpointIO

from lightning_modules.checkpoints import AtomicCheckpointIO, usable_checkpoint

REPO_ROOT = Path(__file__).resolve().parents[2]


def checkpoint() -> dict:
    return {"state_dict": {"w": torch.arange(1000, dtype=torch.float32)}, "epoch": 3, "loops": {"a": [1, 2]}}


def test_a_checkpoint_is_written_without_the_system_temp_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-temp-dir"))  # a full or missing /tmp
    path = tmp_path / "run" / "checkpoints" / "last.ckpt"
    with pytest.raises(Exception):  # Lightning's own IO stages the file in the temp dir
        TorchCheckpointIO().save_checkpoint(checkpoint(), path)
    AtomicCheckpointIO().save_checkpoint(checkpoint(), path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["last.ckpt"]  # no temp file left beside it
    loaded = AtomicCheckpointIO().load_checkpoint(path)
    assert loaded["epoch"] == 3 and torch.equal(loaded["state_dict"]["w"], checkpoint()["state_dict"]["w"])


class Payload:
    """Not a tensor or plain container: a weights-only load must refuse to unpickle it."""


def test_checkpoints_are_read_weights_only(tmp_path):
    path = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "payload": Payload()}, path)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        AtomicCheckpointIO().load_checkpoint(path, weights_only=False)  # asked for unsafe: still safe
    assert usable_checkpoint(path) is None  # and it is no checkpoint to resume from


def test_a_truncated_checkpoint_is_set_aside_and_not_resumed(tmp_path, caplog):
    path = tmp_path / "last.ckpt"
    AtomicCheckpointIO().save_checkpoint(checkpoint(), path)
    assert usable_checkpoint(path) == str(path)
    path.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 2])
    assert usable_checkpoint(path, set_aside=False) is None and path.exists()  # a DDP worker only reads
    assert usable_checkpoint(path) is None
    assert not path.exists() and (tmp_path / "last.ckpt.unreadable").exists()
    assert f"checkpoint {path} is unreadable" in caplog.text and "starts from scratch" in caplog.text
    assert usable_checkpoint(path) is None and usable_checkpoint(None) is None


def tensor_bytes_offset(path: Path) -> int:
    """Where the first tensor's bytes start in a checkpoint (a zip archive of uncompressed records)."""
    with zipfile.ZipFile(path) as archive:
        record = next(i for i in archive.infolist() if "/data/" in i.filename and i.file_size >= 1024)
    with open(path, "rb") as f:  # the local header: 30 bytes, then the name and the extra field
        f.seek(record.header_offset + 26)
        name_length, extra_length = struct.unpack("<HH", f.read(4))
    return record.header_offset + 30 + name_length + extra_length


def test_a_checkpoint_whose_tensor_bytes_changed_is_set_aside(tmp_path, caplog):
    path = tmp_path / "last.ckpt"
    AtomicCheckpointIO().save_checkpoint(checkpoint(), path)
    data = bytearray(path.read_bytes())
    start = tensor_bytes_offset(path) + 512
    data[start:start + 64] = bytes(64 * [0x7F])  # 16 float32 weights of 3.4e38, the archive still readable
    path.write_bytes(bytes(data))
    loaded = torch.load(path, weights_only=True)
    assert loaded["state_dict"]["w"].max() > 1e38  # torch reads the changed bytes without a word
    assert usable_checkpoint(path, set_aside=False) is None and path.exists()
    assert usable_checkpoint(path) is None and (tmp_path / "last.ckpt.unreadable").exists()
    assert f"checkpoint {path} is damaged (its tensors do not match the checksum" in caplog.text


def test_a_checkpoint_without_a_checksum_is_read_as_it_is(tmp_path):
    path = tmp_path / "theirs.ckpt"
    torch.save(checkpoint(), path)  # written by something other than AtomicCheckpointIO
    assert usable_checkpoint(path) == str(path)


WRITE_OVER_A_SIZE_LIMIT = """
import resource, signal, sys, torch
from lightning_modules.checkpoints import AtomicCheckpointIO
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit is then an OSError (EFBIG)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
try:
    AtomicCheckpointIO().save_checkpoint({"w": torch.zeros(1 << 20)}, sys.argv[1])  # 4 MiB
except OSError as e:
    print(e.errno, e.filename, e.strerror)
"""


@pytest.mark.slow  # a subprocess under a file-size limit
def test_a_failed_write_names_the_checkpoint_and_leaves_no_partial_file(tmp_path):
    """RLIMIT_FSIZE in a child process stands in for a full disk (same code path: an OSError on write)."""
    path = tmp_path / "checkpoints" / "last.ckpt"
    out = subprocess.run([sys.executable, "-c", WRITE_OVER_A_SIZE_LIMIT, str(path)], capture_output=True,
                         text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, check=True)
    assert out.stdout.split(" ", 2)[:2] == [str(errno.EFBIG), str(path)], out.stdout + out.stderr
    assert list(path.parent.iterdir()) == []  # the partial temp file is gone: its space is free again

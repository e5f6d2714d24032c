"""How training checkpoints are written and read back.

- Written atomically beside their final path, not staged in the system temp dir as fsspec's transaction
  does; a failed write removes its partial file, giving the space back.
- Read with `weights_only=True`: tensors and plain containers, never pickled code.
- Checksummed: torch reads a checkpoint's zip without checking its CRCs, so a CRC-32 of the tensors goes in.
- `usable_checkpoint` sets aside an unreadable or corrupted checkpoint and the run starts over, instead of
  failing on every rerun or training on from corrupted weights.

    trainer = pl.Trainer(..., plugins=[AtomicCheckpointIO()])
    trainer.fit(module, ckpt_path=usable_checkpoint(run.resume_from), weights_only=True)
"""

from __future__ import annotations

import io
import logging
import os
import zlib
from pathlib import Path
from typing import Any, Optional

import torch
from pytorch_lightning.plugins import TorchCheckpointIO

from lightning_modules.timing import section

log = logging.getLogger("bioablate")

CHECKSUM_KEY = "bioablate_tensor_crc32"


def tensor_checksum(checkpoint: Any) -> int:
    """CRC-32 over the bytes of every tensor in `checkpoint`, in its (saved and loaded) order."""
    crc = 0
    stack = [checkpoint]
    while stack:
        value = stack.pop()
        if isinstance(value, torch.Tensor):
            data = value.detach().cpu().contiguous().reshape(-1)
            crc = zlib.crc32(data.view(torch.uint8).numpy(), crc) if data.numel() else crc
        elif isinstance(value, dict):
            stack.extend(v for k, v in reversed(value.items()) if k != CHECKSUM_KEY)
        elif isinstance(value, (list, tuple)):
            stack.extend(reversed(value))
    return crc


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint IO for local paths: atomic writes inside the checkpoint folder, safe reads."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Optional[Any] = None) -> None:
        with section("checkpoint_writes"):  # the run's timing profile (lightning_modules/timing.py)
            self._save(checkpoint, Path(path))

    @staticmethod
    def _save(checkpoint: dict[str, Any], path: Path) -> None:
        buffer = io.BytesIO()  # serialised first: a write error is then Python's OSError, not torch's
        torch.save({**checkpoint, CHECKSUM_KEY: tensor_checksum(checkpoint)}, buffer)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(buffer.getbuffer())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as error:  # full disk, file size limit, read-only: name the checkpoint
            tmp.unlink(missing_ok=True)
            raise OSError(error.errno, error.strerror, str(path)) from error
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def load_checkpoint(self, path: Any, map_location: Optional[Any] = lambda storage, loc: storage,
                        weights_only: Optional[bool] = True) -> dict[str, Any]:
        return super().load_checkpoint(path, map_location=map_location, weights_only=True)


def usable_checkpoint(path: Path | None, set_aside: bool = True) -> str | None:
    """`path` as the `ckpt_path` to resume from, or None when there is none or it is unreadable or fails its
    checksum; with `set_aside` such a one is renamed `<name>.unreadable`. One without a checksum is read as is."""
    if path is None or not Path(path).exists():
        return None
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # truncated zip, bad pickle, I/O error: any way of not being loadable
        fault = f"is unreadable ({type(error).__name__}: {' '.join(str(error).split())[:200]})"
    else:
        intact = not isinstance(loaded, dict) or CHECKSUM_KEY not in loaded or \
            tensor_checksum(loaded) == loaded[CHECKSUM_KEY]
        fault = None if intact else "is damaged (its tensors do not match the checksum written with them)"
    if fault is None:
        return str(path)
    aside = Path(path).with_name(Path(path).name + ".unreadable")
    if set_aside:
        os.replace(path, aside)
    log.warning("checkpoint %s %s; %sthe run starts from scratch", path, fault,
                f"moved to {aside.name}; " if set_aside else "")
    return None


def checkpoint_step(path: Path) -> int:
    """A Lightning checkpoint's `global_step`, read without loading its tensors."""
    return int(torch.load(path, map_location="cpu", weights_only=True, mmap=True)["global_step"])

"""How training checkpoints are written and read back.

- Written atomically beside their final path (`.last.ckpt.<pid>.tmp`, then renamed): Lightning's default
  goes through fsspec's transaction, which stages the whole file in the system temp dir, so a full /tmp
  broke runs whose work dir had room. A failed write removes its partial file, giving the space back (on
  a full disk the run can then still be marked FAILED in a store on the same disk).
- Read with `weights_only=True`: a checkpoint is tensors and plain containers, never pickled code.
- `usable_checkpoint` checks a checkpoint before a run resumes from it: an unreadable one (truncated by a
  crash or a full disk) is set aside with a warning and the run starts over, instead of failing the same
  way on every rerun.

    trainer = pl.Trainer(..., plugins=[AtomicCheckpointIO()])
    trainer.fit(module, ckpt_path=usable_checkpoint(run.resume_from), weights_only=True)
"""

from __future__ import annotations

import io
import logging
import os
from pathlib import Path
from typing import Any, Optional

import torch
from pytorch_lightning.plugins import TorchCheckpointIO

from lightning_modules.timing import section

log = logging.getLogger("bioablate")


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint IO for local paths: atomic writes inside the checkpoint folder, safe reads."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Optional[Any] = None) -> None:
        with section("checkpoint_writes"):  # the run's timing profile (lightning_modules/timing.py)
            self._save(checkpoint, Path(path))

    @staticmethod
    def _save(checkpoint: dict[str, Any], path: Path) -> None:
        buffer = io.BytesIO()  # serialised first: a write error is then Python's OSError, not torch's
        torch.save(checkpoint, buffer)
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
    """`path` as the `ckpt_path` to resume from, or None (start from scratch) when there is none or it
    cannot be read; an unreadable one is renamed to `<name>.unreadable` (when `set_aside`: the process
    that owns the run) so that the next run does not trip over it again."""
    if path is None or not Path(path).exists():
        return None
    try:
        torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # truncated zip, bad pickle, I/O error: any way of not being loadable
        reason = " ".join(str(error).split())[:200]
        aside = Path(path).with_name(Path(path).name + ".unreadable")
        if set_aside:
            os.replace(path, aside)
        log.warning("checkpoint %s is unreadable (%s: %s); %sthe run starts from scratch", path,
                    type(error).__name__, reason, f"moved to {aside.name}; " if set_aside else "")
        return None
    return str(path)


def checkpoint_step(path: Path) -> int:
    """The optimizer steps a Lightning checkpoint had taken (`global_step`), read without loading its
    tensors into memory. Lightning logs the points of the k-th batch (and the validation after it) at
    step k - 1 (0-based), so the points logged before the checkpoint are those below this step."""
    return int(torch.load(path, map_location="cpu", weights_only=True, mmap=True)["global_step"])

"""A real Hugging Face Hub cache on disk, for tests that resolve Hub ids offline (HF_HUB_OFFLINE=1).

The layout is huggingface_hub's own (see its `scan_cache_dir` and `snapshot_download`):

    <HF_HUB_CACHE>/models--ORG--NAME/blobs/<content hash>          the file contents, stored once
                                    /snapshots/<commit>/<file>      relative symlinks into blobs/
                                    /refs/<branch or tag>           the commit the name points at

The models are tiny BERTs written with `save_pretrained` (weights, config, tokenizer).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch
from transformers import BertConfig, BertModel, BertTokenizer


def tiny_bert(folder: Path, vocab_txt: Path, seed: int = 0) -> Path:
    """A 1-layer, 32-wide BERT and its (uncased) tokenizer, saved with `save_pretrained` into `folder`."""
    tokenizer = BertTokenizer(vocab=str(vocab_txt), do_lower_case=True)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def repo_folder(cache: Path, hub_id: str) -> Path:
    return cache / ("models--" + hub_id.replace("/", "--"))


def add_snapshot(cache: Path, hub_id: str, commit: str, model_dir: Path, refs: tuple[str, ...] = ("main",)) -> Path:
    """Put the files of `model_dir` into `cache` as commit `commit` of `hub_id`, with `refs` pointing at it;
    returns the snapshot folder."""
    repo = repo_folder(cache, hub_id)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "blobs").mkdir(exist_ok=True)
    for file in sorted(p for p in model_dir.iterdir() if p.is_file()):
        data = file.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / file.name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(blob, snapshot))
    for ref in refs:
        point_ref(cache, hub_id, ref, commit)
    return snapshot


def point_ref(cache: Path, hub_id: str, ref: str, commit: str) -> None:
    path = repo_folder(cache, hub_id) / "refs" / ref
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(commit)  # no newline: huggingface_hub writes (and reads) the bare hash


def offline_environment(hf_home: Path) -> dict[str, str]:
    """os.environ for a process that must find Hub models in `hf_home`'s cache (`hf_home`/hub) only."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE")}
    return {**env, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1"}

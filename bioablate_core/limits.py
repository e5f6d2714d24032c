"""Ceilings on every count and size a config or a command line gives, and what this machine has.

A typo in a count (`trainer.num_workers=100000`) must fail as one line before anything is started or
allocated; the checks are in ablations/checks.py. Machine figures are read when asked, so tests can
monkeypatch `cpus`, `ram_bytes` and `gpus`.
"""

from __future__ import annotations

import os
from typing import Any

from omegaconf import ListConfig

from bioablate_core.errors import ConfigError

# Fixed ceilings, far above any published setting, so only a typo (an extra zero or three) meets one.
MAX_STEPS = 10_000_000  # optimizer steps of a pretraining run (BERT: 1M, PubMedBERT: 62.5k)
MAX_ALUM_STEPS = 100  # ALUM's ascent steps per training step (the paper: 1)
MAX_BATCH = 65_536  # examples (or sequences) per batch on one device
MAX_ACCUMULATE = 65_536  # micro-batches per optimizer step
MAX_VOCAB = 1_000_000  # entries of a trained vocabulary (WordPiece: 30k-50k; multilingual models: 250k)
WORKERS_PER_CPU = 4  # DataLoader workers per CPU: beyond that they only wait for a core
# MLflow's limits on what a run stores (mlflow/utils/validation.py): an experiment's name, a param's value
MAX_EXPERIMENT_NAME = 500
MAX_PARAM_VALUE = 6000

# a user's value quoted in an error line is cut to this many characters
QUOTE_CHARS = 200
# An error line longer than this (a quote with spaces in it) keeps its start and its end, where the fix is
LINE_CHARS = 2000
ELLIPSIS = "…"


def check_vocab_size(size: int, given: str, fix: str, key: str) -> None:
    """A vocabulary to train of at most MAX_VOCAB entries, since the trainer's memory grows with it; the error
    names the value as `given`, the `key` and a `fix`."""
    if size > MAX_VOCAB:
        raise ConfigError(f"{given}: a vocabulary of at most {MAX_VOCAB:,} entries is trained (BERT's has "
                          f"30,522); use e.g. {fix} ({key})")


def cpus() -> int:
    """The CPUs this process may run on (its affinity: a SLURM job's share, not the node's)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # macOS, Windows: no affinity call
        return os.cpu_count() or 1


def ram_bytes() -> int:
    import psutil

    return int(psutil.virtual_memory().total)


def gpus() -> int:
    """CUDA devices torch sees (0 without CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


def quoted(value: object, limit: int = QUOTE_CHARS) -> str:
    """`value` as text for an error line: at most `limit` characters, an ellipsis where it was cut."""
    text = str(value)
    return text if len(text) <= limit else text[:limit] + ELLIPSIS


def readable(line: str) -> str:
    """An error line cut to a readable length: every run without a space to QUOTE_CHARS, then the whole
    to LINE_CHARS, keeping its start and end."""
    words = line.split(" ")
    if any(len(w) > QUOTE_CHARS for w in words):
        line = " ".join(quoted(w) for w in words)
    if len(line) > LINE_CHARS:
        head, tail = LINE_CHARS * 2 // 3, LINE_CHARS // 3
        line = f"{line[:head]} {ELLIPSIS} {line[-tail:]}"
    return line


# ---------------------------------------------------------------------------------------------------
# What this machine has: each count a run config gives held against it before a process or a tensor exists,
# and before Lightning is imported.

AUTO = "auto"
NEW_MODEL = "random-bert"  # lightning_modules.models.RANDOM_BERT: a model built from the config's sizes
BERT_VOCAB = 30_522  # the staged vocabularies' size, for a new model's memory where its vocabulary is not read
BERT_BASE = {"num_layers": 12, "hidden_size": 768, "intermediate_size": 3072}  # what "too large" is measured by
TRAINING_BYTES = 16  # per parameter trained here: fp32 weights, gradients and AdamW's two moments
# Lightning's strategies that run on CUDA devices only (it says so once the run exists, in a traceback)
GPU_STRATEGIES = ("fsdp",)


def check_machine(cfg: Any) -> None:
    """`trainer.devices`, `num_workers`, `num_nodes` and a new model's memory against this machine, each a
    ConfigError line; keys the config lacks pass."""
    trainer = cfg.get("trainer") or {}
    accelerator = str(trainer.get("accelerator", AUTO))
    present = gpus() if accelerator in (AUTO, "gpu", "cuda") else 0
    on_gpu = accelerator in ("gpu", "cuda") or (accelerator == AUTO and present > 0)
    # (a GPU named where there is none is ablations/checks.py's `check_accelerator_present` line)
    if "devices" in trainer and ((on_gpu and present) or (not on_gpu and accelerator in (AUTO, "cpu"))):
        _check_device_count(trainer["devices"], present if on_gpu else cpus(), on_gpu)
    strategy = str(trainer.get("strategy", AUTO))
    if strategy.startswith(GPU_STRATEGIES) and not on_gpu:
        raise ConfigError(f"trainer.strategy = {strategy}: needs a GPU accelerator, and the run is on the CPU "
                          f"(trainer.accelerator = {accelerator}"
                          f"{', and this machine has no GPU' if accelerator == AUTO else ''}"
                          "); use trainer.strategy=ddp or auto here, or trainer.accelerator=gpu where there is a GPU "
                          "(config key trainer.strategy)")
    workers, most = trainer.get("num_workers", 0), WORKERS_PER_CPU * cpus()
    if workers > most:
        raise ConfigError(f"trainer.num_workers = {workers}: more than {WORKERS_PER_CPU} DataLoader worker "
                          f"processes per CPU, and this machine has {cpus()} CPUs; use trainer.num_workers={most} "
                          "or fewer (0 loads in the training process) (config key trainer.num_workers)")
    _check_nodes(trainer.get("num_nodes", 1))
    if "model" in cfg:
        _check_model_memory(cfg, on_gpu)


def _device_count(devices: Any) -> tuple[int | None, int]:
    """(devices `devices` asks for, None for all; the highest index it names, -1 for none)."""
    if isinstance(devices, (list, tuple, ListConfig)):
        return len(devices), max(devices)
    text = str(devices).strip()
    if text in (AUTO, "-1"):
        return None, -1
    if "," in text:
        indices = [int(i) for i in text.split(",") if i]
        return len(indices), max(indices)
    return int(text), -1


def _check_device_count(devices: Any, present: int, on_gpu: bool) -> None:
    count, highest = _device_count(devices)
    shown = quoted(devices, 40)
    if on_gpu and highest >= present:
        raise ConfigError(f"trainer.devices = {shown}: names GPU {highest}, and this machine has {present} GPUs "
                          f"(0 to {present - 1}); name GPUs below {present} (config key trainer.devices)")
    if count is not None and count > present:
        kind, each = (("GPUs", "a process on each") if on_gpu else
                      ("CPUs", "a process each, and more processes than CPUs make no progress"))
        raise ConfigError(f"trainer.devices = {shown}: this machine has {present} {kind} ({each}); use "
                          f"trainer.devices={present} or fewer, or run where there are more "
                          "(config key trainer.devices)")


def _check_nodes(nodes: int) -> None:
    """Outside SLURM and torchrun a run has one node: Lightning would wait for ever for the others."""
    if nodes == 1 or any(v in os.environ for v in ("WORLD_SIZE", "MASTER_ADDR", "TORCHELASTIC_RUN_ID")):
        return  # one node, or a launcher of the user's own that sets the ranks up
    job_nodes = os.environ.get("SLURM_NNODES") or os.environ.get("SLURM_JOB_NUM_NODES")
    if "SLURM_NTASKS" in os.environ and job_nodes:
        if int(job_nodes) != nodes:
            raise ConfigError(f"trainer.num_nodes = {nodes}: this SLURM job has {job_nodes} nodes (SLURM_NNODES); "
                              f"use trainer.num_nodes={job_nodes}, or ask for {nodes} with launcher.nodes={nodes} "
                              "(bioablate pretrain --nodes) (config key trainer.num_nodes)")
        return
    raise ConfigError(f"trainer.num_nodes = {nodes}: a run started here has this one node (no SLURM job or "
                      "torchrun sets up others) and would wait for ever for the rest; use trainer.num_nodes=1, or "
                      "run across nodes with --launcher slurm and launcher.nodes (config key trainer.num_nodes)")


def parameters(model: Any, vocab: int, layers: int | None = None) -> int:
    """A BERT encoder's parameters from its sizes (`layers`: those with weights of their own)."""
    h, i = int(model["hidden_size"]), int(model["intermediate_size"])
    embeddings = (vocab + int(model.get("max_position_embeddings", 512)) + 2) * h + 2 * h
    layer = 4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h
    return embeddings + (int(model["num_layers"]) if layers is None else layers) * layer


def _model_to_build(cfg: Any) -> tuple[int, int | None] | None:
    """(vocabulary size, layers with weights of their own) of a new model built from `model.*`, else None."""
    if cfg.get("task") == "pretrain":
        pretrain = cfg.get("pretrain") or {}
        if str(pretrain.get("init", "scratch")) != "scratch":
            return None
        parts = str(pretrain.get("vocab", "")).split(":")
        vocab = int(parts[1]) if parts[0] == "train" and len(parts) > 1 and parts[1].isdigit() else BERT_VOCAB
        shared = pretrain.get("objective") == "albert" and pretrain.get("share_layers", True)
        return vocab, 1 if shared else None
    return (BERT_VOCAB, None) if str(cfg["model"].get("name_or_path")) == NEW_MODEL else None


def _check_model_memory(cfg: Any, on_gpu: bool) -> None:
    """A new model's training state (on a GPU run, its weights alone) against the RAM, before allocating."""
    build = _model_to_build(cfg)
    if build is None:
        return
    model = cfg["model"]
    count = parameters(model, *build)
    need, ram = count * (4 if on_gpu else TRAINING_BYTES), ram_bytes()
    if need <= ram:
        return
    key = max(BERT_BASE, key=lambda k: int(model[k]) / BERT_BASE[k])  # the size furthest above BERT-base's
    state = "its fp32 weights" if on_gpu else "its fp32 weights, gradients and AdamW's two moments"
    raise ConfigError(f"model.{key} = {model[key]}: a model of hidden_size {model['hidden_size']}, num_layers "
                      f"{model['num_layers']} and intermediate_size {model['intermediate_size']} has about "
                      f"{count:.2g} parameters, {gib(need)} for {state}, more than this machine's {gib(ram)} of "
                      f"RAM; make model.{key} (or the other sizes) smaller (config key model.{key})")

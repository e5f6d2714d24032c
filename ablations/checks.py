"""Values the schema's types and ranges let through but Lightning or transformers would reject once a run
exists (a FAILED run and a traceback): refused as one ConfigError line naming the key, before any run.

- `check_names`: the task and the `finetune.*` (or `pretrain.*`) options a config names, before anything heavy is
  imported
  (a typo answers in well under a second; called first where a run config is built).
- `check_run_config`: what the config alone decides: the precision and accelerator names Lightning knows,
  `trainer.devices`, and a model width the attention heads divide. Called wherever a run config is built
  (ablations/config.py `build_config`, an experiment's cells) and again by the runs themselves.
- `check_max_length`: an explicit `finetune.max_length` the model's position embeddings cannot take.
- `check_accelerator_present`: what the machine decides: `trainer.accelerator=gpu` where there is none,
  and the counts `bioablate_core.limits.check_machine` holds against it. Called just before a run starts here,
  not when a config is built: a config may be built on a login node for jobs that run on GPU nodes (`--launcher
  slurm`), or read back to render a table.
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any, Iterator

from omegaconf import DictConfig, ListConfig, OmegaConf

from bioablate_core import limits
from bioablate_core.errors import ConfigError, UnknownNameError

AUTO = "auto"
# `trainer.devices` as a string: a count, -1 (all), or device indices "0,1" (Lightning's own parsing)
DEVICE_INDICES = re.compile(r"\d+(,\d+)*,?")


# The precision and accelerator names the installed Lightning accepts, written out: reading them from the
# library imported Lightning (about 9 s of a 2-core CPU), which made `run --dry-run` and `table` wait on it.
# tests/ablations/test_checks.py compares both with the installed Lightning's, so an upgrade that changes
# them fails there.
PRECISIONS = ("transformer-engine", "transformer-engine-float16", "16-true", "16-mixed", "bf16-true", "bf16-mixed",
              "32-true", "64-true", "64", "32", "16", "bf16")
# its AcceleratorRegistry, `gpu` (CUDA or MPS) and `auto`
ACCELERATORS = (AUTO, "gpu", "cpu", "cuda", "mps", "tpu")
# its StrategyRegistry and `auto` (compared there too)
STRATEGIES = (AUTO, "ddp", "ddp_find_unused_parameters_false", "ddp_find_unused_parameters_true", "ddp_fork",
              "ddp_fork_find_unused_parameters_false", "ddp_fork_find_unused_parameters_true", "ddp_notebook",
              "ddp_notebook_find_unused_parameters_false", "ddp_notebook_find_unused_parameters_true", "ddp_spawn",
              "ddp_spawn_find_unused_parameters_false", "ddp_spawn_find_unused_parameters_true", "deepspeed",
              "deepspeed_stage_1", "deepspeed_stage_2", "deepspeed_stage_2_offload", "deepspeed_stage_3",
              "deepspeed_stage_3_offload", "deepspeed_stage_3_offload_nvme", "fsdp", "fsdp_cpu_offload",
              "single_device", "single_tpu", "single_xla", "xla", "xla_debug")
# What a strategy or precision plugin needs installed, by the start of its name: (module, pip package). Lightning
# says so only once a Trainer is built, inside the run (a traceback and a FAILED run).
PLUGINS = {"deepspeed": ("deepspeed", "deepspeed"), "xla": ("torch_xla", "torch_xla"),
           "single_xla": ("torch_xla", "torch_xla"), "single_tpu": ("torch_xla", "torch_xla"),
           "transformer-engine": ("transformer_engine", "transformer-engine")}
# Strategies whose processes Lightning starts itself (multiprocessing's spawn or fork): a run's results (its
# dev scores per epoch, its test scores) stay in those processes, and the run ended FAILED after training.
# `ddp` reruns the command once per device instead, each process holding its own results.
STARTED_IN_PROCESSES = ("ddp_spawn", "ddp_fork", "ddp_notebook")
# torch.compile's modes (torch._inductor.list_mode_options(); reduce-overhead: CUDA graphs): `trainer.compile_mode`
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs", "lite")


def check_names(cfg: DictConfig) -> None:
    """A fine-tuning config's task (after registering its `datasets` files) and its `finetune.*` options,
    or a pretraining config's `pretrain.*` options, each checked against the torch-free registries: the
    checks a run makes again, answered without importing Lightning, MLflow, transformers or torch."""
    from lightning_modules.choice_names import CHOICES, check_choices, check_pretrain_choices

    if cfg.get("task") == "pretrain":
        check_pretrain_choices(cfg.pretrain)
        return
    if cfg.get("task") is None:
        return
    from datamodules.custom import register_from_yaml
    from datamodules.registry import get_dataset

    for dataset_file in cfg.get("datasets") or []:
        register_from_yaml(dataset_file)
    spec = get_dataset(cfg.task)
    check_choices({choice.key: cfg.finetune[choice.key] for choice in CHOICES}, spec)


def check_run_config(cfg: DictConfig) -> None:
    """A built run config's trainer and model settings, checked against the libraries' rules."""
    trainer = cfg.trainer
    _check_installed("precision", str(trainer.precision), PRECISIONS)
    if str(trainer.accelerator) not in ACCELERATORS:
        raise ConfigError(f"trainer.accelerator: "
                          f"{UnknownNameError('accelerator', trainer.accelerator, ACCELERATORS)}")
    _check_installed("strategy", str(trainer.strategy), STRATEGIES)
    if str(trainer.strategy).startswith(STARTED_IN_PROCESSES):
        raise ConfigError(f"trainer.strategy = {trainer.strategy}: trains in processes Lightning starts itself, "
                          "whose results (the dev and test scores) do not come back to the run; use "
                          "trainer.strategy=ddp, which starts one process per device that keeps its own "
                          "(config key trainer.strategy)")
    if str(trainer.compile_mode) not in COMPILE_MODES:  # fine-tuning compiles without a mode: a typo all the same
        raise ConfigError(f"trainer.compile_mode={str(trainer.compile_mode)!r}: expected one of "
                          f"{', '.join(COMPILE_MODES)} (torch.compile's modes; config key trainer.compile_mode)")
    check_devices(trainer.devices)
    if "launcher" in cfg:  # read only when jobs are submitted: a typo would pass every run here in silence
        from ablations.launch.slurm import minutes  # the launch package imports the experiment layer, and it this

        minutes(cfg.launcher.time)
    check_lengths(cfg)
    if cfg.get("task") == "pretrain":
        check_vocab_size(str(cfg.pretrain.vocab))
    model = cfg.model
    if model.hidden_size % model.num_heads:
        lower = model.hidden_size - model.hidden_size % model.num_heads
        fits = f"{lower} or {lower + model.num_heads}" if lower else str(model.num_heads)
        raise ConfigError(f"model.hidden_size = {model.hidden_size}: not divisible by model.num_heads = "
                          f"{model.num_heads} (each attention head takes an equal share of the width); use "
                          f"model.hidden_size={fits}, or another number of heads (config key model.hidden_size)")


def _plugin(name: str) -> tuple[str, str] | None:
    """(module, pip package) that Lightning's `name` needs and this environment lacks; None when it has it."""
    import importlib.util

    need = next((need for start, need in PLUGINS.items() if name.startswith(start)), None)
    return need if need is not None and importlib.util.find_spec(need[0]) is None else None


def _check_installed(kind: str, name: str, names: tuple[str, ...]) -> None:
    """`trainer.<kind>` one of Lightning's `names` whose plugin is installed; the line lists those a run takes
    here."""
    here = [n for n in names if _plugin(n) is None and not n.startswith(STARTED_IN_PROCESSES)]
    if name not in names:
        raise ConfigError(f"trainer.{kind}: {UnknownNameError(kind, name, here)} (config key trainer.{kind})")
    missing = _plugin(name)
    if missing is not None:
        raise ConfigError(f"trainer.{kind} = {name}: needs the {missing[0]} package, which is not installed here "
                          f"(pip install {missing[1]}); available here: {', '.join(here)} (config key trainer.{kind})")


def check_lengths(cfg: DictConfig) -> None:
    """Every string of the config within what the MLflow store takes: the experiment's name (500 characters)
    and each value logged as a param (6000); longer, the store refuses it after the run exists."""
    name = str(cfg.get("experiment_name", ""))
    if len(name) > limits.MAX_EXPERIMENT_NAME:
        raise ConfigError(f"experiment_name '{limits.quoted(name, 40)}' has {len(name):,} characters: the MLflow "
                          f"store takes at most {limits.MAX_EXPERIMENT_NAME}; give a shorter name "
                          "(config key experiment_name)")
    for key, value in _strings(OmegaConf.to_container(cfg, resolve=True)):
        if len(value) > limits.MAX_PARAM_VALUE:
            raise ConfigError(f"{key} = '{limits.quoted(value, 40)}' has {len(value):,} characters: the MLflow "
                              f"store takes a value of at most {limits.MAX_PARAM_VALUE}; give a shorter one "
                              f"(config key {key})")


def _strings(node: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(dotted key, value) of every string in a config container, lists' items included."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for name, value in items:
        key = f"{prefix}.{name}" if prefix else str(name)
        if isinstance(value, str):
            yield key, value
        else:
            yield from _strings(value, key)


def check_vocab_size(vocab: str, key: str = "pretrain.vocab") -> None:
    """A `train:SIZE` vocabulary within the ceiling (the trainer's memory grows with SIZE)."""
    parts = vocab.split(":")
    if parts[0] == "train" and len(parts) > 1 and parts[1].isdigit():
        limits.check_vocab_size(int(parts[1]), f"{key} = {limits.quoted(vocab, 40)}", f"{key}=train:30522",
                                f"config key {key}")


def check_max_length(cfg: DictConfig) -> None:
    """An explicit finetune.max_length the model cannot take is an error (never silently clamped: the
    logged param would then name a length the run did not use)."""
    if cfg.finetune.max_length is None:  # the dataset's own length, which every encoder here takes
        return
    from lightning_modules.models import max_positions

    limit = max_positions(cfg.model)
    if cfg.finetune.max_length > limit:
        raise ConfigError(f"finetune.max_length = {cfg.finetune.max_length}: above the maximum input length "
                          f"of model '{cfg.model.name_or_path}' ({limit} positions); set finetune.max_length "
                          f"<= {limit} (config key finetune.max_length)")


def check_devices(devices: Any) -> None:
    """A count >= 1, -1 (all), `auto`, or device indices (a list, or "0,1"): what Lightning accepts."""
    if isinstance(devices, ListConfig):
        devices = list(devices)
    if isinstance(devices, bool):
        ok = False
    elif isinstance(devices, int):
        ok = devices >= 1 or devices == -1
    elif isinstance(devices, str):
        text = devices.strip()
        ok = text in (AUTO, "-1") or (bool(DEVICE_INDICES.fullmatch(text)) and
                                       (text.count(",") > 0 or int(text) >= 1))
    elif isinstance(devices, list):
        ok = bool(devices) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in devices) \
            and len(set(devices)) == len(devices)
    else:
        ok = False
    if not ok:
        raise ConfigError(f"trainer.devices = {devices!r}: expected a number of devices >= 1, -1 (all of them), "
                          "'auto', or device indices such as [0, 1] (config key trainer.devices)")


def accelerator_available(name: str) -> bool:
    from pytorch_lightning.accelerators import AcceleratorRegistry

    if name in (AUTO, "cpu"):
        return True
    if name == "gpu":  # Lightning's word for CUDA or Apple MPS, whichever there is
        return any(accelerator_available(n) for n in ("cuda", "mps"))
    return bool(AcceleratorRegistry[name]["accelerator"].is_available())


def check_accelerator_present(cfg: DictConfig) -> None:
    """`trainer.accelerator` names a device this machine has (after `check_run_config` checked the name),
    and on the CPU (named, or what `auto` finds) `trainer.devices` is a count: device indices name GPUs."""
    name = str(cfg.trainer.accelerator)
    if not accelerator_available(name):
        raise ConfigError(f"trainer.accelerator = {name}: this machine has no {name} device (torch sees none); "
                          "use trainer.accelerator=cpu or auto here, or run where there is one "
                          "(config key trainer.accelerator)")
    on_cpu = name == "cpu" or (name == AUTO and not any(accelerator_available(n) for n in ("cuda", "mps", "tpu")))
    devices = cfg.trainer.get("devices", 1)
    text = str(devices).strip()
    if on_cpu and not (text == AUTO or (text.isdigit() and int(text) >= 1)):
        raise ConfigError(f"trainer.devices = {devices}: on the CPU, devices is a number of processes >= 1 "
                          "(indices and -1 name GPUs); e.g. trainer.devices=1 (config key trainer.devices)")
    if on_cpu and str(cfg.trainer.get("precision", "")).startswith("bf16"):
        _say_bf16_is_emulated()
    limits.check_machine(cfg)


@functools.cache  # once per process: an experiment checks every run
def _say_bf16_is_emulated() -> None:
    """A warning where this CPU has no bf16 instructions oneDNN computes with (AVX-512, AMX): bf16 autocast
    then converts every operand, and a MiniLM training step ran 17-25x slower than in fp32 on an AVX2 CPU
    (experiments/table12_heads_minilm.yaml)."""
    import torch

    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        logging.getLogger("bioablate").warning(
            "trainer.precision is bf16 on a CPU without bf16 instructions (%s): each step converts its operands "
            "and can run 20x slower than fp32; pass trainer.precision=32-true here",
            torch.backends.cpu.get_cpu_capability())


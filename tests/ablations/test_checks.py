"""Values Lightning or transformers would reject once a run exists (ablations/checks.py), refused as one
line before any run: precision and accelerator names, trainer.devices, a width the heads divide, an
accelerator this machine lacks. Each of issue 27's cases goes through the real command line and must leave
no tracking store behind."""

from __future__ import annotations

import pytest
import torch
import yaml
from pytorch_lightning import Trainer

from ablations.checks import (
    ACCELERATORS,
    COMPILE_MODES,
    PRECISIONS,
    STRATEGIES,
    _plugin,
    check_accelerator_present,
    check_devices,
)
from ablations.config import build_config
from bioablate_core.errors import ConfigError
from tests.cli import bioablate_in_process

MICRO = ["finetune.max_train_examples=16", "finetune.max_eval_examples=16", "finetune.max_length=32",
         "trainer.progress_bar=false"]
NO_GPU = not torch.cuda.is_available() and not torch.backends.mps.is_available()
DEVICES = "expected a number of devices >= 1, -1 (all of them), 'auto', or device indices such as [0, 1]"
# the precisions a run takes here: Lightning's names whose plugin is installed (transformer-engine's is not, mostly)
INSTALLED = ", ".join(sorted(p for p in PRECISIONS if _plugin(p) is None))


@pytest.mark.parametrize("precision", PRECISIONS)
def test_every_precision_lightning_names_is_accepted_where_its_plugin_is_installed(precision):
    if _plugin(precision) is None:
        assert build_config("micro", [f"trainer.precision={precision}"], task="gad").trainer.precision == precision
        return
    module, package = _plugin(precision)
    with pytest.raises(ConfigError) as error:
        build_config("micro", [f"trainer.precision={precision}"], task="gad")
    assert str(error.value) == (f"trainer.precision = {precision}: needs the {module} package, which is not installed "
                                f"here (pip install {package}); available here: "
                                f"{', '.join(p for p in PRECISIONS if _plugin(p) is None)} "
                                "(config key trainer.precision)")


def test_the_accepted_names_are_lightnings_own():
    """A name refused here must be one the installed Lightning refuses too (and the reverse)."""
    for name in ("32-true", "bf16-mixed", "bogus", "fp16"):
        try:
            Trainer(precision=name, accelerator="cpu", logger=False, enable_checkpointing=False)
            lightning_accepts = True
        except (ValueError, RuntimeError):
            lightning_accepts = False
        assert (name in PRECISIONS) == lightning_accepts, name


def test_the_names_written_out_are_the_installed_lightnings():
    """PRECISIONS and ACCELERATORS are written out so that a config check imports no Lightning: they must be
    exactly what the installed Lightning names (an upgrade that changes them fails here)."""
    import typing

    from lightning_fabric.connector import _PRECISION_INPUT_STR, _PRECISION_INPUT_STR_ALIAS
    from pytorch_lightning.accelerators import AcceleratorRegistry

    assert PRECISIONS == (*typing.get_args(_PRECISION_INPUT_STR), *typing.get_args(_PRECISION_INPUT_STR_ALIAS))
    assert ACCELERATORS == ("auto", "gpu", *sorted(AcceleratorRegistry.available_accelerators()))
    from pytorch_lightning.strategies import StrategyRegistry
    from torch._inductor import list_mode_options

    assert STRATEGIES == ("auto", *sorted(StrategyRegistry.available_strategies()))
    assert set(COMPILE_MODES) == set(list_mode_options())


@pytest.mark.parametrize("override,message", [
    ("trainer.precision=bogus", f"trainer.precision: unknown precision 'bogus'; known: {INSTALLED} "
                                "(config key trainer.precision)"),
    ("trainer.precision=bf16-mixd", "(did you mean 'bf16-mixed'?)"),
    ("trainer.accelerator=gpux", "trainer.accelerator: unknown accelerator 'gpux'; known: auto, cpu, cuda, gpu, "
                                 "mps, tpu (did you mean 'gpu'?)"),
    ("trainer.devices=0", f"trainer.devices = 0: {DEVICES} (config key trainer.devices)"),
    ("trainer.devices=-2", f"trainer.devices = -2: {DEVICES}"),
    ("trainer.devices=[]", f"trainer.devices = []: {DEVICES}"),
    ("trainer.devices=[0,0]", f"trainer.devices = [0, 0]: {DEVICES}"),
    ("trainer.devices=many", f"trainer.devices = 'many': {DEVICES}"),
    ("launcher.time=bogus", "launcher.time: 'bogus' is not a time limit; use minutes (240), H:MM:SS (4:00:00) or "
                            "D-HH:MM:SS (1-00:00:00)"),
    ("launcher.time=4h", "launcher.time: '4h' is not a time limit"),
    ("model.hidden_size=65", "model.hidden_size = 65: not divisible by model.num_heads = 2 (each attention head "
                             "takes an equal share of the width); use model.hidden_size=64 or 66, or another "
                             "number of heads (config key model.hidden_size)"),
    ("model.num_heads=128", "model.hidden_size = 64: not divisible by model.num_heads = 128 (each attention head "
                            "takes an equal share of the width); use model.hidden_size=128"),
])
def test_a_value_the_libraries_reject_is_refused_when_the_config_is_built(override, message):
    with pytest.raises(ConfigError) as error:
        build_config("micro", [override], task="gad")
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("time", ["240", "1-00:00:00"])
def test_launcher_times_slurm_takes_pass(time):
    assert build_config("micro", [f"launcher.time={time}"], task="gad").launcher.time == time


@pytest.mark.parametrize("devices", [1, 4, -1, "auto", "2", "-1", "0,1", [0], [1, 3]])
def test_device_settings_lightning_takes_pass(devices):
    check_devices(devices)


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")
@pytest.mark.parametrize("accelerator", ["gpu", "cuda"])
def test_a_gpu_on_a_machine_without_one_is_refused(accelerator):
    cfg = build_config("micro", [f"trainer.accelerator={accelerator}"], task="gad")  # a config may be built
    with pytest.raises(ConfigError) as error:  # (for a cluster's GPU nodes), not run here
        check_accelerator_present(cfg)
    assert str(error.value) == (f"trainer.accelerator = {accelerator}: this machine has no {accelerator} device "
                                f"(torch sees none); use trainer.accelerator=cpu or auto here, or run where there "
                                f"is one (config key trainer.accelerator)")


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")
@pytest.mark.parametrize("devices", ["[0]", "-1", "0,1"])
def test_gpu_device_indices_on_the_cpu_are_refused(devices):
    cfg = build_config("micro", [f"trainer.devices={devices}", "trainer.accelerator=auto"], task="gad")
    with pytest.raises(ConfigError, match=r"on the CPU, devices is a number of processes >= 1"):
        check_accelerator_present(cfg)
    check_accelerator_present(build_config("micro", ["trainer.devices=2"], task="gad"))


# ---- issue 27's cases through the command line: exit 2, one line, no run (no tracking store at all)

FINETUNE_CASES = [
    ("finetune.lr=nan", "overrides: finetune.lr = nan: must be a finite number (config key finetune.lr)"),
    ("finetune.lr=inf", "overrides: finetune.lr = inf: must be a finite number (config key finetune.lr)"),
    ("finetune.epochs=1000000", "overrides: finetune.epochs = 1000000: must be >= 1 and <= 1000 (config key "
                                "finetune.epochs)"),
    ("trainer.precision=bogus", f"trainer.precision: unknown precision 'bogus'; known: {INSTALLED} "
                                "(config key trainer.precision)"),
    ("trainer.devices=0", f"trainer.devices = 0: {DEVICES} (config key trainer.devices)"),
    ("model.hidden_size=65", "model.hidden_size = 65: not divisible by model.num_heads = 2 (each attention head "
                             "takes an equal share of the width); use model.hidden_size=64 or 66, or another "
                             "number of heads (config key model.hidden_size)"),
    *([("trainer.accelerator=gpu", "trainer.accelerator = gpu: this machine has no gpu device (torch sees none); "
                                   "use trainer.accelerator=cpu or auto here, or run where there is one (config "
                                   "key trainer.accelerator)")] if NO_GPU else []),
]


@pytest.mark.parametrize("override,message", FINETUNE_CASES, ids=[o for o, _ in FINETUNE_CASES])
def test_finetune_refuses_the_value_before_any_run(tmp_path, data_dir, override, message):
    work = tmp_path / "work"
    out = bioablate_in_process("finetune", "--task", "gad", "--data-dir", str(data_dir), "--work-dir", str(work),
                               *MICRO, override, cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip() == f"bioablate: error: {message}"
    assert not (work / "mlruns.db").exists() and not (work / "runs").exists()


EXPERIMENT = {"name": "checks", "models": {"random": {"name_or_path": "random-bert"}}, "tasks": ["gad"],
              "table": {"rows": "task", "columns": "model"}}


@pytest.mark.parametrize("override,message", [
    ("trainer.precision=bogus", "trainer.precision: unknown precision 'bogus'"),
    ("model.hidden_size=65", "model.hidden_size = 65: not divisible by model.num_heads = 2"),
    ("trainer.devices=0", "trainer.devices = 0: expected a number of devices >= 1"),
    *([("trainer.accelerator=gpu", "trainer.accelerator = gpu: this machine has no gpu device")] if NO_GPU else []),
])
def test_an_experiment_refuses_the_value_before_its_parent_run(tmp_path, data_dir, override, message):
    path = tmp_path / "exp.yaml"
    key, value = override.split("=")
    path.write_text(yaml.safe_dump({**EXPERIMENT, "overrides": {key: yaml.safe_load(value)}}))
    work = tmp_path / "work"
    out = bioablate_in_process("run", str(path), "--data-dir", str(data_dir), "--work-dir", str(work), *MICRO,
                               cwd=tmp_path)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and message in out.stderr
    assert not (work / "mlruns.db").exists()


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")
def test_a_sweep_on_a_missing_gpu_is_refused_before_the_study(tmp_path, data_dir):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({"task": "gad", "n_trials": 1, "overrides": [*MICRO, "trainer.accelerator=gpu"],
                                    "space": {"finetune.lr": {"type": "categorical", "choices": [1.0e-4]}}}))
    work = tmp_path / "work"
    out = bioablate_in_process("sweep", str(path), "--data-dir", str(data_dir), "--work-dir", str(work), cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip().startswith("bioablate: error: trainer.accelerator = gpu: ")
    assert not (work / "mlruns.db").exists() and not (work / "optuna.db").exists()


def test_a_machine_with_the_device_passes():
    check_accelerator_present(build_config("micro", ["trainer.accelerator=cpu"], task="gad"))
    check_accelerator_present(build_config("micro", ["trainer.accelerator=auto"], task="gad"))


def test_bf16_on_a_cpu_without_bf16_instructions_is_said_once(caplog):
    """bf16 autocast on a CPU oneDNN has no bf16 instructions for converts every operand (17-25x slower than
    fp32 for MiniLM on an AVX2 CPU): one warning per process naming the fix, none for fp32 or where it has them."""
    from ablations import checks

    checks._say_bf16_is_emulated.cache_clear()
    fp32, bf16 = (build_config("micro", [f"trainer.precision={p}"], task="gad") for p in ("32-true", "bf16-mixed"))
    with caplog.at_level("WARNING", logger="bioablate"):
        check_accelerator_present(fp32)
        assert not caplog.records
        check_accelerator_present(bf16)
        check_accelerator_present(bf16)
    said = [r.getMessage() for r in caplog.records]
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():
        assert said == []
    else:
        assert len(said) == 1 and "pass trainer.precision=32-true" in said[0], said

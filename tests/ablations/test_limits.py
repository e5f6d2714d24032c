"""Issue 69 item 1: every count and size bounded before use (bioablate_core/limits.py, ablations/checks.py).
Devices and workers against the CPUs or GPUs, nodes against the launcher, a new model's memory against the
RAM, steps, batch sizes and vocabularies against ceilings, names against the store's limits: each one line,
exit 2, in well under 5 seconds, with no process started and no tracking store written. The machine's
figures are stood in for, so the lines read the same on every machine."""

from __future__ import annotations

import time

import psutil
import pytest
import yaml

from bioablate_core import limits
from bioablate_core.errors import ConfigError
from tests.cli import bioablate_in_process

MICRO = ["finetune.max_train_examples=16", "finetune.max_eval_examples=16", "finetune.max_length=32",
         "trainer.progress_bar=false"]
LONG_NAME = "x" * 20_000


@pytest.fixture
def two_cpus_no_gpu_8_gib(monkeypatch):
    monkeypatch.setattr(limits, "cpus", lambda: 2)
    monkeypatch.setattr(limits, "gpus", lambda: 0)
    monkeypatch.setattr(limits, "ram_bytes", lambda: 8 * 2**30)
    for name in ("SLURM_NTASKS", "SLURM_NNODES", "SLURM_JOB_NUM_NODES", "WORLD_SIZE", "MASTER_ADDR",
                 "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(name, raising=False)


def refused(tmp_path, *args, work_dir=True):
    """`bioablate ARGS` timed, with the process's children before and after."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    start = time.monotonic()
    out = bioablate_in_process(*args, *(["--work-dir", str(tmp_path / "work")] if work_dir else []), cwd=tmp_path)
    seconds = time.monotonic() - start
    left = {p.pid for p in psutil.Process().children(recursive=True)} - before
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith("bioablate: error: "), out.stderr
    assert seconds < 5 and not left
    assert not (tmp_path / "work").exists()  # no store, no run folder
    return out.stderr.strip().removeprefix("bioablate: error: ")


FINETUNE = [
    ("trainer.devices=100", "trainer.devices = 100: this machine has 2 CPUs (a process each, and more processes "
                            "than CPUs make no progress); use trainer.devices=2 or fewer, or run where there are "
                            "more (config key trainer.devices)"),
    ("trainer.num_workers=100000", "trainer.num_workers = 100000: more than 4 DataLoader worker processes per CPU, "
                                   "and this machine has 2 CPUs; use trainer.num_workers=8 or fewer (0 loads in the "
                                   "training process) (config key trainer.num_workers)"),
    ("trainer.num_nodes=1000", "trainer.num_nodes = 1000: a run started here has this one node (no SLURM job or "
                               "torchrun sets up others) and would wait for ever for the rest; use "
                               "trainer.num_nodes=1, or run across nodes with --launcher slurm and launcher.nodes "
                               "(config key trainer.num_nodes)"),
    ("model.num_layers=100000", "model.num_layers = 100000: a model of hidden_size 64, num_layers 100000 and "
                                "intermediate_size 256 has about 5e+09 parameters, 74.5 GiB for its fp32 weights, "
                                "gradients and AdamW's two moments, more than this machine's 8.0 GiB of RAM; make "
                                "model.num_layers (or the other sizes) smaller (config key model.num_layers)"),
    ("model.hidden_size=1000000", "model.hidden_size = 1000000: "),
    ("model.intermediate_size=100000000", "model.intermediate_size = 100000000: "),
    ("finetune.batch_size=10000000000", "overrides: finetune.batch_size = 10000000000: must be >= 1 and <= 65536 "
                                        "(config key finetune.batch_size)"),
    ("finetune.eval_batch_size=10000000000", "finetune.eval_batch_size = 10000000000: must be >= 1 and <= 65536"),
    ("finetune.alum.steps=1000000000", "overrides: finetune.alum.steps = 1000000000: must be >= 1 and <= 100 "
                                       "(config key finetune.alum.steps)"),
    (f"experiment_name={LONG_NAME}", f"experiment_name '{'x' * 40}…' has 20,000 characters: the MLflow store takes "
                                     "at most 500; give a shorter name (config key experiment_name)"),
]


@pytest.mark.parametrize("override,message", FINETUNE, ids=[o[:40] for o, _ in FINETUNE])
def test_finetune_refuses_a_count_past_the_machine_or_a_ceiling(tmp_path, data_dir, two_cpus_no_gpu_8_gib,
                                                                 override, message):
    line = refused(tmp_path, "finetune", "--task", "gad", "--data-dir", str(data_dir), *MICRO, override)
    assert line.startswith(message) if message.endswith(": ") else message in line


PRETRAIN = [
    (["pretrain.max_steps=1000000000000"], "overrides: pretrain.max_steps = 1000000000000: must be >= 1 and <= "
                                           "10000000 (config key pretrain.max_steps)"),
    (["pretrain.batch_size=10000000000"], "pretrain.batch_size = 10000000000: must be >= 1 and <= 65536"),
    (["pretrain.accumulate=10000000000"], "pretrain.accumulate = 10000000000: must be >= 1 and <= 65536"),
    (["pretrain.alum.steps=1000000000"], "pretrain.alum.steps = 1000000000: must be >= 1 and <= 100"),
    (["--vocab", "train:1000000000000"], "pretrain.vocab = train:1000000000000: a vocabulary of at most 1,000,000 "
                                         "entries is trained (BERT's has 30,522); use e.g. "
                                         "pretrain.vocab=train:30522 (config key pretrain.vocab)"),
    (["model.num_layers=100000"], "model.num_layers = 100000: a model of hidden_size 64, num_layers 100000"),
    (["trainer.num_workers=100000"], "trainer.num_workers = 100000: more than 4 DataLoader worker processes"),
]


@pytest.mark.parametrize("args,message", PRETRAIN, ids=[" ".join(a)[:40] for a, _ in PRETRAIN])
def test_pretrain_refuses_a_count_past_the_machine_or_a_ceiling(tmp_path, data_dir, two_cpus_no_gpu_8_gib,
                                                                args, message):
    assert message in refused(tmp_path, "pretrain", "--data-dir", str(data_dir), *args)


def test_a_vocabulary_to_train_is_bounded(tmp_path, data_dir):
    line = refused(tmp_path, "vocab", "train", "--size", "1000000000000", "--out", str(tmp_path / "work"),
                   "--data-dir", str(data_dir), work_dir=False)
    assert line == ("--size 1000000000000: a vocabulary of at most 1,000,000 entries is trained (BERT's has "
                    "30,522); use e.g. --size 30522 (option --size)")


@pytest.mark.parametrize("override,message", [
    ("trainer.num_workers=100000", "trainer.num_workers = 100000: more than 4 DataLoader worker processes"),
    ("trainer.devices=100", "trainer.devices = 100: this machine has 2 CPUs"),
])
def test_an_experiment_refuses_it_before_its_parent_run(tmp_path, data_dir, two_cpus_no_gpu_8_gib, override,
                                                        message):
    path = tmp_path / "exp.yaml"
    key, value = override.split("=")
    path.write_text(yaml.safe_dump({"name": "limits", "models": {"random": {"name_or_path": "random-bert"}},
                                    "tasks": ["gad"], "table": {"rows": "task", "columns": "model"},
                                    "overrides": {key: int(value)}}))
    assert message in refused(tmp_path, "run", str(path), "--data-dir", str(data_dir), *MICRO)


def test_a_plan_is_drawn_whatever_this_machine_has(tmp_path, data_dir, two_cpus_no_gpu_8_gib):
    """A config may be meant for a cluster's nodes: the plan and the table are read anywhere."""
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"name": "limits", "models": {"random": {"name_or_path": "random-bert"}},
                                    "tasks": ["gad"], "table": {"rows": "task", "columns": "model"},
                                    "overrides": {"trainer.devices": 64}}))
    out = bioablate_in_process("run", str(path), "--dry-run", "--data-dir", str(data_dir), "--work-dir",
                               str(tmp_path / "work"), *MICRO, cwd=tmp_path)
    assert out.returncode == 0, out.stderr


def config(**trainer):
    return {"task": "gad", "trainer": {"accelerator": "auto", "devices": 1, "num_workers": 0, "num_nodes": 1,
                                       **trainer},
            "model": {"name_or_path": "random-bert", "hidden_size": 64, "num_layers": 2, "intermediate_size": 256,
                      "max_position_embeddings": 512}}


def test_gpus_are_counted_where_the_run_is_on_them(monkeypatch, two_cpus_no_gpu_8_gib):
    monkeypatch.setattr(limits, "gpus", lambda: 2)
    limits.check_machine(config(devices=2))
    limits.check_machine(config(devices=[0, 1]))
    with pytest.raises(ConfigError, match=r"^trainer.devices = 4: this machine has 2 GPUs \(a process on each\)"):
        limits.check_machine(config(devices=4))
    with pytest.raises(ConfigError, match=r"^trainer.devices = \[0, 3\]: names GPU 3, and this machine has 2 GPUs "
                                          r"\(0 to 1\); name GPUs below 2"):
        limits.check_machine(config(devices=[0, 3], accelerator="gpu"))
    limits.check_machine(config(devices=2, accelerator="cpu"))  # 2 CPUs
    with pytest.raises(ConfigError, match="this machine has 2 CPUs"):
        limits.check_machine(config(devices=3, accelerator="cpu"))


def test_a_slurm_job_has_its_own_nodes(monkeypatch, two_cpus_no_gpu_8_gib):
    monkeypatch.setenv("SLURM_NTASKS", "8")
    monkeypatch.setenv("SLURM_NNODES", "2")
    limits.check_machine(config(num_nodes=2))
    with pytest.raises(ConfigError, match=r"^trainer.num_nodes = 4: this SLURM job has 2 nodes \(SLURM_NNODES\); "
                                          r"use trainer.num_nodes=2, or ask for 4 with launcher.nodes=4"):
        limits.check_machine(config(num_nodes=4))


def test_a_models_files_decide_its_size_not_the_config():
    cfg = config()
    cfg["model"].update(name_or_path="/models/bert", num_layers=100_000)
    limits.check_machine(cfg)


def test_the_parameter_estimate_is_berts_own():
    from transformers import BertConfig, BertModel

    sizes = {"hidden_size": 32, "num_layers": 3, "intermediate_size": 48, "max_position_embeddings": 64}
    bert = BertModel(BertConfig(vocab_size=500, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                                intermediate_size=48, max_position_embeddings=64), add_pooling_layer=False)
    assert limits.parameters(sizes, 500) == sum(p.numel() for p in bert.parameters())


def test_a_long_quote_in_an_error_line_is_cut(tmp_path, data_dir):
    line = refused(tmp_path, "finetune", "--task", "gad", "--data-dir", str(data_dir), f"model.{'g' * 50_000}=1")
    assert len(line) < limits.LINE_CHARS and line.count("g") < limits.QUOTE_CHARS + 10 and "…" in line, line
    assert limits.readable("a " + "b" * 300) == "a " + "b" * 200 + "…"
    spaced = " ".join(["word"] * 1000)
    assert len(limits.readable(spaced)) <= limits.LINE_CHARS + 3 and limits.readable(spaced).endswith("word")

"""Issue 69 item 2: every Lightning choice checked in the config check (ablations/checks.py,
bioablate_core/limits.py): the strategy (its name, its package, what the accelerator allows), the precision
(its plugin) and torch.compile's mode, in fine-tuning and pretraining. Each refusal is one line listing what
this machine takes, exit 2, before any run exists; the datasets' readers pickle (DDP's spawn start method
pickles the spec that holds one)."""

from __future__ import annotations

import importlib.util
import pickle

import pytest
import yaml

from ablations.checks import PRECISIONS, STRATEGIES, _plugin
from tests.cli import bioablate_in_process

MICRO = ["finetune.max_train_examples=16", "finetune.max_eval_examples=16", "finetune.max_length=32",
         "trainer.progress_bar=false"]
HERE = ", ".join(s for s in STRATEGIES if _plugin(s) is None and not s.startswith(("ddp_spawn", "ddp_fork",
                                                                                     "ddp_notebook")))
NO_DEEPSPEED = importlib.util.find_spec("deepspeed") is None
NO_TRANSFORMER_ENGINE = importlib.util.find_spec("transformer_engine") is None
SPAWNED = ("trainer.strategy = ddp_spawn: trains in processes Lightning starts itself, whose results (the dev and "
           "test scores) do not come back to the run; use trainer.strategy=ddp, which starts one process per device "
           "that keeps its own (config key trainer.strategy)")
COMPILE = ("trainer.compile_mode='bogus': expected one of default, reduce-overhead, max-autotune, "
           "max-autotune-no-cudagraphs, lite (torch.compile's modes; config key trainer.compile_mode)")


@pytest.fixture
def no_gpu(monkeypatch):
    from bioablate_core import limits

    monkeypatch.setattr(limits, "gpus", lambda: 0)


CASES = [
    (["trainer.strategy=bogus"], f"trainer.strategy: unknown strategy 'bogus'; known: {HERE} "
                                 "(config key trainer.strategy)"),
    (["trainer.strategy=ddp_spawn", "trainer.devices=2"], SPAWNED),
    (["trainer.strategy=ddp_fork"], "trainer.strategy = ddp_fork: trains in processes Lightning starts itself"),
    (["trainer.strategy=fsdp", "trainer.accelerator=auto"], "trainer.strategy = fsdp: needs a GPU accelerator, and "
                                                            "the run is on the CPU "
                                "(trainer.accelerator = auto, and this machine has no GPU); use trainer.strategy=ddp "
                                "or auto here, or trainer.accelerator=gpu where there is a GPU (config key "
                                "trainer.strategy)"),
    (["trainer.strategy=fsdp", "trainer.accelerator=cpu"], "trainer.strategy = fsdp: needs a GPU accelerator, and "
                                                           "the run is on the CPU (trainer.accelerator = cpu); "),
    (["trainer.compile_mode=bogus"], COMPILE),
    *([(["trainer.strategy=deepspeed"], f"trainer.strategy = deepspeed: needs the deepspeed package, which is not "
                                        f"installed here (pip install deepspeed); available here: {HERE} (config "
                                        "key trainer.strategy)")] if NO_DEEPSPEED else []),
    *([(["trainer.precision=transformer-engine"],
        "trainer.precision = transformer-engine: needs the transformer_engine package, which is not installed here "
        "(pip install transformer-engine); available here: "
        f"{', '.join(p for p in PRECISIONS if _plugin(p) is None)} (config key trainer.precision)")]
      if NO_TRANSFORMER_ENGINE else []),
]


def one_line(out, work):
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not work.exists()  # no store: no FAILED run
    return out.stderr.strip().removeprefix("bioablate: error: ")


@pytest.mark.parametrize("overrides,message", CASES, ids=[" ".join(o) for o, _ in CASES])
def test_finetune_refuses_a_choice_lightning_would_reject(tmp_path, data_dir, no_gpu, overrides, message):
    work = tmp_path / "work"
    out = bioablate_in_process("finetune", "--task", "gad", "--data-dir", str(data_dir), "--work-dir", str(work),
                               *MICRO, *overrides, cwd=tmp_path)
    assert message in one_line(out, work)


@pytest.mark.parametrize("overrides,message", [
    (["trainer.compile_mode=bogus"], COMPILE),
    (["trainer.strategy=ddp_spawn"], SPAWNED),
    (["trainer.strategy=fsdp"], "trainer.strategy = fsdp: needs a GPU accelerator"),
    (["trainer.strategy=bogus"], "trainer.strategy: unknown strategy 'bogus'"),
])
def test_pretrain_refuses_a_choice_lightning_would_reject(tmp_path, data_dir, no_gpu, overrides, message):
    work = tmp_path / "work"
    out = bioablate_in_process("pretrain", "--data-dir", str(data_dir), "--work-dir", str(work), *overrides,
                               cwd=tmp_path)
    assert message in one_line(out, work)


def test_an_experiment_refuses_fsdp_on_the_cpu_before_its_parent_run(tmp_path, data_dir, no_gpu):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"name": "choices", "models": {"random": {"name_or_path": "random-bert"}},
                                    "tasks": ["gad"], "table": {"rows": "task", "columns": "model"},
                                    "overrides": {"trainer.strategy": "fsdp"}}))
    work = tmp_path / "work"
    out = bioablate_in_process("run", str(path), "--data-dir", str(data_dir), "--work-dir", str(work), *MICRO,
                               cwd=tmp_path)
    assert "trainer.strategy = fsdp: needs a GPU accelerator" in one_line(out, work)


def test_every_datasets_reader_pickles(tmp_path):
    """DDP's spawn start method pickles the dataset spec: a reader made by a closure ("Can't pickle local
    object 'read_crichton.<locals>.reader'") could not be sent. The copy is versioned by the same module.
    A user dataset (registered from YAML, here with listed folds) is among them."""
    from datamodules.custom import register_from_yaml
    from datamodules.registry import DATASETS, get_dataset

    for fold in (1, 2):
        (tmp_path / f"{fold}").mkdir()
        for split in ("train", "test"):
            (tmp_path / f"{fold}" / f"{split}.txt").write_text("Aspirin\tB-Chemical\nhelps\tO\n")
    (tmp_path / "my-folds.yaml").write_text(
        "name: my-folds\nformat: conll\npath: .\nlabels: [Chemical]\nfolds:\n"
        "  - {train: 1/train.txt, test: 1/test.txt}\n  - {train: 2/train.txt, test: 2/test.txt}\n")
    register_from_yaml(tmp_path / "my-folds.yaml")
    assert "my-folds" in DATASETS
    for name in sorted(DATASETS):
        spec = get_dataset(name)
        copy = pickle.loads(pickle.dumps(spec))
        assert copy.code_version() == spec.code_version() and copy.reader.__module__ == spec.reader.__module__


def test_a_picklable_reader_reads_what_it_read(data_dir):
    from datamodules.registry import get_dataset

    spec = get_dataset("bc5-chem")
    assert pickle.loads(pickle.dumps(spec.reader))(data_dir)["dev"][:3] == spec.reader(data_dir)["dev"][:3]

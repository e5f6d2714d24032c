"""Micro pretraining runs end to end on real text: every variant's loss falls and the exported model of
every architecture fine-tunes with `bioablate finetune`; a SIGKILLed run is resumed by the same command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient
from safetensors.torch import load_file

from ablations.config import REPO_ROOT, build_config
from ablations.run.finetune import run_finetune
from ablations.run.pretrain import run_pretrain
from bioablate_core.errors import ConfigError
from lightning_modules.models import load_encoder
from lightning_modules.pretrain_models import ObjectiveSpec, build_model
from tests.cli import bioablate_in_process
from tests.experiment_runs import single_threaded

# Batch 8 and 20 steps: enough for every variant's loss to fall clearly (the drop is 0.2-16 nats).
FAST = ["trainer.progress_bar=false", "pretrain.batch_size=8", "pretrain.max_steps=20",
        "pretrain.checkpoint_every=10"]
FINETUNE = ["finetune.max_train_examples=32", "finetune.max_eval_examples=16", "finetune.epochs=1",
            "finetune.max_length=64", "trainer.progress_bar=false"]
# Continual pretraining starts from MiniLM (6 layers, 384 wide: ~1 s a step here): 8 steps show the fall.
CONTINUAL = ["pretrain.init=general-minilm", "pretrain.max_steps=8", "pretrain.checkpoint_every=4",
             "trainer.log_every_n_steps=2"]

VARIANTS = {
    "bert-wwm-pubmed": [],
    "wordpiece": ["pretrain.masking=wordpiece"],
    "nsp": ["pretrain.nsp=true"],
    "mask-schedule": ["pretrain.mask_schedule=ramp"],
    "adversarial": ["pretrain.adversarial=true"],
    "albert-sop": ["pretrain.objective=albert", "pretrain.embedding_size=32"],
    "lamb": ["pretrain.optimizer=lamb", "pretrain.lr=2e-2"],
    "bf16-mixed": ["trainer.precision=bf16-mixed", "pretrain.max_steps=12"],  # gradient clipping, fused AdamW
    "trained-vocab": ["pretrain.vocab=train:2000"],
    "pmc": ["pretrain.corpus=pmc"],
    "pubmed+pmc": ["pretrain.corpus=pubmed+pmc"],
    "general>pubmed": ["pretrain.corpus=general>pubmed"],
    "continual-minilm": [*CONTINUAL, "pretrain.vocab=init", "pretrain.lr=5e-4"],
    "continual-new-vocab": [*CONTINUAL, "pretrain.vocab=pubmedbert-uncased", "pretrain.lr=1e-3"],
    "electra": ["pretrain.objective=electra"],
    "fixed-predictions": ["pretrain.max_predictions=32"],  # the static-shape step: 32 slots a row
    "electra-from-bert": [*CONTINUAL, "pretrain.objective=electra", "pretrain.vocab=init", "pretrain.lr=5e-4"],
    # several sequences a row (bf16 master weights and fused QKV: test_packed_bf16_master_weights_...)
    "packed": ["pretrain.packing=true"],
    "electra-packed": ["pretrain.objective=electra", "pretrain.packing=true"],
}
# Variants that change only the text, the masking or the optimizer export the standard model's
# architecture and vocabulary: fine-tuning their export would prove nothing "bert-wwm-pubmed" does not.
SAME_EXPORT = {"fixed-predictions", "wordpiece", "mask-schedule", "adversarial", "lamb", "bf16-mixed", "pmc",
               "pubmed+pmc", "general>pubmed", "packed", "electra-packed"}


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pretrain-work")


def pretrain_config(data_dir: Path, work_dir: Path, *overrides: str):
    return build_config("micro", [*FAST, *overrides], task="pretrain", experiment_name="pretrain",
                        data_dir=str(data_dir), work_dir=str(work_dir))


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_micro_pretraining_variant_learns_and_fine_tunes(variant: str, data_dir: Path, work_dir: Path):
    result = run_pretrain(pretrain_config(data_dir, work_dir, *VARIANTS[variant]))
    losses = result.losses
    assert len(losses) >= 8
    k = len(losses) // 4  # the mean loss of the last quarter of the steps is clearly below the first's
    assert sum(losses[-k:]) / k < sum(losses[:k]) / k - 0.1, (losses[:k], losses[-k:])
    run = MlflowClient(result.tracking_uri).get_run(result.run_id)
    assert run.info.status == "FINISHED" and work_dir / run.data.tags["model_dir"] == result.model_dir
    assert not Path(run.data.tags["model_dir"]).is_absolute()  # relative to the work directory
    assert "train/loss" in run.data.metrics and "train/mask_rate" in run.data.metrics
    if "pretrain.objective=electra" in VARIANTS[variant]:
        assert {"train/gen_loss", "train/rtd_loss", "train/rtd_accuracy"} <= set(run.data.metrics)
        assert json.loads((result.model_dir / "config.json").read_text())["architectures"] == \
            ["ElectraForPreTraining"]  # the discriminator is what fine-tuning gets
    assert (result.model_dir / "config.json").is_file() and (result.model_dir / "vocab.txt").is_file()
    again = run_pretrain(pretrain_config(data_dir, work_dir, *VARIANTS[variant]))
    assert again.reused and again.run_id == result.run_id
    if variant in SAME_EXPORT:
        return

    ft_cfg = build_config("micro", FINETUNE, task="gad", data_dir=str(data_dir), work_dir=str(work_dir),
                          **{"model.name_or_path": str(result.model_dir)})
    ft = run_finetune(ft_cfg)
    ft_run = MlflowClient(ft.tracking_uri).get_run(ft.run_id)
    assert ft_run.info.status == "FINISHED" and "test/score" in ft_run.data.metrics
    # fine-tuning starts from the pretrained encoder: every encoder weight it loads is the exported one
    exported = load_file(result.model_dir / "model.safetensors")
    encoder, _ = load_encoder(ft_cfg.model, data_dir, 0.0)
    weights = encoder.state_dict()
    for name, tensor in weights.items():
        stored = [key for key in exported if key == name or key.endswith("." + name)]
        assert len(stored) == 1 and torch.equal(exported[stored[0]], tensor), name


@pytest.mark.slow
def test_mask_schedule_reaches_25_percent(data_dir: Path, work_dir: Path):
    result = run_pretrain(pretrain_config(data_dir, work_dir, *VARIANTS["mask-schedule"],
                                          "trainer.log_every_n_steps=1"), force=True)
    client = MlflowClient(result.tracking_uri)
    rates = [m.value for m in client.get_metric_history(result.run_id, "train/mask_rate")]
    assert rates == sorted(rates) and len(rates) == 20
    assert rates[0] == pytest.approx(0.05) and rates[-1] == pytest.approx(0.25)
    assert sorted({round(r, 2) for r in rates}) == [0.05, 0.10, 0.15, 0.20, 0.25]


def test_electra_generator_is_smaller_and_shares_the_embeddings():
    model_cfg = build_config("micro", task="pretrain").model
    electra = build_model(ObjectiveSpec("electra", generator_size=0.25), 500, 0, model_cfg, 64)
    gen, disc = electra.generator, electra.discriminator
    assert (gen.config.hidden_size, gen.config.num_attention_heads, gen.config.intermediate_size) == (16, 1, 64)
    assert gen.config.num_hidden_layers == disc.config.num_hidden_layers == 2
    assert gen.electra.embeddings is disc.electra.embeddings  # token, position, token-type, LayerNorm
    assert gen.generator_lm_head.weight is disc.electra.embeddings.word_embeddings.weight
    # each shared tensor is one parameter to the optimizer
    assert len(list(electra.parameters())) == len({id(p) for p in electra.parameters()})
    with pytest.raises(ConfigError, match="generator_size=0.8: the generator's width 51 is not divisible"):
        build_model(ObjectiveSpec("electra", generator_size=0.8), 500, 0, model_cfg, 64)


def test_continual_pretraining_refuses_a_checkpoint_the_objective_cannot_continue(data_dir: Path, tmp_path: Path):
    with pytest.raises(ConfigError, match="'bert' checkpoint cannot start objective=albert"):
        run_pretrain(pretrain_config(data_dir, tmp_path, "pretrain.objective=albert", "pretrain.init=general-minilm"))


def _weights(model_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(model_dir / "model.safetensors"))


def _pretrain_command(data_dir: Path, work: Path, *overrides: str) -> list[str]:
    return [sys.executable, "-m", "ablations.cli", "pretrain", "--corpus", "pubmed", "--masking", "wwm",
            "--objective", "bert", "--profile", "micro", "--data-dir", str(data_dir), "--work-dir", str(work),
            "trainer.progress_bar=false", *overrides]


@pytest.mark.slow
def test_sigkill_and_rerun_ends_with_the_uninterrupted_runs_weights(data_dir: Path, tmp_path: Path):
    # accumulation and two loader workers: the resumed run must re-enter both at the right micro-step
    overrides = ["pretrain.max_steps=20", "pretrain.checkpoint_every=5", "pretrain.accumulate=2",
                 "trainer.num_workers=2"]
    assert "MLFLOW_TRACKING_URI" not in os.environ  # no earlier test leaked its store
    # the uninterrupted run and the rerun in this process, the killed one in a process of its own: all on
    # one thread (bitwise equal sums need the same split of the work)
    with single_threaded():
        reference = bioablate_in_process(*_pretrain_command(data_dir, tmp_path / "reference", *overrides)[3:],
                                         cwd=REPO_ROOT)
    assert reference.returncode == 0, reference.stderr[-2000:]

    work = tmp_path / "killed"
    cmd = _pretrain_command(data_dir, work, *overrides)
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.time() + 240
    while time.time() < deadline and not list(work.glob("runs/*/checkpoints/last.ckpt")):
        assert proc.poll() is None, "the run ended before its first checkpoint"
        time.sleep(0.2)
    time.sleep(0.3)  # mid-run, past the first checkpoint
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # one checkpoint file, overwritten: not a second full copy of each one
    assert [p.name for p in work.glob("runs/*/checkpoints/*.ckpt")] == ["last.ckpt"]
    assert not list(work.glob("models/*/config.json"))

    with single_threaded():
        done = bioablate_in_process(*cmd[3:], cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "finished" in done.stdout
    uri = done.stdout.split("MLflow: ")[1].split()[0]
    assert uri == f"sqlite:///{work.resolve() / 'mlruns.db'}"
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("pretrain").experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"  # the killed run was taken over

    # data, masks and dropout depend only on (seed, micro-batch): the resumed run is bitwise the same
    model_dir = next(work.glob("models/*/config.json")).parent
    reference_dir = next((tmp_path / "reference").glob("models/*/config.json")).parent
    assert model_dir.name == reference_dir.name  # same fingerprint
    ours, ref = _weights(model_dir), _weights(reference_dir)
    assert ours.keys() == ref.keys()
    worst = max((ours[k] - ref[k]).abs().max().item() for k in ref)
    assert worst == 0.0, f"resumed weights differ from the uninterrupted run's by up to {worst:g}"

    # what the rerun reports is the run's: its first loss, not the resumed segment's; a rate at every step
    def summary(out: str) -> str:
        return next(line for line in out.splitlines() if "MLM loss:" in line)

    assert summary(done.stdout) == summary(reference.stdout)
    reference_client = MlflowClient(f"sqlite:///{(tmp_path / 'reference').resolve() / 'mlruns.db'}")
    [uninterrupted] = reference_client.search_runs([reference_client.get_experiment_by_name("pretrain").experiment_id])

    def steps(store: MlflowClient, run_id: str, key: str) -> list[int]:
        return sorted(m.step for m in store.get_metric_history(run_id, key))

    rates = steps(client, runs[0].info.run_id, "train/tokens_per_s")  # the first step after the resume too
    assert rates == steps(reference_client, uninterrupted.info.run_id, "train/tokens_per_s")
    assert set(rates) == set(range(20))


def test_fixed_predictions_count_in_the_fingerprint(data_dir: Path):
    """`pretrain.max_predictions` changes the numbers (a row keeps at most that many targets), so it is part
    of the run's identity."""
    from ablations.run.pretrain_checks import check_config
    from ablations.run.pretrain_identity import pretrain_fingerprint

    vocab = data_dir / "vocab" / "bert-base-uncased" / "vocab.txt"
    fingerprint = lambda cfg: pretrain_fingerprint(cfg, "CORPUS", vocab, "scratch")  # noqa: E731
    old_micro = ["pretrain.max_steps=30", "pretrain.checkpoint_every=10"]  # as pinned in test_config.py
    unset = build_config("micro", old_micro, task="pretrain")
    assert fingerprint(unset) == "0d88d97adf2fe5e8"  # pinned in test_config.py
    fixed = {n: fingerprint(build_config("micro", [*old_micro, f"pretrain.max_predictions={n}"], task="pretrain"))
             for n in (32, 48)}
    assert len({*fixed.values(), fingerprint(unset)}) == 3
    with pytest.raises(ConfigError, match=r"pretrain.max_predictions=200 is more than the 64 positions of a row "
                                          r"\(pretrain.seq_len\); set it to at most 64"):
        check_config(build_config("micro", ["pretrain.max_predictions=200"], task="pretrain"))
    with pytest.raises(ConfigError, match="trainer.compile_mode='graphs': expected one of default, reduce-overhead"):
        check_config(build_config("micro", ["trainer.compile_mode=graphs"], task="pretrain"))
    assert fingerprint(build_config("micro", [*old_micro, "trainer.compile_mode=reduce-overhead"],
                                    task="pretrain")) == \
        fingerprint(unset)  # how the step is compiled changes no number


@pytest.mark.parametrize("overrides, message", [
    (["pretrain.packing=true", "pretrain.nsp=true"], "pretrain.packing=true needs one sequence type per row"),
    (["pretrain.packing=true", "pretrain.objective=albert"], "pretrain.packing=true needs one sequence type per row"),
    (["pretrain.master_weights=true"], "pretrain.master_weights=true keeps fp32 masters of bf16 parameters: it "
                                       "needs trainer.precision=bf16-true (got 32-true)"),
    (["pretrain.fused_qkv=true", "pretrain.objective=albert"], "pretrain.fused_qkv=true fuses BERT and ELECTRA"),
])
def test_a_speed_choice_that_does_not_fit_the_run_is_one_line(overrides, message, data_dir: Path, tmp_path: Path):
    from ablations.run.pretrain_checks import check_config

    with pytest.raises(ConfigError) as error:
        check_config(pretrain_config(data_dir, tmp_path, *overrides))
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


@pytest.mark.slow
def test_packed_bf16_master_weights_and_fused_qkv_export_the_masters(data_dir: Path, tmp_path: Path):
    """bf16-true with master weights exports the fp32 masters (not their bf16 rounding), as transformers' own
    BERT layout; packing trains on the packed shards."""
    result = run_pretrain(pretrain_config(data_dir, tmp_path, "trainer.precision=bf16-true", "pretrain.max_steps=4",
                                          "pretrain.master_weights=true", "pretrain.fused_qkv=true",
                                          "pretrain.packing=true"))
    weights = load_file(result.model_dir / "model.safetensors")
    assert {t.dtype for t in weights.values()} == {torch.float32}
    query = weights["bert.encoder.layer.0.attention.self.query.weight"]
    assert not any(".qkv." in k for k in weights) and not torch.equal(query, query.to(torch.bfloat16).float())
    run = MlflowClient(result.tracking_uri).get_run(result.run_id)
    shards = run.data.tags["shards"]  # shown relative to the work directory: a store names no machine's paths
    assert shards.startswith("<work_dir>/cache/shards/")
    assert json.loads((tmp_path / shards.removeprefix("<work_dir>/") / "meta.json").read_text())["packed"] is True

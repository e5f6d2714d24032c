"""Whole runs with Hub models, offline from a real huggingface_hub cache (tests/hub_cache.py) under a tmp
HF_HOME: `bioablate finetune --model ORG/NAME@REVISION` fine-tunes the snapshot the revision names, and
experiments/table6_published.yaml runs end to end with its aliases' Hub ids holding tiny stand-ins."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from ablations.config import REPO_ROOT, build_config
from ablations.run.finetune_identity import identify
from lightning_modules.models import NAMED_MODELS
from tests.hub_cache import add_snapshot, offline_environment, tiny_bert

C1, C2 = "1" * 40, "2" * 40
TINY = "bioablate-test/tiny-bert"


def bioablate(*args: str, hf_home: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ablations.cli", *args], cwd=REPO_ROOT, text=True,
                          capture_output=True, env=offline_environment(hf_home), timeout=600)


def finetune_runs(tracking_uri: str) -> list:
    client = MlflowClient(tracking_uri)
    ids = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(ids, "tags.kind = 'finetune'", max_results=1000)


@pytest.mark.slow
def test_finetune_by_hub_id_and_revision_offline(tmp_path, data_dir):
    hf_home, work = tmp_path / "hf-home", tmp_path / "work"
    vocab = data_dir / "vocab" / "bert-base-uncased" / "vocab.txt"
    add_snapshot(hf_home / "hub", TINY, C1, tiny_bert(tmp_path / "m1", vocab, seed=1), refs=("main",))
    add_snapshot(hf_home / "hub", TINY, C2, tiny_bert(tmp_path / "m2", vocab, seed=2), refs=("v2",))
    common = ["--task", "gad", "--profile", "micro", "--work-dir", str(work), "--data-dir", str(data_dir)]

    done = bioablate("finetune", "--model", f"{TINY}@v2", *common, hf_home=hf_home)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "gad: finished" in done.stdout and re.search(r"test: .*score=0\.\d+", done.stdout), done.stdout
    (run,) = finetune_runs(done.stdout.split("MLflow: ")[1].split()[0])
    assert run.data.params["model.name_or_path"] == f"{TINY}@v2" and run.info.status == "FINISHED"
    # the loaded model's config and the commit v2 resolved to, not the profile's random-BERT keys
    assert run.data.tags["hub_id"] == TINY and run.data.tags["hub_commit"] == C2
    params = run.data.params
    assert (params["model.hidden_size"], params["model.num_layers"], params["model.num_heads"]) == ("32", "1", "2")
    assert params["model.vocab_size"] == "30522" and params["model.type"] == "bert"
    assert "model.vocab" not in params and "model.intermediate_size" in params
    # the run's fingerprint is that of the commit v2 names, whichever way it is named, and not main's
    from huggingface_hub import constants

    def fingerprint(model: str) -> str:
        cfg = build_config("micro", task="gad", data_dir=str(data_dir), work_dir=str(work),
                           **{"model.name_or_path": model})
        return identify(cfg).fingerprint

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(constants, "HF_HUB_CACHE", str(hf_home / "hub"))
        patch.setattr(constants, "HF_HUB_OFFLINE", True)
        assert run.data.tags["fingerprint"] == fingerprint(f"{TINY}@{C2}") != fingerprint(TINY)


@pytest.mark.slow
def test_table6_published_runs_at_micro_with_the_aliases_on_cached_stand_ins(tmp_path, data_dir):
    """Two of its models, by their aliases (not the micro random stand-ins), on the YAML's two micro tasks."""
    source = OmegaConf.to_container(OmegaConf.load(REPO_ROOT / "experiments" / "table6_published.yaml"))
    keep = {"pubmedbert": "pubmedbert-uncased", "bert-uncased": "bert-base-uncased"}  # model -> stand-in vocab
    # the alias under every profile, not micro's random stand-in
    models = source["models"]
    source["models"] = {name: {**models[name], "name_or_path": models[name]["name_or_path"]["default"]}
                        for name in keep}
    source["table"]["paper"] = {row: {c: v for c, v in cols.items() if c in keep}
                                for row, cols in source["table"]["paper"].items()}
    path = tmp_path / "table6_published.yaml"
    OmegaConf.save(OmegaConf.create(source), path)
    hf_home, work = tmp_path / "hf-home", tmp_path / "work"
    aliases = {name: source["models"][name]["name_or_path"] for name in keep}
    for name, vocab in keep.items():
        tiny = tiny_bert(tmp_path / name, data_dir / "vocab" / vocab / "vocab.txt")
        add_snapshot(hf_home / "hub", NAMED_MODELS.get(aliases[name]).hub_id, C1, tiny)

    done = bioablate("run", str(path), "--profile", "micro", "--work-dir", str(work), "--data-dir", str(data_dir),
                     hf_home=hf_home)
    assert done.returncode == 0, done.stderr[-3000:]
    table = (work / "tables" / "table6_published-micro" / "table.md").read_text()
    # the models by their labels, and the paper's numbers (to one decimal) in its rows
    assert "PubMedBERT" in table and "BERT uncased" in table and "| *paper* |" in table
    assert "93.3" in table and "80.4" in table
    runs = finetune_runs(done.stdout.split("MLflow: ")[1].split()[0])
    assert sorted((r.data.params["model.name_or_path"], r.data.tags["task"]) for r in runs) == sorted(
        (alias, task) for alias in aliases.values() for task in ("bc5-chem", "gad"))
    assert all(r.info.status == "FINISHED" for r in runs)

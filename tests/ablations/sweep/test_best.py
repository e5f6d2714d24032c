"""After a sweep: the printed commands run as pasted, and `sweep best` gives back the best trial's run.

One micro sweep on the default SQLite storage, run through the CLI as a user would; then its printed
hints are run one after the other as pasted, from another directory without the tracking and work-dir
variables: `sweep best` (which writes the config layer), then `finetune --config` over that layer, whose
run must have the best trial's swept values and fingerprint. They run through the CLI's entry point in this
process (a fresh interpreter would add ~10 s of imports each and prove nothing more about the commands).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import uuid
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from ablations.cli import main
from ablations.config import build_config, flatten
from bioablate_core.packaged import resolve_config
from tests.cli import bioablate_in_process

pytestmark = [pytest.mark.slow]

MICRO = resolve_config("micro", "sweep")


def pasted(hint: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run a printed `bioablate ...` command as a shell would (tests/cli.py): its words to the CLI's entry
    point, from `cwd`, without the variables that could point it at the right store by accident."""
    words = shlex.split(hint)
    assert words[0] == "bioablate", hint
    return bioablate_in_process(*words[1:], cwd=cwd, unset=("MLFLOW_TRACKING_URI", "BIOABLATE_WORK"))


def hint(output: str, label: str) -> str:
    [line] = [line for line in output.splitlines() if f"{label}: bioablate " in line]
    return line.split(f"{label}: ", 1)[1]


@pytest.fixture(scope="module")
def swept(data_dir, tmp_path_factory) -> tuple[Path, str, str]:
    """A 2-trial micro sweep in a fresh work directory; returns (work dir, study, printed output)."""
    work_dir = tmp_path_factory.mktemp("work")
    study = f"hints-{uuid.uuid4().hex[:8]}"
    command = shlex.join(["bioablate", "sweep", str(MICRO), "--study", study, "--n-trials", "2",
                          "--data-dir", str(data_dir), "--work-dir", str(work_dir)])
    done = pasted(command, tmp_path_factory.mktemp("elsewhere"))
    assert done.returncode == 0, done.stderr[-3000:]
    return work_dir, study, done.stdout


def test_the_study_names_its_objective_after_the_task_metric(swept):
    work_dir, study, _ = swept
    loaded = optuna.load_study(study_name=study, storage=f"sqlite:///{work_dir / 'optuna.db'}")
    assert loaded.metric_names == ["dev/score (accuracy)"]  # pubmedqa's score is its accuracy


def test_hints_run_as_pasted_and_the_best_layer_reproduces_the_best_trial(swept, tmp_path):
    work_dir, study, output = swept
    elsewhere = tmp_path / "elsewhere"  # another directory: a hint must not depend on the cwd
    elsewhere.mkdir()
    assert "--work-dir" in hint(output, "browse")
    export = pasted(hint(output, "export the best"), elsewhere)
    assert export.returncode == 0, export.stderr
    assert not (elsewhere / "outputs").exists()
    layer_path = work_dir / "sweeps" / f"{study}.yaml"
    layer = OmegaConf.load(layer_path)
    assert layer.task == "pubmedqa" and "trainer" not in layer  # progress_bar: bookkeeping, left out

    rerun = pasted(hint(export.stdout, "rerun it"), elsewhere)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    run_id, fingerprint = re.search(r"pubmedqa: (?:finished|reused finished run) (\w+) \(fingerprint (\w+)\)",
                                    rerun.stdout).groups()

    best = optuna.load_study(study_name=study, storage=f"sqlite:///{work_dir / 'optuna.db'}").best_trial
    client = MlflowClient(f"sqlite:///{work_dir / 'mlruns.db'}")
    [best_run] = [client.get_run(i) for i in best.user_attrs["mlflow_run_ids"]]
    new_run = client.get_run(run_id)
    assert new_run.data.tags["fingerprint"] == fingerprint == best_run.data.tags["fingerprint"]
    for key, value in best.params.items():  # every swept key, as each run logged it
        assert new_run.data.params[key] == best_run.data.params[key] == str(value)
    resolved = flatten(build_config("micro", config_files=[layer_path], task="pubmedqa"))
    assert {k: resolved[k] for k in best.params} == best.params


def test_a_config_layer_with_an_unknown_key_is_one_line_naming_the_file(tmp_path, capsys):
    layer = tmp_path / "best.yaml"
    layer.write_text("task: gad\nfinetune:\n  lrr: 1.0e-5\n")
    code = main(["finetune", "--config", str(layer), "--work-dir", str(tmp_path)])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"bioablate: error: {layer}: unknown config key 'finetune.lrr'") and "'lr'" in lines[0]


def test_config_layers_come_after_the_profile_and_before_overrides(tmp_path):
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text("finetune: {lr: 1.0e-3, epochs: 7, batch_size: 8}\n")
    second.write_text("finetune: {lr: 2.0e-3}\n")
    cfg = build_config("micro", ["finetune.epochs=9"], config_files=[first, second], task="gad")
    assert (cfg.finetune.lr, cfg.finetune.epochs, cfg.finetune.batch_size) == (2e-3, 9, 8)

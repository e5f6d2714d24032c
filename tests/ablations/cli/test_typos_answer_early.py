"""A misspelt task or option name is answered before the heavy imports (issue 38): the check runs against
torch-free registries (ablations.checks.check_names, lightning_modules/choice_names.py), so the answer
costs well under a second instead of the ~20 s of importing Lightning, MLflow, transformers and torch.
What is measured is which modules were imported, not the time (the machine may be loaded)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("torch", "pytorch_lightning", "lightning_fabric", "mlflow", "transformers")

# the CLI's entry point in a fresh interpreter, once per invocation in turn, then the heavy modules imported so
# far (they stay imported, so they are read after each), one JSON line per invocation on stdout
PROGRAM = """
import json, sys
from ablations.cli import main
for args in json.loads(sys.argv[1]):
    code = main(args)
    print(json.dumps({"args": args, "code": code, "heavy": sorted(m for m in %r if m in sys.modules)}))
""" % (HEAVY,)


def bioablate_fresh_in_turn(invocations: list[list[str]], data_dir: Path) -> tuple[list[dict], str]:
    done = subprocess.run([sys.executable, "-c", PROGRAM, json.dumps(invocations)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "BIOABLATE_DATA": str(data_dir)})
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"args"')]
    assert [r["args"] for r in results] == invocations, done.stderr[-2000:]
    return results, done.stderr


def bioablate_fresh(*args: str, data_dir: Path) -> tuple[dict, str]:
    [result], err = bioablate_fresh_in_turn([list(args)], data_dir)
    return result, err


@pytest.mark.parametrize("args, message", [
    (("finetune", "--task", "bc5-chemm"), "unknown task 'bc5-chemm'"),
    (("finetune", "--task", "bc5-chem", "finetune.head=crff"), "unknown finetune.head 'crff' for bc5-chem"),
    (("finetune", "--task", "gad", "finetune.head=crf"), "unknown finetune.head 'crf' for gad"),
    (("finetune", "--task", "gad", "finetune.re_feature=mentions"), "unknown finetune.re_feature 'mentions'"),
    (("finetune", "--task", "bc5-chem", "finetune.subtoken_labels=every"), "finetune.subtoken_labels"),
    (("pretrain", "--masking", "bad"), "unknown pretrain.masking 'bad'; known: wordpiece, wwm"),
    (("pretrain", "--objective", "bertt"), "unknown pretrain.objective 'bertt'; known: albert, bert, electra"),
    (("pretrain", "pretrain.optimizer=adam"), "unknown pretrain.optimizer 'adam'; known: adamw, lamb"),
    (("pretrain", "pretrain.mask_schedule=ramps"), "unknown pretrain.mask_schedule 'ramps'"),
])
def test_a_misspelt_task_or_option_answers_without_importing_the_heavy_modules(args, message, data_dir):
    out, err = bioablate_fresh(*args, data_dir=data_dir)
    assert out["code"] == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert out["heavy"] == [], out


def test_the_choices_declared_torch_free_are_the_ones_their_modules_implement():
    """Every declared option has its entry once its implementing module is imported, and no option is
    registered there without being declared (the names a typo is checked against are the real ones)."""
    from datamodules.pretrain import masking  # noqa: F401 -- registers the entries
    from lightning_modules import heads, pretrain, pretrain_models  # noqa: F401
    from lightning_modules.choice_names import CHOICES, PRETRAIN_CHOICES

    for choice in (*CHOICES, *PRETRAIN_CHOICES):
        assert choice.names(lambda _: True) == list(choice), choice.key


def test_list_variants_shows_every_choice_with_its_registrys_options():
    from ablations import api
    from lightning_modules.choice_names import CHOICES, PRETRAIN_CHOICES

    listed = {line.split()[0]: line.split(None, 1)[1] for line in api.listing("variants") if not line.startswith(" ")}
    assert [c.kind for c in (*CHOICES, *PRETRAIN_CHOICES)] == list(listed)
    assert listed["pretrain.masking"] == "wwm, wordpiece" and listed["pretrain.optimizer"] == "adamw, lamb"
    assert api.options("pretrain.objective") == ["bert", "albert", "electra"]


# one fresh interpreter for them all: one start-up of torch, MLflow and the planning code instead of one each
# (~4 s of CPU each)
PLANNING = [
    ("run", "table13_tagging", "--profile", "micro", "--dry-run"),  # a pretraining stage and its cells, planned
    ("table", "table13_tagging", "--profile", "micro"),  # rendered from the store (here: every cell not run)
    ("status", "table13_tagging", "--profile", "micro"),  # each planned run's state (it imported Lightning)
    ("pretrain", "--profile", "micro", "--dry-run"),
]


def test_planning_and_rendering_import_no_lightning(data_dir, tmp_path):
    """Checking an experiment's configs, naming its runs' fingerprints (ablations/run/*_identity.py) and
    rendering its table need neither Lightning nor a Trainer: only a run that trains imports them (~9 s of
    a 2-core CPU on every `--dry-run` and `table` before)."""
    results, err = bioablate_fresh_in_turn([[*args, "--work-dir", str(tmp_path / "work")] for args in PLANNING],
                                           data_dir)
    for result in results:
        assert result["code"] == 0, (result, err[-2000:])
        assert not {"pytorch_lightning", "lightning_fabric"} & set(result["heavy"]), result

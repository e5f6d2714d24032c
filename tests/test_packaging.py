"""The install extras match what the README and the error messages tell users to install: the quick start's
model is the `minilm` extra (named by the README's install commands, scripts/setup.sh and the error for a
missing model package), the `ui` extra has the Optuna dashboard and nbconvert, and every `bioablate[X]` the
docs name exists."""

from __future__ import annotations

import re

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


def test_the_wheel_carries_the_report_notebook(tmp_path):
    """The `ui` extra renders notebooks/ablation_report.ipynb: an installed bioablate must have it (issue 38)."""
    import subprocess
    import sys
    import zipfile

    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(tmp_path), str(REPO_ROOT)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = tmp_path.glob("bioablate-*.whl")
    assert "notebooks/ablation_report.ipynb" in zipfile.ZipFile(wheel).namelist()


def test_torchmetrics_is_not_a_dependency_while_nothing_imports_it():
    imports = [path for folder in ("ablations", "core", "datamodules", "lightning_modules", "benchmarks")
               for path in (REPO_ROOT / folder).rglob("*.py") if "torchmetrics" in path.read_text()]
    assert "torchmetrics" not in names(PYPROJECT["project"]["dependencies"]) or imports

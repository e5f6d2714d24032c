"""The wheel is the toolkit: built from this checkout, installed into a fresh virtual environment outside the
repository, `bioablate` runs the quickstart experiment by name (micro) from a folder that has no experiments/ in
it, renders its table again from the store, and says its version.

Offline and cheap: the fresh environment gets the dependencies from the one running the tests (a `.pth`
line naming its site-packages as a plain path, which does not run the editable install's own `.pth` hook,
so this checkout's code is not importable there); only the wheel itself is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "outputs", "build", "dist", "*.egg-info", "__pycache__",
                                    ".pytest_cache", "mlruns*", "lightning_logs")


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 900) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, command))} exited {done.returncode}:\n" \
                                 f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"  # built from a copy: an in-tree build would leave build/ and egg-info behind
    shutil.copytree(REPO_ROOT, source, ignore=NOT_SOURCE)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
          "-w", str(tmp / "dist"), str(source)], cwd=tmp)
    built, = (tmp / "dist").glob("bioablate-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh venv (outside the repository) with the wheel of this checkout installed; its bin/ folder."""
    tmp = tmp_path_factory.mktemp("venv")
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp)
    python = venv / "bin" / "python"
    fresh_site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           cwd=tmp).strip())
    (fresh_site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
         cwd=tmp)
    return venv / "bin"


def test_the_wheel_carries_the_packaged_files_and_installs_nothing_generic(wheel):
    """The `ui` extra renders the report notebook and `bioablate list experiments` reads the packaged YAMLs:
    the wheel has both, as package data of bioablate_core (issues 36, 38), every experiment YAML included.
    Its top-level packages are the toolkit's own: no `core`, `experiments` or `notebooks` to shadow a
    user's."""
    names = zipfile.ZipFile(wheel).namelist()
    packaged = {"bioablate_core/notebooks/ablation_report.ipynb", "bioablate_core/experiments/quickstart.yaml",
                "bioablate_core/experiments/profiles/mini.yaml", "bioablate_core/experiments/corpora/pubmed.yaml"}
    assert packaged <= set(names)
    experiments = sorted(p.name for p in (REPO_ROOT / "experiments").glob("*.yaml"))
    assert sorted(n.rsplit("/", 1)[1] for n in names if re.fullmatch(r"bioablate_core/experiments/[^/]+", n)) \
        == experiments
    top = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert top == {"ablations", "bioablate_core", "datamodules", "lightning_modules"}


def test_an_installed_copy_beside_a_users_own_core_and_experiments(installed, tmp_path):
    """The installed copy, imported from a research repository's folder holding its own `core/` and
    `experiments/` packages: both sides import what they should."""
    for name in ("core", "experiments"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"WHO = 'theirs: {name}'\n")
    out = _run([str(installed / "python"), "-c", "from ablations import api; import core, experiments; "
                "from bioablate_core.packaged import packaged_dir; "
                "print(core.WHO, experiments.WHO, packaged_dir('profile'), sep='\\n')"],
               cwd=tmp_path, env=_env(tmp_path, tmp_path)).split("\n")
    assert out[:2] == ["theirs: core", "theirs: experiments"]
    assert installed.parent / "lib" in Path(out[2]).parents and Path(out[2], "mini.yaml").is_file()


def _env(tmp: Path, data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "BIOABLATE_WORK", "MLFLOW_TRACKING_URI", "VIRTUAL_ENV")}
    return {**env, "BIOABLATE_DATA": str(data_dir), "HOME": str(tmp)}


def test_the_installed_code_is_the_wheels(installed, tmp_path):
    where = _run([str(installed / "python"), "-c", "import ablations, bioablate_core.packaged as p; "
                  "print(ablations.__file__, p.__file__, p.packaged_dir('experiment'), sep='\\n')"],
                 cwd=tmp_path, env=_env(tmp_path, tmp_path)).split()
    fresh_site = installed.parent / "lib"
    for path in map(Path, where):
        assert fresh_site in path.parents and REPO_ROOT not in path.parents, path


def test_version_from_the_installed_metadata(installed, tmp_path):
    out = _run([str(installed / "bioablate"), "--version"], cwd=tmp_path, env=_env(tmp_path, tmp_path))
    assert out.startswith("bioablate 0.") and "git" not in out  # not a checkout: no commit


def test_the_quickstart_by_name_outside_the_repository(installed, tmp_path, data_dir):
    """Its eight fine-tuning runs and its table, from the packaged YAML and profiles (a `bioablate finetune`
    of its own would add a process start and a run, and no packaged file the quickstart does not read)."""
    env = _env(tmp_path, data_dir)
    work = tmp_path / "work"
    out = _run([str(installed / "bioablate"), "run", "quickstart", "--profile", "micro", "--work-dir", str(work)],
               cwd=tmp_path, env=env)
    assert "quickstart" in out and "MLflow:" in out
    assert not (tmp_path / "experiments").exists() and (work / "mlruns.db").is_file()

    # the table follows the store: no --profile renders the micro runs (a table run per profile:
    # tests/e2e/test_tables.py, in this checkout)
    done = subprocess.run([str(installed / "bioablate"), "table", "quickstart", "--work-dir", str(work)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "micro" in done.stderr and "not run" not in done.stdout and "±" in done.stdout, done.stdout
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{work / 'mlruns.db'}")
    tables = client.search_runs([client.get_experiment_by_name("tables").experiment_id], "tags.kind = 'table'")
    assert [r.data.tags["profile"] for r in tables] == ["micro"]

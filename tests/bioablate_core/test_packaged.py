"""The packaged YAML files: found by name from any working directory, paths still paths, and every one of
them covered by the wheel's package-data globs."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from bioablate_core.errors import ConfigError, UnknownNameError
from bioablate_core.packaged import KINDS, packaged_dir, packaged_names, resolve_config

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_names_resolve_to_the_packaged_files_from_anywhere(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no experiments/ folder here
    for kind, name in (("experiment", "quickstart"), ("profile", "micro"), ("corpus", "pubmed"),
                       ("model", "pubmedbert"), ("sweep", "ner")):
        path = resolve_config(name, kind)
        assert path == packaged_dir(kind) / f"{name}.yaml" and path.is_file()
        assert resolve_config(f"{name}.yaml", kind) == path
    # the docs' repository paths work from an installed copy run elsewhere
    assert resolve_config("experiments/sweeps/micro.yaml", "sweep") == packaged_dir("sweep") / "micro.yaml"
    assert resolve_config("experiments/table13_tagging.yaml", "experiment").name == "table13_tagging.yaml"


def test_a_user_file_wins_over_a_packaged_name(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "quickstart.yaml").write_text("name: mine\n")
    assert resolve_config("quickstart.yaml", "experiment") == Path("quickstart.yaml")
    assert resolve_config(tmp_path / "quickstart.yaml", "experiment") == tmp_path / "quickstart.yaml"


def test_unknown_names_and_missing_paths_are_one_line_errors(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnknownNameError, match="unknown experiment 'table13_tag'.*did you mean 'table13_tagging'"):
        resolve_config("table13_tag", "experiment")
    with pytest.raises(ConfigError, match=r"config file not found: mine/exp.yaml .*quickstart"):
        resolve_config("mine/exp.yaml", "experiment")
    with pytest.raises(ConfigError, match="config file not found: nope.yaml"):
        resolve_config("nope.yaml", "profile")


def test_every_yaml_under_experiments_is_package_data():
    """What `pip wheel .` ships: the pyproject's globs must cover every packaged file (the slow wheel test,
    tests/e2e/test_wheel.py, installs one and runs from it)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["bioablate_core"]
    root = packaged_dir("experiment")
    files = [f"experiments/{p.relative_to(root).as_posix()}" for p in root.rglob("*") if p.is_file()
             and "__pycache__" not in p.parts]
    assert files and all(any(fnmatch.fnmatch(f, g) and f.count("/") == g.count("/") for g in globs)
                         for f in files), files
    assert all(packaged_names(kind) for kind in KINDS)
    # the package data's folder is the repository's top-level one, through bioablate_core's link
    assert root == (REPO_ROOT / "experiments").resolve() and (REPO_ROOT / "bioablate_core" / "experiments").is_symlink()

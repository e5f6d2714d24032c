"""The YAML files that ship with bioablate, and the one rule that turns what a user types into a file.

Experiment YAMLs, profiles, shared model definitions, corpora and sweep spaces live in the top-level
`experiments/` folder, which is a package so that they travel inside the wheel (package data); they are
found with importlib.resources, so they are found the same way from a checkout and from an installed
copy, whatever the working directory.

    resolve_config("quickstart", "experiment")        # the packaged experiments/quickstart.yaml
    resolve_config("my/own.yaml", "experiment")        # a path is itself
    resolve_config("experiments/sweeps/micro.yaml", "sweep")  # a repository path, also when installed

It lives in `core` because both `datamodules` (corpora) and `ablations` (the rest) use it.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from core.errors import ConfigError, UnknownNameError

PACKAGE = "experiments"
# kind -> its folder under experiments/, and the `bioablate list` word for it
KINDS = {"experiment": "", "profile": "profiles", "model": "models", "corpus": "corpora", "sweep": "sweeps"}
PLURAL = {"experiment": "experiments", "profile": "profiles", "model": "models", "corpus": "corpora",
          "sweep": "sweeps"}
SUFFIXES = (".yaml", ".yml")


def packaged_dir(kind: str) -> Path:
    """The folder holding the packaged YAML files of `kind`."""
    try:
        root = resources.files(PACKAGE)
    except ModuleNotFoundError:  # an editable install made before experiments/ became a package
        raise ConfigError(f"the packaged YAML files (the '{PACKAGE}' package) are not importable: reinstall "
                          "bioablate (`pip install -e .`, or rerun scripts/setup.sh)") from None
    # a regular package installed from a wheel (or a checkout) is a folder on disk; a zipped install would
    # need as_file() for every read, and the toolkit is never installed zipped
    if not isinstance(root, Path):
        raise RuntimeError(f"the '{PACKAGE}' package is not a folder on disk ({root!r})")
    return root / KINDS[kind] if KINDS[kind] else root


def packaged_names(kind: str) -> list[str]:
    """The bare names of the packaged files of `kind` (file names without .yaml), sorted."""
    return sorted(p.stem for p in packaged_dir(kind).glob("*.yaml"))


def packaged_file(kind: str, name: str) -> Path | None:
    path = packaged_dir(kind) / f"{name}.yaml"
    return path if path.is_file() else None


def is_bare_name(ref: str | Path) -> bool:
    """`quickstart`, `quickstart.yaml`: no folder in it."""
    return len(Path(ref).parts) == 1


def resolve_config(ref: str | Path, kind: str) -> Path:
    """A user's reference to a YAML of `kind` as a file: an existing path is itself; a bare name (with or
    without .yaml) is the packaged file of that name; `experiments/<folder>/<name>.yaml` as the docs write
    it is the packaged file when there is no such file here (e.g. an installed copy run from elsewhere).
    Otherwise one ConfigError naming the known names."""
    path = Path(ref).expanduser()
    if path.is_file():
        return path
    name = path.name[: -len(path.suffix)] if path.suffix in SUFFIXES else path.name
    folder = ("experiments", *filter(None, [KINDS[kind]]))
    if is_bare_name(path) or path.parts[:-1] == folder:
        packaged = packaged_file(kind, name)
        if packaged is not None:
            return packaged
    if is_bare_name(path) and path.suffix not in SUFFIXES:
        raise UnknownNameError(kind, name, packaged_names(kind))
    raise ConfigError(f"config file not found: {path} (give a YAML path, or the name of one of the packaged "
                      f"{PLURAL[kind]}: {', '.join(packaged_names(kind))})")

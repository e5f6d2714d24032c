"""The YAML files that ship with bioablate, and the one rule that turns what a user types into a file.

The top-level `experiments/` ships as `bioablate_core/experiments/` (a link in the repository), so no generic
top-level name enters site-packages and they are found alike from a checkout or a wheel.

    resolve_config("quickstart", "experiment")        # the packaged experiments/quickstart.yaml
    resolve_config("my/own.yaml", "experiment")        # a path is itself
    resolve_config("experiments/sweeps/micro.yaml", "sweep")  # a repository path, also when installed
"""

from __future__ import annotations

from pathlib import Path

from bioablate_core.errors import ConfigError, UnknownNameError

PACKAGED_ROOT = (Path(__file__).parent / "experiments").resolve()
# kind -> its folder under experiments/, and the `bioablate list` word for it
KINDS = {"experiment": "", "profile": "profiles", "model": "models", "corpus": "corpora", "sweep": "sweeps"}
PLURAL = {"experiment": "experiments", "profile": "profiles", "model": "models", "corpus": "corpora",
          "sweep": "sweeps"}
SUFFIXES = (".yaml", ".yml")


def packaged_root() -> Path:
    """The folder of the packaged YAML files: `experiments/` beside this module (package data)."""
    root = PACKAGED_ROOT
    if not (root / KINDS["profile"]).is_dir():  # a wheel built without its package data, or a broken link
        raise ConfigError(f"the packaged YAML files are missing ({root} holds no profiles/): reinstall "
                          "bioablate (`pip install .`, or rerun scripts/setup.sh)")
    return root


def packaged_dir(kind: str) -> Path:
    """The folder holding the packaged YAML files of `kind`."""
    return packaged_root() / KINDS[kind] if KINDS[kind] else packaged_root()


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
    """A user's reference to a YAML of `kind` as a file: an existing path, a packaged bare name, or a
    repository path `experiments/<folder>/<name>.yaml`; else a ConfigError naming the known names."""
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

"""After a sweep: the best trial's configuration as a `--config` layer, and the commands to go on with.

Every command printed after a sweep is complete: pasted as is, it finds the same study, store and data
(`--work-dir`, `--storage` when the sweep was given one, `--data-dir` when given).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy
from omegaconf import OmegaConf
from optuna.trial import FrozenTrial

from ablations.config import NON_RESULT_KEYS, flatten, parse_overrides
from ablations.sweep.spec import SPEC_ATTR
from ablations.sweep.storage import open_storage
from ablations.sweep.tracking import best_trial
from bioablate_core.databases import leave_out_passwords, redact
from bioablate_core.errors import ConfigError

# Left out of the layer: keys that do not change a result (paths, progress bar), except those a run may
# need to exist at all (the user datasets of its task, permission to resize a model's embeddings).
LEFT_OUT = NON_RESULT_KEYS - {"datasets", "model.resize_embeddings"}


@dataclass(frozen=True)
class Place:
    """The options that point a command at a sweep's files: each printed command carries them."""

    work_dir: str
    storage: str | None = None  # as given with --storage; None: the default, or $BIOABLATE_SWEEP_STORAGE
    data_dir: str | None = None
    tracking_uri: str | None = None  # as given with --tracking-uri; None: the work directory's

    def options(self, storage: bool = False, data: bool = False) -> list[str]:
        out = ["--work-dir", self.work_dir]
        if self.tracking_uri:
            out += ["--tracking-uri", self.tracking_uri]
        if storage and self.storage:
            out += ["--storage", self.storage]
        if data and self.data_dir:
            out += ["--data-dir", self.data_dir]
        return out


def _command(*words: str) -> str:
    """A printed command: a password in a URL it names is left out (the environment supplies it, docs/sweeps.md)."""
    return leave_out_passwords(shlex.join(["bioablate", *words]))


def best_command(study: str, place: Place) -> str:
    return _command("sweep", "best", study, *place.options(storage=True, data=True))


def ui_command(place: Place) -> str:
    return _command("ui", *place.options(storage=True))


def finetune_command(layer: Path, profile: str, seed: int, place: Place) -> str:
    """`bioablate finetune` over the best layer: the sweep's profile and first seed, so that the run is the
    best trial's own (a finished one is reused)."""
    return _command("finetune", "--config", str(layer), "--profile", profile, "--seed", str(seed),
                    *place.options(data=True))


@dataclass(frozen=True)
class BestConfig:
    text: str  # the YAML layer, headed by a comment saying where it came from
    trial: FrozenTrial
    task: str
    profile: str
    seeds: list[int]


def best_config(study_name: str, storage_url: str) -> BestConfig:
    """The best trial's config keys (task, the sweep's overrides and the sampled values) as a YAML layer
    for `bioablate finetune --config`; bookkeeping keys (paths, progress bar) are left out."""
    if storage_url.startswith("sqlite"):
        database = sqlalchemy.engine.make_url(storage_url).database
        if database and database != ":memory:" and not Path(database).is_file():
            raise ConfigError(f"no study storage at {database}: pass the sweep's --work-dir (or --storage)")
    with open_storage(storage_url) as storage:
        names = optuna.get_all_study_names(storage)
        if study_name not in names:
            raise ConfigError(f"no study '{study_name}' in {redact(storage_url)}; studies there: "
                              f"{', '.join(sorted(names)) or 'none'}")
        study = optuna.load_study(study_name=study_name, storage=storage)
        best = best_trial(study)
        spec: dict[str, Any] = study.user_attrs.get(SPEC_ATTR, {})
    if best is None:
        raise ConfigError(f"study '{study_name}' has no completed trial yet")
    layer = parse_overrides(list(spec.get("overrides", [])))
    for key, value in best.params.items():
        OmegaConf.update(layer, key, value, force_add=True)
    snippet = OmegaConf.create({"task": spec["task"]} if spec.get("task") else {})
    for key, value in flatten(layer).items():
        if key not in LEFT_OUT:
            OmegaConf.update(snippet, key, value, force_add=True)
    header = (f"# best trial {best.number} of study '{study_name}' ({redact(storage_url)}): "
              f"{spec.get('metric', 'score')} = {best.value:.6g} ({spec.get('direction', 'maximize')}), "
              f"task {spec.get('task', '?')}, profile {spec.get('profile', '?')}, "
              f"seeds {spec.get('seeds', [])}\n"
              f"# a config layer: bioablate finetune --config THIS_FILE --profile {spec.get('profile', 'micro')}"
              " [key=value ...]\n")
    return BestConfig(header + OmegaConf.to_yaml(snippet), best, spec.get("task", ""),
                      spec.get("profile", "micro"), list(spec.get("seeds", [42])))

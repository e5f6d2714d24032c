"""What there is, as `bioablate list WHAT` and `bioablate --version` print it (ablations/api/ re-exports
`listing` and `version`): the datasets, models,
variants and corpora in their registries, the packaged experiments, profiles and sweep spaces
(bioablate_core.packaged), every config key of the run schema with its type, its value under a profile and the
comment beside it in ablations/config.py, and the version.

Everything is read from where it is defined (the YAML files, the dataclass schemas, the installed
package's metadata); nothing here is a second copy of it.
"""

from __future__ import annotations

import json
import re
import subprocess
from importlib import metadata
from pathlib import Path

from bioablate_core.packaged import packaged_dir, packaged_names

DISTRIBUTION = "bioablate"
REPO_ROOT = Path(__file__).resolve().parents[2]


ABBREVIATIONS = ("Sec", "e.g", "i.e", "al", "vs", "cf", "Fig", "Eq")


def _first_sentence(text: str) -> str:
    """Up to the first full stop that ends a sentence (not the one in `Sec. 2.5` or `e.g. x`)."""
    pieces = re.split(r"\.\s+", text)
    sentence = pieces[0]
    for piece in pieces[1:]:
        if not sentence.endswith(ABBREVIATIONS):
            break
        sentence += ". " + piece
    return sentence.rstrip(".")


def _leading_comment(path: Path) -> str:
    """The first sentence of a YAML file's leading comment block, without its `name:` lead-in."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    text = _first_sentence(" ".join(lines))
    return text.removeprefix(f"{path.stem}: ")


def _value(value) -> str:
    """As it would be written on the command line (`key=value`): true, null, 5e-05, [a, b]."""
    return value if isinstance(value, str) else json.dumps(value)


def _columns(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows of fields, each column but the last as wide as its longest field, one space between."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)] if rows else []
    return [" ".join([*(f"{field:<{w}}" for field, w in zip(row, widths)), row[-1]]) for row in rows]


TASKS_HEADER = ("task", "source", "task_type", "metric", "max_length")  # one word each: `list` output is cut by
EXPERIMENTS_HEADER = ("experiment", "kind", "profile", "description")  # spaces (awk '{print $1}')


def tasks() -> list[str]:
    """Every registered dataset; the second column says which are BLURB's 13 (Gu et al., Table 3) and which
    come from the other papers' tables (BioBERT, BioALBERT, Bio-ELECTRA) or a user's YAML."""
    from datamodules.blurb import BLURB_DATASETS
    from datamodules.registry import dataset_names, get_dataset

    blurb = {spec.name for spec in BLURB_DATASETS}
    return _columns([TASKS_HEADER, *((name, "BLURB" if name in blurb else "other", spec.task_type, spec.metric,
                                      f"max_length={spec.max_length}")
                                     for name, spec in ((name, get_dataset(name)) for name in dataset_names()))])


def models() -> list[str]:
    from lightning_modules.models import describe_models

    return [*describe_models(),
            "(or any Hugging Face-format model directory, or a Hub id ORG/NAME[@REVISION]; Hub models download "
            "on first use into the Hugging Face cache, or ahead with `hf download HUB_ID`; HF_HUB_OFFLINE=1 uses "
            "the cache only)"]


def variants() -> list[str]:
    from lightning_modules.choice_names import describe as describe_variants

    return describe_variants().splitlines()


def options(key: str) -> list[str]:
    """The options of the choice at config key `key` (`pretrain.masking`), from its registry."""
    from lightning_modules.choice_names import CHOICES, PRETRAIN_CHOICES

    return list({choice.kind: choice for choice in (*CHOICES, *PRETRAIN_CHOICES)}[key])


def corpora() -> list[str]:
    from datamodules.pretrain.corpora import corpus_names, resolve_corpus

    lines = []
    for name in corpus_names():
        spec = resolve_corpus(name)
        formats = ", ".join(dict.fromkeys(part.format for part in spec.parts))
        lines.append(f"{name:<10} {spec.description}  [{formats}]  {spec.path}")
    return [*lines, "(or the path of a corpus YAML; mixtures a+b, sequences a>b; see docs/pretraining.md)"]


def experiments() -> list[str]:
    """One line per packaged experiment: name, kind, default profile, description."""
    from bioablate_core.schema import load_yaml

    rows = []
    for name in packaged_names("experiment"):
        raw = load_yaml(packaged_dir("experiment") / f"{name}.yaml")
        kind, profile = raw.get("kind", "finetune"), raw.get("profile", "micro")
        rows.append((name, kind, f"{profile:<5} ", str(raw.get("description", ""))))
    return [*_columns([EXPERIMENTS_HEADER, *rows]), "(run one: bioablate run NAME [--profile micro|mini|base]; "
                             "or the path of your own YAML; docs/experiments.md)"]


def profiles() -> list[str]:
    return [f"{name:<6} {_leading_comment(packaged_dir('profile') / f'{name}.yaml')}"
            for name in packaged_names("profile")]


def sweeps() -> list[str]:
    return [*(f"{name:<15} {_leading_comment(packaged_dir('sweep') / f'{name}.yaml')}"
              for name in packaged_names("sweep")),
            "(run one: bioablate sweep NAME --task TASK; or the path of your own sweep YAML; docs/sweeps.md)"]


def keys(profile: str = "micro") -> list[str]:
    """Every config key (`key=value` on the command line, or a YAML layer): type, value under `profile`,
    description (the first sentence of the schema's comment)."""
    from ablations.config import RunConfig, flatten, with_profile
    from bioablate_core.schema import defaults, describe

    values = flatten(with_profile(defaults(RunConfig), profile))
    rows = [(key, kind, "(required)" if values.get(key) == "???" else _value(values.get(key)),
             _first_sentence(text)) for key, kind, text in describe(RunConfig)]
    width = [max(len(row[i]) for row in rows) for i in range(3)]
    header = ("key", "type", f"{profile} value", "description")
    width = [max(w, len(h)) for w, h in zip(width, header)]
    return [f"{header[0]:<{width[0]}}  {header[1]:<{width[1]}}  {header[2]:<{width[2]}}  {header[3]}",
            *(f"{k:<{width[0]}}  {t:<{width[1]}}  {v:<{width[2]}}  {d}".rstrip() for k, t, v, d in rows)]


LISTINGS = {"tasks": tasks, "models": models, "variants": variants, "corpora": corpora,
            "experiments": experiments, "profiles": profiles, "sweeps": sweeps, "keys": keys}


WHAT = {"tasks": "the datasets: BLURB or other, task type, metric, max length",
        "models": "named models and Hub aliases",
        "variants": "fine-tuning variants per task type (heads, tagging, relation inputs)",
        "corpora": "pretraining corpora", "experiments": "the packaged experiments (one per paper table)",
        "profiles": "micro / mini / base", "sweeps": "packaged sweep spaces",
        "keys": "every config key: type, value under --profile, description"}


def listing(what: str | None, profile: str = "micro") -> list[str]:
    """The lines `bioablate list WHAT` prints (`profile`: the values `keys` shows); no WHAT: what can be listed."""
    if what is None:
        width = max(map(len, WHAT))
        return ["bioablate list WHAT, where WHAT is one of:",
                *(f"  {name:<{width}}  {text}" for name, text in WHAT.items())]
    return LISTINGS[what](profile) if what == "keys" else LISTINGS[what]()


def version() -> str:
    """`bioablate X.Y.Z`, plus the git commit when the code runs from a checkout (not from an install)."""
    try:
        text = f"{DISTRIBUTION} {metadata.version(DISTRIBUTION)}"
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        text = f"{DISTRIBUTION} (not installed)"
    if (REPO_ROOT / ".git").exists():
        try:
            done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                                  text=True, timeout=5)
        except (OSError, subprocess.TimeoutExpired):  # no git: the version alone
            return text
        if done.returncode == 0:
            text += f" (git {done.stdout.strip()}, {REPO_ROOT})"
    return text

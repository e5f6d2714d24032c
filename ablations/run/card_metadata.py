"""What a fine-tuned model's card tells the Hugging Face Hub in its front matter (ablations/run/cards.py writes
the card): the base model it was fine-tuned from, the licence its training data puts on it, and its test
scores as `model-index` results (the Hub's evaluation widget reads them)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from huggingface_hub import EvalResult

from datamodules.metrics import METRIC_NAMES
from datamodules.task_types import TASK_TYPES
from lightning_modules.models import HUB_ID, MODEL_CARD, NAMED_MODELS, RANDOM_BERT, split_revision

# Licence ids the Hub knows (https://hf.co/docs/hub/repositories-licenses) among the data's; any other
# name is written as `license: other` with the name in `license_name`
HUB_LICENSES = frozenset({"apache-2.0", "mit", "cc-by-4.0", "cc-by-sa-4.0", "cc-by-nc-4.0", "cc-by-3.0",
                          "cc-by-sa-3.0", "cc0-1.0", "gpl-3.0", "bsd-3-clause", "odc-by", "unknown"})
HUB_METRIC_TYPES = {"pearson": "pearsonr", "accuracy": "accuracy", "bioasq_factoid": "mrr"}  # the rest are F1s


def license_metadata(licenses: tuple[str, ...]) -> dict[str, Any]:
    """The front matter's licence keys for data under `licenses`: the Hub's id where there is one licence
    it knows; `other` with the names in `license_name` (joined) and `data_licenses` (a list) otherwise;
    `unknown` where the data states none."""
    names = sorted(set(licenses)) or ["unknown"]
    if len(names) == 1 and names[0] in HUB_LICENSES:
        return {"license": names[0]}
    return {"license": "other", "license_name": "-and-".join(names), "data_licenses": names}


def _pretraining_run(folder: Path) -> dict[str, str] | None:
    """The fingerprint and MLflow run id of the bioablate pretraining run that wrote `folder`, read from
    its card (`pretrain_card`); None for any other folder."""
    card = folder / MODEL_CARD
    text = card.read_text(encoding="utf-8") if card.is_file() else ""
    parts = text.split("---", 2)
    try:
        front = yaml.safe_load(parts[1]) if len(parts) == 3 else None
    except yaml.YAMLError:
        return None
    tags = (front.get("tags") or []) if isinstance(front, dict) else []
    if "bioablate" not in tags or "pretraining" not in tags:
        return None
    found = {key: re.search(rf"- {label}: `([^`]+)`", text) for key, label in
             (("fingerprint", "fingerprint"), ("run_id", "MLflow run id"))}
    return {key: match.group(1) if match else "?" for key, match in found.items()}


def base_model(name_or_path: str) -> tuple[str | None, str]:
    """(`base_model` for the Hub's metadata, the card's sentence) for a run's `model.name_or_path`: the Hub
    id of a Hub or named model, a bioablate pretraining run's folder name, or None (a random BERT, any other
    local folder, a model shipped in a package). Only folder names appear, never a machine's paths."""
    if name_or_path == RANDOM_BERT:
        return None, "a randomly initialised BERT (no pretraining)"
    path = Path(name_or_path).expanduser()
    if (path / "config.json").is_file():
        run = _pretraining_run(path)
        if run is None:
            return None, f"a local model folder, `{path.name}`"
        return path.name, (f"the bioablate pretraining run `{path.name}` (fingerprint `{run['fingerprint']}`, "
                           f"MLflow run id `{run['run_id']}`)")
    name, revision = split_revision(name_or_path)
    at = f" at revision `{revision}`" if revision else ""
    if name in NAMED_MODELS:
        entry = NAMED_MODELS.get(name)
        if entry.hub_id is None:
            return None, f"bioablate's named model `{name}` (package `{entry.package}`)"
        return entry.hub_id, f"`{entry.hub_id}`{at} (bioablate's `{name}`)"
    if HUB_ID.fullmatch(name):
        return name, f"`{name}`{at}"
    return None, f"`{name_or_path}`"


def eval_results(meta: dict[str, Any], pipeline: str, test_metrics: dict[str, float], metric: str
                 ) -> list[EvalResult]:
    """The test scores as `model-index` results under the model's Hub `pipeline` tag: the task's own metric,
    and precision / recall where the metric has them."""
    common = {"task_type": pipeline, "task_name": TASK_TYPES.of(meta["task_type"]).title,
              "dataset_type": meta["task"], "dataset_name": meta["task"], "dataset_split": "test"}
    results = []
    primary = ("score", HUB_METRIC_TYPES.get(metric, "f1"), METRIC_NAMES.get(metric, metric))
    for key, metric_type, name in (primary, ("precision", "precision", "precision"), ("recall", "recall", "recall")):
        if isinstance(test_metrics.get(key), (int, float)):
            results.append(EvalResult(**common, metric_type=metric_type, metric_name=name,
                                      metric_value=round(float(test_metrics[key]), 4)))
    return results

"""Fine-tuned models others can use: the best weights of a finished run, as a Hugging Face folder.

At the end of a finished fine-tuning run (`ablations.run.finetune`) the best dev epoch's encoder and head are
written to `<work>/runs/<fingerprint>/model/` (safetensors, config, tokenizer, a model card and
`bioablate.json`; MLflow tag `model_dir`). `bioablate export RUN --to DIR` copies that folder out. Two
formats, recorded in `bioablate.json` (`format`):

- ``transformers``: the heads transformers has a class for, as that class, so plain transformers loads it:
  a linear token tagger -> `AutoModelForTokenClassification` (dropout + linear over every token, as ours);
  a linear classifier on [CLS] (classification, multi-label, regression; relation extraction with the
  `cls` feature) of a BERT or ALBERT encoder -> `AutoModelForSequenceClassification`; an `mlp` classifier
  on [CLS] of an ELECTRA encoder -> `ElectraForSequenceClassification` (dense, GELU, dropout, linear:
  exactly ours).
  The BERT/ALBERT sequence classes put a pooler (dense + tanh) between [CLS] and the classifier, which our
  linear head does not have. It is exported as a *linearised* pooler: dense = eps x identity (eps = 1e-4),
  classifier weights / eps. tanh(x) = x (1 - x^2/3 + ...), so for hidden values |h| < 10 the relative
  error is below 3e-7, float32's own rounding: the logits equal ours to float precision. (Fine-tuning such
  an export further should re-initialise the pooler.)
- ``bioablate``: heads transformers has no class for (CRF, BiLSTM, the `mention` / `entity-start`
  relation features, `mlp` on BERT/ALBERT, `linear` on ELECTRA), and extractive QA's span head (its
  answers come from bioablate's window merging, which transformers' QA classes do not do): the encoder as a transformers folder
  (`AutoModel` loads it) plus `head.safetensors`, rebuilt from `lightning_modules.heads` by
  `ablations.run.predict.load_model`.

Disk: the encoder's weights in float32 plus the head: about 0.4 GB per run at `base` (BERT-base, 110M
parameters), about 9 MB at `micro` (the 30k-entry embeddings dominate).
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path
from typing import Any

import torch
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from safetensors.torch import save_file
from torch import nn
from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification, PreTrainedModel

from ablations.places import resolve_tracking_uri, resolve_work_dir
from ablations.run.cards import Provenance, finetune_card
from core.errors import ConfigError
from core.files import publish_dir
from datamodules.encoders import TaskEncoder
from lightning_modules.finetune_spec import FinetuneSpec
from lightning_modules.heads import SequenceClassifier, TokenTagger

META_FILE = "bioablate.json"
HEAD_FILE = "head.safetensors"
POOLER_EPS = 1e-4  # scale of the linearised pooler (see the module docstring)
TRANSFORMERS, BIOABLATE = "transformers", "bioablate"
PROBLEM_TYPES = {"classification": "single_label_classification", "multilabel": "multi_label_classification",
                 "regression": "regression", "ranking": "single_label_classification"}


def label_names(task_encoder: TaskEncoder) -> list[str]:
    """The output layer's label of each index: tags, classes, or the task's name for regression."""
    if task_encoder.output_kind == "token":
        return list(task_encoder.tags)
    if task_encoder.output_kind == "span":  # extractive QA: a start and an end logit per position
        return ["start", "end"]
    if task_encoder.output_kind == "regression":
        return [task_encoder.spec.name]
    return list(task_encoder.labels)


def _labelled_config(encoder: PreTrainedModel, task_encoder: TaskEncoder):
    config = copy.deepcopy(encoder.config)
    labels = label_names(task_encoder)
    config.num_labels = len(labels)
    config.id2label = dict(enumerate(labels))
    config.label2id = {label: i for i, label in enumerate(labels)}
    if task_encoder.output_kind != "token":
        config.problem_type = PROBLEM_TYPES[task_encoder.output_kind]
    return config


def transformers_model(encoder: PreTrainedModel, head: nn.Module, task_encoder: TaskEncoder
                       ) -> PreTrainedModel | None:
    """The encoder + head as the transformers class computing the same logits, or None where transformers
    has no such class (see the module docstring)."""
    model_type = encoder.config.model_type
    if isinstance(head, TokenTagger):
        if head.layer is not None or head.crf is not None:
            return None
        model = AutoModelForTokenClassification.from_config(_labelled_config(encoder, task_encoder))
        model.base_model.load_state_dict(encoder.state_dict())
        model.classifier.load_state_dict(head.out.state_dict())
        return model.eval()
    if not isinstance(head, SequenceClassifier) or head.layer is not None or head.feature != "cls":
        return None
    if isinstance(head.out, nn.Linear) and model_type in ("bert", "albert"):
        model = AutoModelForSequenceClassification.from_config(_labelled_config(encoder, task_encoder))
        missing, unexpected = model.base_model.load_state_dict(encoder.state_dict(), strict=False)
        if unexpected or any("pooler" not in key for key in missing):
            raise RuntimeError(f"encoder does not map onto {type(model).__name__}: {missing}, {unexpected}")
        pooler = model.base_model.pooler
        dense = pooler.dense if model_type == "bert" else pooler
        with torch.no_grad():
            dense.weight.copy_(torch.eye(dense.weight.shape[0]) * POOLER_EPS)
            dense.bias.zero_()
            model.classifier.weight.copy_(head.out.weight / POOLER_EPS)
            model.classifier.bias.copy_(head.out.bias)
        return model.eval()
    if isinstance(head.out, nn.Sequential) and model_type == "electra":
        model = AutoModelForSequenceClassification.from_config(_labelled_config(encoder, task_encoder))
        model.base_model.load_state_dict(encoder.state_dict())
        model.classifier.dense.load_state_dict(head.out[0].state_dict())
        model.classifier.out_proj.load_state_dict(head.out[3].state_dict())
        return model.eval()
    return None


def save_finetuned(out_dir: Path, encoder: PreTrainedModel, head: nn.Module, task_encoder: TaskEncoder,
                   choices: FinetuneSpec, cfg: Any, provenance: Provenance, test_metrics: dict[str, float]
                   ) -> Path:
    """Write the fine-tuned model (module docstring) to `out_dir`, atomically, with plain file modes."""
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    encoder, head = encoder.cpu().eval(), head.cpu().eval()
    model = transformers_model(encoder, head, task_encoder)
    fmt = TRANSFORMERS if model is not None else BIOABLATE
    if model is not None:
        model.save_pretrained(tmp)
    else:
        encoder.save_pretrained(tmp)
        save_file({k: v.contiguous() for k, v in head.state_dict().items()}, str(tmp / HEAD_FILE))
    tokenizer = task_encoder.tokenizer
    tokenizer.model_max_length = task_encoder.max_length  # inputs were cut there in training
    tokenizer.save_pretrained(tmp)
    spec = task_encoder.spec
    meta = {"format": fmt, "architecture": type(model).__name__ if model is not None else None,
            "task": spec.name, "task_type": spec.task_type, "output_kind": task_encoder.output_kind,
            "labels": label_names(task_encoder), "max_length": task_encoder.max_length,
            # the encoding and head choices: FinetuneSpec.from_metadata rebuilds them (ablations.run.predict)
            **choices.metadata(), "eval_batch_size": cfg.finetune.eval_batch_size,
            "fingerprint": provenance.fingerprint, "run_id": provenance.run_id}
    (tmp / META_FILE).write_text(json.dumps(meta, indent=1) + "\n")
    (tmp / "README.md").write_text(finetune_card(meta, test_metrics, provenance), encoding="utf-8")
    return publish_dir(tmp, out_dir)


# ------------------------------------------------------------------------------------ bioablate export

RUN_ID = re.compile(r"^[0-9a-f]{32}$")


def find_finished_run(ref: str, tracking_uri: str):
    """The FINISHED fine-tuning run `ref` names: an MLflow run id, or a fingerprint (its newest run)."""
    client = MlflowClient(tracking_uri)
    run = None
    if RUN_ID.match(ref):
        try:
            run = client.get_run(ref)
        except MlflowException:  # no such run id
            run = None
    if run is None:
        experiments = [e.experiment_id for e in client.search_experiments()]
        runs = client.search_runs(experiments, f"tags.fingerprint = '{ref}'",
                                  order_by=["attributes.start_time DESC"], max_results=1) if experiments else []
        run = runs[0] if runs else None
    if run is None:
        raise ConfigError(f"no run with id or fingerprint '{ref}' in {tracking_uri}; pass the run id or "
                          "fingerprint `bioablate finetune` printed, and the same --work-dir / --tracking-uri")
    if run.data.tags.get("kind") != "finetune":
        raise ConfigError(f"run {run.info.run_id} is a {run.data.tags.get('kind', 'unknown')} run, not a "
                          "fine-tuning run; a pretrained model is already a folder (its tag model_dir)")
    if run.info.status != "FINISHED":
        raise ConfigError(f"run {run.info.run_id} is {run.info.status}, not FINISHED: only a finished run has "
                          "best weights; rerun its `bioablate finetune` command to finish it")
    return run


def export_run(ref: str, to: Path, tracking_uri: str) -> tuple[Path, dict[str, Any]]:
    """Copy the stored model of finished fine-tuning run `ref` to `to`; returns (to, its bioablate.json).
    An existing `to` is replaced only if it is empty or an earlier export."""
    run = find_finished_run(ref, tracking_uri)
    source = Path(run.data.tags.get("model_dir", ""))
    if not run.data.tags.get("model_dir") or not (source / META_FILE).is_file():
        raise ConfigError(f"run {run.info.run_id} kept no model (keep_model=false, or it finished before runs stored their best "
                          "weights, or its work directory moved); rerun its `bioablate finetune` command "
                          "with --force to train and store one")
    to = to.expanduser().resolve()
    if to.exists() and (not to.is_dir() or (any(to.iterdir()) and not (to / META_FILE).is_file())):
        raise ConfigError(f"--to {to} exists and is not an empty folder or an earlier export; pick a new folder")
    tmp = to.with_name(to.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    to.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, tmp)
    publish_dir(tmp, to)
    return to, json.loads((to / META_FILE).read_text())


def export_command(ref: str, to: Path, work_dir: str | None, tracking_uri: str | None) -> str:
    """`bioablate export`: export, and say what was written and how to use it."""
    work = resolve_work_dir() if work_dir is None else Path(work_dir).expanduser().resolve()
    out, meta = export_run(ref, to, tracking_uri or resolve_tracking_uri(None, work))
    how = (f"transformers {meta['architecture']}" if meta["format"] == TRANSFORMERS
           else "encoder + bioablate head, see its README.md")
    return (f"{meta['task']} model of run {meta['run_id']} -> {out} ({how})\n"
            f"  bioablate predict --model {out} --input FILE")


# ------------------------------------------------------------- fine-tuning a fine-tuned model further

HEAD_CHOICES = ("head", "re_feature", "classifier")  # what shapes the head's weights (dropout does not)


def carry_head(model_dir: Path, head: nn.Module, task_encoder: TaskEncoder, choices: FinetuneSpec) -> str:
    """Fine-tuning a model folder this module wrote (a finished run's `model/`, or its export): load its
    head into the freshly built `head` where the two tasks share a label space (same task type, output
    kind and labels) and the head is built alike (`HEAD_CHOICES`); otherwise the head stays as initialised.
    The encoder is loaded from the folder either way (`lightning_modules.models.load_encoder`). Returns
    what happened, for the run's tag `head_init`: `new`, `new (WHY)` or `carried over from TASK`."""
    if not (model_dir / META_FILE).is_file():
        return "new"
    meta = json.loads((model_dir / META_FILE).read_text())
    first = meta.get("task", "?")
    spec = task_encoder.spec
    if (meta.get("task_type"), meta.get("output_kind")) != (spec.task_type, task_encoder.output_kind):
        return f"new (its head was trained on {first}, a {meta.get('task_type')} task)"
    if meta.get("labels") != label_names(task_encoder):
        return f"new ({first}'s labels {', '.join(meta.get('labels') or [])} are not {spec.name}'s)"
    built = choices.head.metadata()
    other = [key for key in HEAD_CHOICES if meta.get(key) != built[key]]
    if other:
        return f"new (its head was built with finetune.{other[0]}={meta.get(other[0])}, this run's is {built[other[0]]})"
    head.load_state_dict(_exported_head_state(model_dir, meta, head))
    return f"carried over from {first}"


def _exported_head_state(model_dir: Path, meta: dict[str, Any], head: nn.Module) -> dict[str, torch.Tensor]:
    """The head's weights as `save_finetuned` wrote them: `head.safetensors`, or (format `transformers`)
    the transformers class's classifier, undoing the linearised pooler's scale (module docstring)."""
    from safetensors.torch import load_file

    if meta["format"] != TRANSFORMERS:
        return load_file(str(model_dir / HEAD_FILE))
    weights = load_file(str(model_dir / "model.safetensors"))
    if isinstance(head, TokenTagger):
        return {"out.weight": weights["classifier.weight"], "out.bias": weights["classifier.bias"]}
    if isinstance(head.out, nn.Linear):  # BERT / ALBERT: classifier = ours / POOLER_EPS
        return {"out.weight": weights["classifier.weight"] * POOLER_EPS, "out.bias": weights["classifier.bias"]}
    return {"out.0.weight": weights["classifier.dense.weight"], "out.0.bias": weights["classifier.dense.bias"],
            "out.3.weight": weights["classifier.out_proj.weight"], "out.3.bias": weights["classifier.out_proj.bias"]}

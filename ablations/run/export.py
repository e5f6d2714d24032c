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
  answers come from bioablate's window merging, which transformers' QA classes do not do): the encoder as a
  transformers folder (`AutoModel` loads it) plus `head.safetensors`, rebuilt from `lightning_modules.heads` by
  `ablations.run.predict.load_model`.

Which format, and where each head weight goes in the transformers class (`HeadMapping`), is a function of
the run's `FinetuneSpec` and the encoder's model type, given by the task kind's export part (the block at
the end of this module; datamodules/task_kinds.py): the same mapping writes an export and reads its head
back when a later run fine-tunes it further (`carry_head`).

Disk: the encoder's weights in float32 plus the head: about 0.4 GB per run at `base` (BERT-base, 110M
parameters), about 9 MB at `micro` (the 30k-entry embeddings dominate).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient
from safetensors.torch import save_file
from torch import nn
from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification, PreTrainedModel

from ablations.places import resolve_tracking_uri, resolve_work_dir
from ablations.run.cards import Provenance, finetune_card
from ablations.run.exported_dataset import carry_definition, dataset_metadata, register_datasets
from bioablate_core.errors import ConfigError
from bioablate_core.files import normalise_modes, publish_dir
from datamodules.encoders import TaskEncoder
from datamodules.task_kinds import TASK_KINDS
from lightning_modules.finetune_spec import FinetuneSpec
from lightning_modules.heads import HEADS, RE_FEATURES, HeadSpec

META_FILE = "bioablate.json"
HEAD_FILE = "head.safetensors"
POOLER_EPS = 1e-4  # scale of the linearised pooler (see the module docstring)
TRANSFORMERS, BIOABLATE = "transformers", "bioablate"


@dataclass(frozen=True)
class HeadMapping:
    """Where a head's weights sit in the transformers class that computes the same logits: each key of our
    head's state dict -> the class's key. With a linearised pooler (`pooler_eps`, module docstring) the
    pooler is eps x identity and the `scaled` weights are divided by eps on export (multiplied back when
    a head is read from an export)."""

    auto_class: type
    keys: dict[str, str]
    pooler_eps: float | None = None
    scaled: tuple[str, ...] = ()

    def exported(self, head_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Our head's weights under the transformers class's keys."""
        if set(head_state) != set(self.keys):
            raise RuntimeError(f"head weights {sorted(head_state)} do not map onto {self.auto_class.__name__} "
                               f"(expected {sorted(self.keys)})")
        return {self.keys[key]: value / self.pooler_eps if key in self.scaled else value
                for key, value in head_state.items()}

    def head_state(self, weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The inverse of `exported`: our head's weights out of the transformers class's."""
        return {key: weights[target] * self.pooler_eps if key in self.scaled else weights[target]
                for key, target in self.keys.items()}


@dataclass(frozen=True)
class ExportPart:
    """A task kind's part of the export (datamodules/task_kinds.py): the transformers class that holds a
    head built by a `HeadSpec` on an encoder of a `model_type`, or None (the `bioablate` format); and the
    `problem_type` the class's config records (None: the class has no such choice)."""

    mapping: Callable[[HeadSpec, str], HeadMapping | None]
    problem_type: str | None = None


def export_mapping(choices: FinetuneSpec, kind: str, model_type: str) -> HeadMapping | None:
    """How the head of `choices` for task kind `kind` on a `model_type` encoder is exported: a transformers
    class and where its weights go, or None where transformers has no class computing the same logits."""
    return TASK_KINDS.part(kind, "export").mapping(choices.head, model_type)


def label_names(task_encoder: TaskEncoder) -> list[str]:
    """The output layer's label of each index: tags, classes, or the task's name for regression."""
    return task_encoder.label_names()


def _labelled_config(encoder: PreTrainedModel, task_encoder: TaskEncoder):
    config = copy.deepcopy(encoder.config)
    labels = label_names(task_encoder)
    config.num_labels = len(labels)
    config.id2label = dict(enumerate(labels))
    config.label2id = {label: i for i, label in enumerate(labels)}
    problem_type = TASK_KINDS.part(task_encoder.output_kind, "export").problem_type
    if problem_type is not None:
        config.problem_type = problem_type
    return config


def transformers_model(encoder: PreTrainedModel, head: nn.Module, task_encoder: TaskEncoder, mapping: HeadMapping
                       ) -> PreTrainedModel:
    """The encoder + head as the transformers class `mapping` names, which computes the same logits (see
    the module docstring)."""
    model = mapping.auto_class.from_config(_labelled_config(encoder, task_encoder))
    missing, unexpected = model.base_model.load_state_dict(encoder.state_dict(), strict=False)
    if unexpected or any("pooler" not in key or mapping.pooler_eps is None for key in missing):
        raise RuntimeError(f"encoder does not map onto {type(model).__name__}: {missing}, {unexpected}")
    if mapping.pooler_eps is not None:
        pooler = model.base_model.pooler
        dense = getattr(pooler, "dense", pooler)  # BERT's pooler holds a dense layer; ALBERT's is one
        with torch.no_grad():
            dense.weight.copy_(torch.eye(dense.weight.shape[0]) * mapping.pooler_eps)
            dense.bias.zero_()
    missing, unexpected = model.load_state_dict(mapping.exported(head.state_dict()), strict=False)
    if unexpected:
        raise RuntimeError(f"head does not map onto {type(model).__name__}: {unexpected}")
    return model.eval()


def save_finetuned(out_dir: Path, encoder: PreTrainedModel, head: nn.Module, task_encoder: TaskEncoder,
                   choices: FinetuneSpec, cfg: Any, provenance: Provenance, test_metrics: dict[str, float]
                   ) -> Path:
    """Write the fine-tuned model (module docstring) to `out_dir`, atomically, with plain file modes."""
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    encoder, head = encoder.cpu().eval(), head.cpu().eval()
    mapping = export_mapping(choices, task_encoder.output_kind, encoder.config.model_type)
    model = transformers_model(encoder, head, task_encoder, mapping) if mapping is not None else None
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
            "auto_class": mapping.auto_class.__name__ if mapping is not None else None,
            "task": spec.name, "task_type": spec.task_type, "output_kind": task_encoder.output_kind,
            "labels": label_names(task_encoder), "max_length": task_encoder.max_length,
            # the encoding and head choices: FinetuneSpec.from_metadata rebuilds them (ablations.run.predict)
            **choices.metadata(), "eval_batch_size": cfg.finetune.eval_batch_size,
            "fingerprint": provenance.fingerprint, "run_id": provenance.run_id,
            **dataset_metadata(spec, choices.encoding.tagging)}  # what predict needs of a user dataset
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


def export_run(ref: str, to: Path, tracking_uri: str, work_dir: Path) -> tuple[Path, dict[str, Any]]:
    """Copy the stored model of finished fine-tuning run `ref` to `to`; returns (to, its bioablate.json).
    An existing `to` is replaced only if it is empty or an earlier export of the same run, whose other files
    are kept (`_swap_in`). The run's tag `model_dir` is
    relative to `work_dir` (absolute in runs stored before that)."""
    run = find_finished_run(ref, tracking_uri)
    source = work_dir / run.data.tags.get("model_dir", "")
    if not run.data.tags.get("model_dir") or not (source / META_FILE).is_file():
        raise ConfigError(f"run {run.info.run_id} kept no model (keep_model=false, or it finished before runs "
                          "stored their best weights, or its work directory moved); rerun its `bioablate finetune` "
                          "command with --force to train and store one")
    to = to.expanduser().resolve()
    _check_destination(to, run.info.run_id)
    to.parent.mkdir(parents=True, exist_ok=True)
    # a folder of its own beside `to` (never a name a user's folder could have: `<to>.tmp` was one)
    tmp = Path(tempfile.mkdtemp(prefix=f".{to.name}.", suffix=".part", dir=to.parent))
    try:
        shutil.copytree(source, tmp, dirs_exist_ok=True)
        normalise_modes(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _swap_in(tmp, to)
    return to, json.loads((to / META_FILE).read_text())


def _check_destination(to: Path, run_id: str) -> None:
    """`to` is new, an empty folder, or an earlier export of run `run_id`: anything else is refused, so a
    user's folder or another run's model is never replaced."""
    if not to.exists():
        return
    if not to.is_dir():
        raise ConfigError(f"--to {to} is a file, not a folder; pick a new folder")
    if not any(to.iterdir()):
        return
    if not (to / META_FILE).is_file():
        raise ConfigError(f"--to {to} is a folder of other files, not an earlier export; pick a new or empty folder")
    try:
        earlier = json.loads((to / META_FILE).read_text()).get("run_id")
    except (ValueError, OSError, AttributeError):
        earlier = None
    if earlier != run_id:
        raise ConfigError(f"--to {to} holds the export of another run ({earlier or 'unreadable ' + META_FILE}), not "
                          f"of run {run_id}; pick a new folder, or remove that export first")


def _swap_in(tmp: Path, to: Path) -> None:
    """The finished export `tmp` in place of `to`, in one rename: an earlier export's own files are replaced,
    and every other entry of `to` (a user's notes, a script) is moved into the new folder first, never deleted."""
    if not to.exists():
        tmp.rename(to)
        return
    for entry in to.iterdir():
        if not (tmp / entry.name).exists():
            entry.rename(tmp / entry.name)
    old = Path(tempfile.mkdtemp(prefix=f".{to.name}.", suffix=".old", dir=to.parent))
    to.rename(old / to.name)
    tmp.rename(to)
    shutil.rmtree(old, ignore_errors=True)  # only the earlier export's own files


def export_command(ref: str, to: Path, work_dir: str | None, tracking_uri: str | None,
                   datasets: Sequence[str | Path] = ()) -> str:
    """`bioablate export`: export, and say what was written and how to use it. `datasets`: user dataset
    YAMLs, whose definition a model stored before models carried it gets (`carry_definition`)."""
    register_datasets(datasets)  # before anything is copied: a mistaken YAML is one line
    work = resolve_work_dir() if work_dir is None else Path(work_dir).expanduser().resolve()
    out, meta = export_run(ref, to, tracking_uri or resolve_tracking_uri(None, work), work)
    meta = carry_definition(out, meta)
    how = (f"transformers {meta['architecture']}" if meta["format"] == TRANSFORMERS
           else "encoder + bioablate head, see its README.md")
    return (f"{meta['task']} model of run {meta['run_id']} -> {out} ({how})\n"
            f"  bioablate predict --model {out} --input FILE")


# ------------------------------------------------------------- fine-tuning a fine-tuned model further

@dataclass(frozen=True)
class HeadInit:
    """Where a run's head started (its MLflow tag `head_init`, as JSON): carried over from the model folder's
    task (`carried_from`), or new, with `reason` saying why a fine-tuned folder's head did not fit ("" where
    the model had no head to carry)."""

    carried_from: str | None = None
    reason: str = ""

    def tag(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_tag(cls, text: str) -> HeadInit:
        """A run's tag back; a run recorded before the tag was JSON (free text) reads as a new head."""
        try:
            return cls(**json.loads(text))
        except (ValueError, TypeError):
            return cls()

    def describe(self, model: str) -> list[str]:
        """What `bioablate finetune` says about the head of a run on `model` (nothing for a plain new head)."""
        if self.carried_from is not None:
            return [f"  head: carried over from {self.carried_from} (the labels agree); encoder from {model}"]
        return [f"  head: {self.reason}: a new head on the encoder of {model}"] if self.reason else []


def carry_head(model_dir: Path, head: nn.Module, task_encoder: TaskEncoder, choices: FinetuneSpec) -> HeadInit:
    """Fine-tuning a model folder this module wrote (a finished run's `model/`, or its export): load its
    head into the freshly built `head` where the two tasks share a label space (same task type, task kind
    and labels) and the head is built alike (`HeadSpec.weight_choices`); otherwise the head stays as
    initialised. The encoder is loaded from the folder either way (`lightning_modules.models.load_encoder`)."""
    if not (model_dir / META_FILE).is_file():
        return HeadInit()
    meta = json.loads((model_dir / META_FILE).read_text())
    first = meta.get("task", "?")
    spec = task_encoder.spec
    if (meta.get("task_type"), meta.get("output_kind")) != (spec.task_type, task_encoder.output_kind):
        return HeadInit(reason=f"its head was trained on {first}, a {meta.get('task_type')} task")
    if meta.get("labels") != label_names(task_encoder):
        return HeadInit(reason=f"{first}'s labels {', '.join(meta.get('labels') or [])} are not {spec.name}'s")
    stored = FinetuneSpec.from_metadata(meta)
    built, was = choices.head.weight_choices(), stored.head.weight_choices()
    other = [key for key in built if was[key] != built[key]]
    if other:
        return HeadInit(reason=f"its head was built with finetune.{other[0]}={was[other[0]]}, this run's is "
                               f"{built[other[0]]}")
    head.load_state_dict(_exported_head_state(model_dir, meta, stored))
    return HeadInit(carried_from=first)


def _exported_head_state(model_dir: Path, meta: dict[str, Any], stored: FinetuneSpec) -> dict[str, torch.Tensor]:
    """The head's weights as `save_finetuned` wrote them: `head.safetensors`, or (format `transformers`)
    the transformers class's, mapped back as they were exported (`HeadMapping.head_state`)."""
    from safetensors.torch import load_file

    if meta["format"] != TRANSFORMERS:
        return load_file(str(model_dir / HEAD_FILE))
    model_type = json.loads((model_dir / "config.json").read_text())["model_type"]
    return export_mapping(stored, meta["output_kind"], model_type).head_state(
        load_file(str(model_dir / "model.safetensors")))


# ------------------------------------------------------------------ this layer's part of each task kind
# (datamodules/task_kinds.py): which transformers class holds a head, from its HeadSpec

def _plain(spec: HeadSpec) -> bool:
    """The output layer alone on the encoder's hidden states (no BiLSTM or other layer, no CRF)."""
    layers = HEADS.get(spec.head)
    return layers.layer is None and not layers.crf


LINEAR = {"out.weight": "classifier.weight", "out.bias": "classifier.bias"}


def _token_mapping(spec: HeadSpec, model_type: str) -> HeadMapping | None:
    """A linear tagger: dropout + linear over every token, as transformers' token classification."""
    return HeadMapping(AutoModelForTokenClassification, LINEAR) if _plain(spec) else None


def _sequence_mapping(spec: HeadSpec, model_type: str) -> HeadMapping | None:
    """A classifier on [CLS]: linear on BERT / ALBERT (through a linearised pooler), or `mlp` on ELECTRA
    (dense, GELU, dropout, linear: ELECTRA's own classification head)."""
    if not _plain(spec) or spec.re_feature != RE_FEATURES.default:  # the default feature is [CLS]
        return None
    if spec.classifier == "linear" and model_type in ("bert", "albert"):
        return HeadMapping(AutoModelForSequenceClassification, LINEAR, POOLER_EPS, scaled=("out.weight",))
    if spec.classifier == "mlp" and model_type == "electra":
        return HeadMapping(AutoModelForSequenceClassification, {
            "out.0.weight": "classifier.dense.weight", "out.0.bias": "classifier.dense.bias",
            "out.3.weight": "classifier.out_proj.weight", "out.3.bias": "classifier.out_proj.bias"})
    return None


def _no_class(spec: HeadSpec, model_type: str) -> None:
    """Extractive QA's answers come from bioablate's window merging, which transformers' QA classes lack."""
    return None


TASK_KINDS.attach("token", export=ExportPart(_token_mapping))
TASK_KINDS.attach("span", export=ExportPart(_no_class))
TASK_KINDS.attach("classification", export=ExportPart(_sequence_mapping, "single_label_classification"))
TASK_KINDS.attach("multilabel", export=ExportPart(_sequence_mapping, "multi_label_classification"))
TASK_KINDS.attach("regression", export=ExportPart(_sequence_mapping, "regression"))
TASK_KINDS.attach("ranking", export=ExportPart(_sequence_mapping, "single_label_classification"))

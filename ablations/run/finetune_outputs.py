"""What a tested fine-tuning run leaves in its MLflow run besides its scores (ablations/run/finetune.py calls
these): the tokenizer's fit to the text, the test split's floor and whether the model beat it, the config,
the predictions, the scores' details and the figures. Nothing here runs in a DDP worker (rank 0 reports)."""

from __future__ import annotations

import json
import logging

from omegaconf import DictConfig

from ablations.run.cards import shareable_config
from ablations.run.dashboard import write_details
from ablations.run.figures import log_run_figures
from ablations.run.lifecycle import TrackedRun
from datamodules.finetune_data import FinetuneDataModule
from datamodules.floors import COLLAPSED, LEARNED, collapsed, floor_of, histogram, learning_state
from lightning_modules.finetune import FineTuneModule

log = logging.getLogger("bioablate")
FLOOR_KEY, STATE_TAG = "floor", "test_state"  # metric test/floor, tag test_state (with test_floor_kind)
UNK_WARNING = 0.3  # a share of [UNK] input tokens above which the tokenizer does not fit the text


def log_outputs(run: TrackedRun, cfg: DictConfig, datamodule: FinetuneDataModule, module: FineTuneModule,
                best_epoch: int, title: str) -> tuple[float, str]:
    """The artifacts of the tested run (`best_epoch`: the tested one; `title`: the figures') and its floor;
    returns (the floor's score, the learning state)."""
    _log_artifacts(run, cfg, datamodule, module, best_epoch, title)
    return _log_floor(run, datamodule, module)


def unknown_tokens(datamodule: FinetuneDataModule) -> dict[str, str]:
    """The share of the training inputs the tokenizer could not split into its vocabulary (tag `unk_rate`),
    and a warning where it is large: a tokenizer of another model fine-tunes on [UNK]s without complaint."""
    unk = datamodule.tokenizer.unk_token_id
    if unk is None:  # byte-level tokenizers have no unknown token
        return {}
    rate = datamodule.features["train"].token_share(unk)
    if rate > UNK_WARNING:
        log.warning("%.0f%% of the training input tokens of %s are [UNK]: the tokenizer does not fit this text "
                    "(the vocabulary of another model?); the run goes on", 100 * rate, datamodule.spec.name)
    return {"unk_rate": f"{rate:.4f}"}


def _log_floor(run: TrackedRun, datamodule: FinetuneDataModule, module: FineTuneModule) -> tuple[float, str]:
    """The test split's best trivial baseline and whether the model beat it (datamodules.floors), as metric
    test/floor and tags test_state, test_floor_kind and test_prediction_histogram; a warning where it did not.
    A failure to learn is a result to report, so the run still finishes."""
    encoder, predictions, score = datamodule.encoder, module.test_predictions, module.test_metrics["score"]
    floor = floor_of(encoder, datamodule.instances["test"])
    state = learning_state(score, floor, collapsed(encoder, predictions))
    run.log_metrics({f"test/{FLOOR_KEY}": floor.score})
    run.set_tags({STATE_TAG: state, "test_floor_kind": floor.kind,
                  "test_prediction_histogram": json.dumps(histogram(encoder, predictions))})
    if state != LEARNED:
        what = "one prediction for nearly every test instance" if state == COLLAPSED else "not above the floor"
        log.warning("%s did not learn (%s): %s, test score %.4f against %.4f for '%s'; train on more examples or "
                    "epochs", datamodule.spec.name, state, what, score, floor.score, floor.kind)
    return floor.score, state


def _log_artifacts(run: TrackedRun, cfg: DictConfig, datamodule: FinetuneDataModule, module: FineTuneModule,
                   best_epoch: int, title: str) -> None:
    """The resolved config (its machine-local keys as `<local>`), the test predictions, the scores' details
    (`ablations.run.dashboard`) and the run's figures (`ablations.run.figures`)."""
    out = run.run_dir / "artifacts"
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(shareable_config(cfg))
    encoder, test, golds, predicted = datamodule.encoder, datamodule.instances["test"], [], []
    with open(out / "test_predictions.jsonl", "w") as f:
        for instance, prediction in zip(test, module.test_predictions):
            golds.append(encoder.to_json(encoder.gold(instance)))
            predicted.append(encoder.to_json(prediction))
            group = {"group": getattr(instance, encoder.group_by)} if encoder.group_by else {}  # what it is scored with
            f.write(json.dumps({"id": instance.id, "gold": golds[-1], "prediction": predicted[-1], **group}) + "\n")
    artifacts = [out / "config.yaml", out / "test_predictions.jsonl"]
    questions = encoder.question_records(test, module.test_predictions)
    if questions:  # extractive QA: each question's top answers over its contexts, as it was scored
        (out / "test_answers.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
        artifacts.append(out / "test_answers.jsonl")
    run.log_artifacts(artifacts)
    run.log_artifacts(write_details(out / "metrics", module.dev_history, best_epoch, module.test_metrics), "metrics")
    if cfg.figures:
        log_run_figures(run, out / "figures", len(module.dev_history), best_epoch, title, datamodule.spec,
                        (golds, predicted, encoder))

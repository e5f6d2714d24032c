"""A dataset's splits, once read, checked for what would make its score meaningless, before a run exists.

    splits = read_checked(spec, data_dir)   # what a runner calls before its run exists: read, refuse or warn
    warnings = check_splits(spec, splits, data_dir)   # the check alone: raises, or returns the warning lines
    warn_once(warnings)                               # each line once per process (an experiment's seeds)

Refused (one line naming the dataset and, for a user dataset, its YAML file):
- a split the run needs is empty (train, test; dev unless `dev: none`);
- a dev or test split whose every example repeats a training one (`files: {test: train.txt}`);
- `folds: {k: K}` over fewer groups than K (examples; a relation's sentences, an extractive question's
  snippets stay together): some folds would test on nothing;
- extractive QA whose training split has no located answer (the model could only learn "no span"), or
  whose test split has no gold answer at all (EM / F1 0 whatever the model predicts); likewise a tagged
  dataset (ner, pico) without a gold mention in train or in test, and a relation or class F1 whose test split
  has no positive gold example (every pair the negative class, none the positive one);
- a similarity test split whose gold scores are all equal (Pearson's correlation is undefined).

Warned (`overlap_warning`): a later split repeating an earlier one: examples of the same id (an extractive
question: the same question id) or the same input (the same text; a relation's text and entity pair; a
question with the same context). Scores on repeated examples measure memory, not generalisation; BLURB's
own splits have a few (docs/data.md, "Overlaps between splits"), so it is a warning, not an error.
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Hashable, Sequence
from pathlib import Path

import numpy as np

from bioablate_core.errors import BioablateError, ConfigError
from datamodules.instances import Instance, PairInstance, QAInstance, RelationInstance, TaggingInstance, TextInstance
from datamodules.protocols import KFolds
from datamodules.spec import SPLITS, DatasetSpec, Splits
from datamodules.task_types import TASK_TYPES

log = logging.getLogger("bioablate")

# (earlier, later): the later split's examples found in the earlier one
SPLIT_PAIRS = (("train", "dev"), ("train", "test"), ("dev", "test"))
_WARNED: set[str] = set()  # warnings already shown in this process
_CHECKED: dict[tuple[str, str], list[str]] = {}  # (dataset, content fingerprint) -> its warnings, this process


def check_splits(spec: DatasetSpec, splits: Splits, data_dir: Path | None) -> list[str]:
    """Raise for splits that cannot give a meaningful score (see the module doc); the warnings, one line
    each, otherwise. The checks read each split's `SplitSummary`, not its instances."""
    where = f" (see {spec.source})" if spec.source else ""
    _check_fold_count(spec, splits, where)
    for split in SPLITS:  # the words of FinetuneDataModule.setup, which meets it after a run exists
        if not splits.get(split) and not (split == "dev" and spec.no_dev):
            raise BioablateError(_empty_split(spec, splits, split, data_dir, where))
    summaries = {split: summary_of(splits.get(split) or []) for split in SPLITS}
    if TASK_TYPES.of(spec.task_type).spans:
        if not summaries["train"].any_answer_spans:
            raise BioablateError(f"dataset '{spec.name}': no training question has an answer located in its "
                                 f"context{where}; the model could only learn that there is none")
        if not summaries["test"].any_answers:
            raise BioablateError(f"dataset '{spec.name}': no test question has a gold answer{where}; exact match "
                                 "and F1 would be 0 whatever the model predicts")
    _check_gold(spec, summaries, where)
    for later, earlier in (("dev", ["train"]), ("test", ["train", "dev"])):  # `files: {test: train.txt}`, a copy
        seen = np.concatenate([summaries[split].inputs for split in earlier])  # (dev may be carved from the file)
        count = summaries[later].count
        if count and int(np.isin(summaries[later].inputs, seen).sum()) == count:
            raise BioablateError(f"dataset '{spec.name}': every {later} example repeats a training example (the "
                                 f"training file as {later}?){where}; a score on what the model trained on measures "
                                 f"memory, not generalisation: give a {later} file of other examples")
    warning = overlap_warning(spec.name, summaries)
    return [warning] if warning else []


def warn_once(warnings: list[str]) -> None:
    for warning in warnings:
        if warning not in _WARNED:
            _WARNED.add(warning)
            log.warning("%s", warning)


def _empty_split(spec: DatasetSpec, splits: Splits, split: str, data_dir: Path | None, where: str) -> str:
    """Why `split` came out empty, in the words that say what to change: a carved dev that took all of train
    or none of it, a file that was read but gave no example (extractive QA: no snippet with an answer)."""
    carved = spec.carve_dev
    if carved is not None and split in ("train", "dev"):
        train, dev = len(splits.get("train", [])), len(splits.get("dev", []))
        if split == "train" and dev:
            return (f"dataset '{spec.name}': dev.fraction {carved.fraction:g} took every one of its {dev} training "
                    f"examples for dev, leaving none to train on{where}; lower dev.fraction")
        if split == "dev" and train:
            return (f"dataset '{spec.name}': dev.fraction {carved.fraction:g} carves no dev example from its "
                    f"{train} training examples{where}; raise dev.fraction, or set dev: none")
    if spec.definition and not spec.missing_files(data_dir):  # a user dataset whose files are all there
        extra = " (extractive QA: a training snippet counts where its answer is located in it)" \
            if TASK_TYPES.of(spec.task_type).spans and split == "train" else ""
        return f"dataset '{spec.name}': its {split} file gives no example{extra}{where}"
    return f"dataset '{spec.name}' has no {split} split in {spec.base_dir(data_dir)}{where}; see docs/data.md"


def _check_gold(spec: DatasetSpec, summaries: dict[str, SplitSummary], where: str) -> None:
    """Gold answers a score can be computed from: a tagged dataset with mentions to learn and to find, a
    similarity test set whose gold scores vary (Pearson's correlation with a constant is undefined)."""
    entry = TASK_TYPES.of(spec.task_type)
    if entry.tagged:
        for split, consequence in (("train", "the model could only learn that there is none"),
                                   ("test", "F1 would be 0 whatever the model predicts")):
            if not summaries[split].any_spans:
                raise BioablateError(f"dataset '{spec.name}': no {split} sentence has a gold mention{where}; "
                                     f"{consequence}")
    _check_positive_gold(spec, summaries["test"], where)
    if entry.scored:
        golds = set(summaries["test"].values)
        if len(golds) == 1:
            raise BioablateError(f"dataset '{spec.name}': every test pair has the same gold score ({golds.pop()})"
                                 f"{where}; a correlation with a constant is undefined: give a test set whose "
                                 "scores vary")


def _check_positive_gold(spec: DatasetSpec, test: SplitSummary, where: str) -> None:
    """An F1 of positive classes needs a positive gold example in test: with none, precision and recall have
    no denominator and the score printed 0.0000 as if it were a result."""
    args = spec.metric_args
    if spec.metric == "relation_micro_f1":
        positive, which = (lambda label: label != args["negative"]), f"every one is '{args['negative']}'"
    elif spec.metric == "positive_class_f1":
        positive, which = (lambda label: label == args["positive"]), f"none is '{args['positive']}'"
    else:
        return
    if not any(positive(label) for label in test.gold_labels):
        unit = "pair" if TASK_TYPES.of(spec.task_type).relation else "example"
        raise BioablateError(f"dataset '{spec.name}': no test {unit} has a positive gold label ({which}){where}; "
                             "F1 is undefined there, and would be 0 whatever the model predicts")


def _gold_labels(instance: Instance) -> tuple[str, ...]:
    label = getattr(instance, "label", None)
    return (label,) if isinstance(label, str) else tuple(getattr(instance, "labels", ()))


def _check_fold_count(spec: DatasetSpec, splits: Splits, where: str) -> None:
    folds = spec.folds
    if not isinstance(folds, KFolds):
        return
    pool = [x for split in SPLITS for x in splits.get(split, [])]
    groups = len({getattr(x, folds.group_by) if folds.group_by else position for position, x in enumerate(pool)})
    if groups < folds.count:
        unit = "examples" if folds.group_by is None else f"groups of equal {folds.group_by}"
        raise ConfigError(f"folds.k = {folds.count} for dataset '{spec.name}', but its file holds {groups} {unit}"
                          f"{where}: some folds would test on nothing; set folds.k to at most {groups}")


def input_key(instance: Instance) -> Hashable:
    """What the model reads of an instance (two instances with equal keys are the same example)."""
    if isinstance(instance, TaggingInstance):
        return instance.tokens
    if isinstance(instance, RelationInstance):
        return instance.text, instance.head, instance.tail
    if isinstance(instance, QAInstance):
        return instance.question, instance.context
    if isinstance(instance, PairInstance):
        return instance.text_a, instance.text_b
    if isinstance(instance, TextInstance):
        return instance.text
    raise TypeError(f"no input key for {type(instance).__name__}")


def example_id(instance: Instance) -> str:
    """An instance's id as overlap counts it: an extractive question's snippets share its question id."""
    return getattr(instance, "question_id", None) or instance.id


class SplitSummary:
    """What the whole-split checks read of a split, gathered one instance at a time (`add`), so that a
    reader that streams a large file keeps this instead of the instances: the count, a 64-bit hash of each
    example's id and input (`example_id`, `input_key`; equal hashes are taken as equal, a collision among
    a million examples has odds of about 1 in 10^7), whether any gold mention or answer is there, and the
    gold labels."""

    def __init__(self) -> None:
        self.count = 0
        self._ids, self._inputs = array("q"), array("q")
        self.any_spans = self.any_answer_spans = self.any_answers = False
        self.span_types: set[str] = set()  # the types of the gold mentions (a tagged split)
        self.gold_labels: set[str] = set()  # every class label (`_gold_labels`)
        self.values: set = set()  # every `label` value (similarity: the gold scores)

    def add(self, instance: Instance) -> None:
        self.count += 1
        self._ids.append(hash(example_id(instance)))
        self._inputs.append(hash(input_key(instance)))
        spans = getattr(instance, "spans", ())
        if spans:
            self.any_spans = True
            self.span_types.update(span.label for span in spans)
        self.any_answer_spans = self.any_answer_spans or bool(getattr(instance, "answer_spans", ()))
        self.any_answers = self.any_answers or bool(getattr(instance, "answers", ()))
        self.gold_labels.update(_gold_labels(instance))
        if hasattr(instance, "label"):
            self.values.add(instance.label)

    @property
    def ids(self) -> np.ndarray:
        return np.frombuffer(self._ids, dtype=np.int64) if self.count else np.zeros(0, dtype=np.int64)

    @property
    def inputs(self) -> np.ndarray:
        return np.frombuffer(self._inputs, dtype=np.int64) if self.count else np.zeros(0, dtype=np.int64)


def summary_of(instances: Sequence[Instance]) -> SplitSummary:
    """The split's summary: the one its reader kept (a streamed split's `summary`), else gathered now."""
    kept = getattr(instances, "summary", None)
    if kept is not None:
        return kept
    summary = SplitSummary()
    for instance in instances:
        summary.add(instance)
    return summary


def overlaps(earlier: Sequence[Instance] | SplitSummary, later: Sequence[Instance] | SplitSummary) -> tuple[int, int]:
    """(same id, same input): how many of `later`'s instances repeat one of `earlier`'s by id, by input."""
    earlier, later = (x if isinstance(x, SplitSummary) else summary_of(x) for x in (earlier, later))
    return int(np.isin(later.ids, earlier.ids).sum()), int(np.isin(later.inputs, earlier.inputs).sum())


def overlap_warning(name: str, splits: Splits | dict[str, SplitSummary]) -> str | None:
    """One line counting the examples each split repeats from an earlier one, or None where none does."""
    summaries = {split: x if isinstance(x, SplitSummary) else summary_of(x) for split, x in splits.items()}
    parts = []
    for earlier, later in SPLIT_PAIRS:
        if earlier in summaries and later in summaries and summaries[earlier].count and summaries[later].count:
            same_id, same_input = overlaps(summaries[earlier], summaries[later])
            if same_id or same_input:
                parts.append(f"{later} repeats {earlier}: {same_input} of {summaries[later].count} by input, "
                             f"{same_id} by id")
    if not parts:
        return None
    return (f"{name}: {'; '.join(parts)}; scores on repeated examples measure memory, not generalisation "
            "(docs/data.md, 'Overlaps between splits')")


def read_checked(spec: DatasetSpec, data_dir: Path | None, warn: bool = True) -> Splits:
    """The dataset's splits, read and checked (`check_splits`; the warnings shown once, with `warn`): what
    a runner calls before its run exists, so that a data error leaves no FAILED run behind. Reading again
    later (the datamodule) is served from `DatasetSpec.read`'s cache, and checking again (an experiment's
    other runs on the dataset) from this module's: the same content passes or fails the same way."""
    splits = spec.read(data_dir)
    key = (spec.name, spec.fingerprint(data_dir))  # DatasetSpec.read's own key: the same content, checked once
    warnings = _CHECKED.get(key)
    if warnings is None:
        warnings = _CHECKED[key] = check_splits(spec, splits, data_dir)
    if warn:
        warn_once(warnings)
    return splits

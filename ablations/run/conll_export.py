"""`bioablate predictions RUN --format conll`: a tagging run's test predictions as a CoNLL file that
conlleval (or seqeval) scores, one `token gold pred` line per word and a blank line between sentences.

The run's `test_predictions.jsonl` holds each tested sentence's gold and predicted mentions as word spans,
in the order the run tested them; the words are read from the dataset's test split, and the sentences are
written in the split's order (those the run tested: all of them unless `finetune.max_eval_examples` capped
the split). The tags are IOB2 whatever scheme the files ship in or the run trained with: each mention's
first word B-, the others I-. conlleval reads IOB2 mentions as bioablate decodes them, so its F1 on the file
is the run's test F1. (Its `E-` means IOE's and it knows no `S-`: IOBES, BIOES or BILOU tags would not
score alike, so they are written as IOB2.)
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from ablations.places import resolve_data_dir, resolve_tracking_uri, resolve_work_dir
from ablations.run.export import find_finished_run
from ablations.run.exported_dataset import register_datasets
from bioablate_core.errors import ConfigError
from bioablate_core.files import write_text_atomic
from datamodules.instances import TaggingInstance
from datamodules.registry import DATASETS, get_dataset
from datamodules.task_types import TASK_TYPES

FORMATS = ("conll",)
PREDICTIONS = "test_predictions.jsonl"


@dataclass(frozen=True)
class Written:
    """What `predictions_file` wrote: sentences and words, and where (None: stdout)."""

    run_id: str
    task: str
    sentences: int
    words: int
    output: Path | None

    def line(self) -> str:
        where = self.output if self.output is not None else "stdout"
        return (f"{self.task} test predictions of run {self.run_id}: {self.sentences} sentences, {self.words} "
                f"words -> {where} (token gold pred, IOB2 tags)")


def iob2(spans: Sequence[Sequence], length: int) -> list[str]:
    """The IOB2 tags of `length` words holding word spans [start, end, label] (end exclusive)."""
    tags = ["O"] * length
    for start, end, label in spans:
        if not 0 <= start < end <= length:
            raise ValueError(f"span [{start}, {end}) outside a sentence of {length} words")
        tags[start:end] = [f"B-{label}"] + [f"I-{label}"] * (end - start - 1)
    return tags


def conll_text(tests: Sequence[TaggingInstance], records: Sequence[dict]) -> tuple[str, int, int]:
    """The CoNLL text of the `records` (test_predictions.jsonl lines) over the test split `tests`, in the
    split's order; returns (text, sentences, words)."""
    by_id = {str(r["id"]): r for r in records}
    known = {str(x.id) for x in tests}
    unknown = [rid for rid in by_id if rid not in known]
    if unknown:
        raise ConfigError(f"{len(unknown)} predicted sentences (e.g. id {unknown[0]!r}) are not in the dataset's "
                          "test split as it reads now: the data changed since the run; point --data-dir / "
                          "--datasets at the data it ran on")
    blocks, words = [], 0
    for instance in tests:
        record = by_id.get(str(instance.id))
        if record is None:
            continue
        tokens = list(instance.tokens)
        try:
            gold, pred = iob2(record["gold"], len(tokens)), iob2(record["prediction"], len(tokens))
        except ValueError as error:
            raise ConfigError(f"sentence {instance.id!r}: {error}: the data changed since the run") from None
        blocks.append("".join(f"{t} {g} {p}\n" for t, g, p in zip(tokens, gold, pred)))
        words += len(tokens)
    return "\n".join(blocks), len(blocks), words


def _records(client: MlflowClient, run_id: str) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = Path(client.download_artifacts(run_id, PREDICTIONS, tmp))
        except (MlflowException, OSError):
            raise ConfigError(f"run {run_id} has no {PREDICTIONS} artifact (its artifacts were removed, or "
                              "its work directory moved)") from None
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def predictions_file(ref: str, fmt: str, output: Path | None, work_dir: str | None = None,
                     tracking_uri: str | None = None, data_dir: str | None = None,
                     datasets: Sequence[str | Path] = ()) -> Written:
    """`bioablate predictions`: finished fine-tuning run `ref` (its MLflow run id or fingerprint, as
    `export` takes) as a `fmt` file at `output` (None: stdout). `data_dir` holds the staged datasets;
    `datasets`: user dataset YAMLs to register (the run's own, for a run on one)."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt}: unknown; known: {', '.join(FORMATS)}")
    if output is not None and output.is_dir():
        raise ConfigError(f"--output {output} is a folder; name the file to write, e.g. {output / 'test.conll'}")
    register_datasets(datasets)
    work = resolve_work_dir() if work_dir is None else Path(work_dir).expanduser().resolve()
    uri = tracking_uri or resolve_tracking_uri(None, work)
    run = find_finished_run(ref, uri)
    task = run.data.tags.get("task", "")
    if task.split("@", 1)[0] not in DATASETS:  # (a user dataset's fold: my-re@fold3)
        raise ConfigError(f"run {run.info.run_id} is on '{task}', a dataset this install does not know; pass "
                          "--datasets YAML, the dataset file it ran on")
    spec = get_dataset(task)
    if not TASK_TYPES.of(spec.task_type).tagged:
        raise ConfigError(f"run {run.info.run_id} is on {task}, a {spec.task_type} task: --format conll writes "
                          "tagged words (ner, pico); its test_predictions.jsonl artifact holds the predictions")
    tests = spec.read(resolve_data_dir(data_dir) if spec.root is None else None)["test"]
    text, sentences, words = conll_text(tests, _records(MlflowClient(uri), run.info.run_id))
    if output is None:
        sys.stdout.write(text)
    else:
        write_text_atomic(output, text)
    return Written(run.info.run_id, task, sentences, words, output)

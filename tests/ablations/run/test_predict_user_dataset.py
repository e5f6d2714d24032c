"""A model fine-tuned on a user dataset (a dataset YAML made here from BC5CDR-chem's staged files, its tags
rewritten in IOBES) carries the dataset's definition: exported, it predicts with `bioablate predict` and no
other flag in a fresh process, exactly what the run predicted. And `bioablate predictions RUN --format
conll` writes the run's test predictions as `token gold pred` lines that conlleval's rules score at the
run's logged test F1, precision and recall."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ablations.cli import main
from ablations.config import build_config
from ablations.run.finetune import run_finetune
from datamodules.registry import get_dataset
from tests.conftest import REPO_ROOT
from tests.user_data import _sentences, write

# enough steps for the micro model to tag some chemicals, so the scores compared are not all zero; no test
# sentence cut at max_length (predict tags a longer one window by window, all of it)
FINETUNE = ["finetune.max_train_examples=300", "finetune.max_eval_examples=60", "finetune.epochs=6",
            "finetune.lr=3e-3", "finetune.tagging=bioul", "finetune.max_length=256", "trainer.progress_bar=false"]
SIZES = {"train": 300, "devel": 60, "test": 60}  # sentences of each staged file


def _iobes(tags: list[str]) -> list[str]:
    """IOB2 tags in IOBES: a one-word mention S-, a longer one's last word E-."""
    out = []
    for i, tag in enumerate(tags):
        continues = i + 1 < len(tags) and tags[i + 1].startswith("I-")
        if tag.startswith("B-"):
            out.append(tag if continues else "S-" + tag[2:])
        elif tag.startswith("I-"):
            out.append(tag if continues else "E-" + tag[2:])
        else:
            out.append(tag)
    return out


def _user_dataset(data_dir: Path, folder: Path) -> Path:
    for split, n in SIZES.items():
        blocks = []
        for sentence in _sentences(data_dir / "BC5CDR-chem-IOB" / f"{split}.tsv")[:n]:
            tokens, tags = [t for t, _ in sentence], _iobes([tag for _, tag in sentence])
            blocks.append("".join(f"{t}\t{tag}\n" for t, tag in zip(tokens, tags)))
        write(folder / "data" / f"{split}.tsv", "\n".join(blocks))
    return write(folder / "my-chem.yaml", "name: my-chem\nformat: conll\npath: data\ntagging: iobes\n"
                 "files: {train: train.tsv, dev: devel.tsv, test: test.tsv}\nlabels: [Chemical]\n")


@pytest.fixture(scope="module")
def run(tmp_path_factory, data_dir: Path):
    """A finished micro run on the IOBES user dataset, and its work directory. The dataset is unregistered
    after the module: the per-test cleanup (conftest) sees it registered before its test began."""
    from datamodules.registry import DATASETS

    folder = tmp_path_factory.mktemp("user-dataset")
    dataset = _user_dataset(data_dir, folder)
    cfg = build_config("micro", FINETUNE, task="my-chem", datasets=[str(dataset)], data_dir=str(data_dir),
                       work_dir=str(folder / "work"))
    yield run_finetune(cfg), folder
    DATASETS.unregister("my-chem")


def _fresh_cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """`bioablate ARGV` in a new process, where no dataset YAML was registered."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-m", "ablations.cli", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def _test_predictions(result, work: Path) -> list[dict]:
    uri = f"sqlite:///{work}/mlruns.db"
    path = MlflowClient(uri).download_artifacts(result.run_id, "test_predictions.jsonl", str(work / "dl"))
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


@pytest.mark.slow
def test_a_model_exported_from_a_dataset_yaml_predicts_with_no_other_flag(run, data_dir: Path):
    result, folder = run
    work, model = folder / "work", folder / "model"
    assert main(["export", result.run_id, "--to", str(model), "--work-dir", str(work)]) == 0
    meta = json.loads((model / "bioablate.json").read_text())
    assert meta["dataset"]["labels"] == ["Chemical"] and meta["dataset"]["task_type"] == "ner"
    assert meta["tagging"] == "bioul" and meta["scheme"].startswith("IOBES")  # the config value stays
    assert str(folder) not in (model / "bioablate.json").read_text()  # no machine path
    tested = _test_predictions(result, work)
    tokens = {str(x.id): list(x.tokens) for x in get_dataset("my-chem").read(None)["test"]}
    inputs = write(folder / "in.jsonl", "".join(json.dumps({"id": r["id"], "tokens": tokens[str(r["id"])]}) + "\n"
                                                for r in tested))
    done = _fresh_cli("predict", "--model", str(model), "--input", str(inputs), "--output",
                      str(folder / "out.jsonl"), cwd=folder)
    assert done.returncode == 0, done.stderr
    predicted = {r["id"]: r["prediction"] for r in map(json.loads, (folder / "out.jsonl").read_text().splitlines())}
    assert {str(r["id"]): r["prediction"] for r in tested} == predicted
    assert any(predicted.values())  # the model tags some chemicals: the comparison is not of empty lists


# ------------------------------------------------------------------------------------- CoNLL export

def _split(tag: str) -> tuple[str, str]:
    return ("O", "") if tag == "O" else (tag[0], tag[2:])


def _ends(prev: str, tag: str, prev_type: str, type_: str) -> bool:
    """conlleval's endOfChunk: whether a chunk ended at the previous word."""
    return (prev, tag) in {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"), ("E", "E"), ("E", "I"), ("E", "O")} \
        or (prev not in ("O", ".") and prev_type != type_)


def _starts(prev: str, tag: str, prev_type: str, type_: str) -> bool:
    """conlleval's startOfChunk: whether a chunk starts at this word."""
    return (prev, tag) in {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"), ("E", "E"), ("E", "I"), ("O", "E")} \
        or (tag not in ("O", ".") and prev_type != type_)


def conlleval(text: str) -> tuple[float, float, float, int]:
    """(precision, recall, F1, gold chunks) of `token gold pred` lines, by conlleval's rules (its perl
    script, transcribed: a blank line is a boundary, read as an O/O word)."""
    correct = found_gold = found_pred = 0
    in_correct = False
    last_g, last_gt, last_p, last_pt = "O", "", "O", ""
    for line in [*text.splitlines(), ""]:
        fields = line.split()
        gold, pred = (fields[-2], fields[-1]) if fields else ("O", "O")
        (g, gt), (p, pt) = _split(gold), _split(pred)
        if in_correct:
            gold_ends, pred_ends = _ends(last_g, g, last_gt, gt), _ends(last_p, p, last_pt, pt)
            if gold_ends and pred_ends and last_gt == last_pt:
                in_correct, correct = False, correct + 1
            elif gold_ends != pred_ends or gt != pt:
                in_correct = False
        gold_starts, pred_starts = _starts(last_g, g, last_gt, gt), _starts(last_p, p, last_pt, pt)
        if gold_starts and pred_starts and gt == pt:
            in_correct = True
        found_gold += gold_starts
        found_pred += pred_starts
        last_g, last_gt, last_p, last_pt = g, gt, p, pt
    correct += in_correct
    precision = correct / found_pred if found_pred else 0.0
    recall = correct / found_gold if found_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1, found_gold


def test_the_conlleval_transcription_reads_iobes_as_conlleval_does():
    """Its rules, checked on tags whose reading is known: IOB2 mentions as meant; IOBES' two one-word
    mentions side by side (`S-X S-X`) are one chunk to conlleval, which knows no `S-`: why the export is IOB2."""
    assert conlleval("a B-X B-X\nb I-X I-X\nc O B-Y\n\nd B-X O\n")[:3] == (0.5, 0.5, 0.5)
    assert conlleval("a S-X S-X\nb S-X S-X\n")[3] == 1
    assert conlleval("a B-X B-X\nb B-X B-X\n")[3] == 2


@pytest.mark.slow
def test_the_conll_export_scored_by_conlleval_gives_the_runs_f1(run, tmp_path: Path):
    result, folder = run
    out = tmp_path / "test.conll"
    done = _fresh_cli("predictions", result.fingerprint, "--format", "conll", "--output", str(out),
                      "--datasets", str(folder / "my-chem.yaml"), "--work-dir", str(folder / "work"), cwd=folder)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    tested = _test_predictions(result, folder / "work")
    sentences = text.split("\n\n")
    assert len(sentences) == len(tested)
    staged = [s for s in (folder / "data" / "test.tsv").read_text().split("\n\n") if s.strip()]
    tested_ids = {str(r["id"]) for r in tested}
    order = [str(x.id) for x in get_dataset("my-chem").read(None)["test"] if str(x.id) in tested_ids]
    ids = [str(x.id) for x in get_dataset("my-chem").read(None)["test"]]
    for sentence, rid in zip(sentences, order):  # the dataset's order, its words, gold tags in IOB2
        lines = [line.split(" ") for line in sentence.strip("\n").split("\n")]
        words = [line.split("\t") for line in staged[ids.index(rid)].strip("\n").split("\n")]
        assert [t for t, _, _ in lines] == [w for w, _ in words]
        assert [g for _, g, _ in lines] == [t.replace("S-", "B-").replace("E-", "I-") for _, t in words]
    precision, recall, f1, gold_chunks = conlleval(text)
    assert gold_chunks == sum(len(r["gold"]) for r in tested) > 0
    assert f1 > 0  # the run found some chemicals: not 0 = 0
    assert (precision, recall, f1) == pytest.approx((result.test["precision"], result.test["recall"],
                                                     result.test["score"]), abs=1e-9)  # score: entity F1

"""Data that cannot give a meaningful score, or that the readers cannot take, refused by `bioablate
finetune` as one line with exit 2 and no run in the tracking store (datamodules/split_checks.py, the
readers): each case is a user dataset written from the staged data with one thing wrong. The overlap
warning counts the repeats of a hand-built pair of splits."""

from __future__ import annotations

import copy
import json
import logging
import re
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from datamodules.custom import register_from_yaml
from datamodules.instances import TextInstance
from datamodules.readers.squad import read_squad_file
from datamodules.split_checks import overlap_warning, read_checked
from tests.cli import bioablate_in_process
from tests.user_data import GAD_RE, gad_lines, write

GOLDEN = "BioASQ/golden/{}_golden.json"
SQUAD = "BioELECTRA/bioasq/dev.json"


def golden(data_dir: Path, name: str) -> dict:
    return json.loads((data_dir / GOLDEN.format(name)).read_text())


def squad(data_dir: Path, articles: int = 3) -> dict:
    data = json.loads((data_dir / SQUAD).read_text())
    return {"data": data["data"][:articles]}


def factoids(questions: dict) -> list[dict]:
    return [q for q in questions["questions"] if q["type"] == "factoid"]


def qa_dataset(folder: Path, fmt: str, train: dict, test: dict) -> str:
    write(folder / "train.json", json.dumps(train))
    write(folder / "test.json", json.dumps(test))
    return f"format: {fmt}\nfiles: {{train: train.json, test: test.json}}\ndev: none\nmax_length: 64\n"


def duplicate_golden_id(data_dir: Path, folder: Path, split: str) -> tuple[str, str]:
    files = {"train": golden(data_dir, "5B1"), "test": golden(data_dir, "6B1")}
    first, second = factoids(files[split])[:2]
    second["id"] = first["id"]  # two questions, one id: they merged into one, the other vanished
    return qa_dataset(folder, "bioasq-golden", files["train"], files["test"]), f"id '{first['id']}' occurs twice"


def negative_answer_start(data_dir: Path, folder: Path) -> tuple[str, str]:
    train = squad(data_dir)
    paragraph = train["data"][0]["paragraphs"][0]
    context = paragraph["context"]
    # the context's first words at a negative offset: the slice check alone read them as found
    paragraph["qas"][0]["answers"] = [{"text": context[:12], "answer_start": -len(context)}]
    return qa_dataset(folder, "squad", train, squad(data_dir)), f"answer_start {-len(context)} is outside its context"


def no_questions(data_dir: Path, folder: Path) -> tuple[str, str]:
    return qa_dataset(folder, "squad", {"data": []}, squad(data_dir)), "train.json: holds no questions"


def without_answers(document: dict) -> dict:
    document = copy.deepcopy(document)
    for article in document["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["answers"] = []
    return document


def train_without_answers(data_dir: Path, folder: Path) -> tuple[str, str]:
    return (qa_dataset(folder, "squad", without_answers(squad(data_dir)), squad(data_dir)),
            "no training question has an answer located in its context")


def gold_without_answers(data_dir: Path, folder: Path) -> tuple[str, str]:
    return (qa_dataset(folder, "squad", squad(data_dir), without_answers(squad(data_dir))),
            "no test question has a gold answer")


def too_many_folds(data_dir: Path, folder: Path) -> tuple[str, str]:
    write(folder / "all.tsv", "\n".join(gad_lines(data_dir, 0, 40)) + "\n")
    return (GAD_RE + "folds: {k: 99, file: all.tsv}\ndev: none\n",
            "folds.k = 99 for dataset 'folds-k-above-the-data', but its file holds 40 groups of equal text")


def same_train_and_test(data_dir: Path, folder: Path) -> tuple[str, str]:
    write(folder / "train.tsv", "\n".join(gad_lines(data_dir, 0, 40)) + "\n")
    return (GAD_RE + "files: {train: train.tsv, test: train.tsv}\n",
            "every test example repeats a training example (the training file as test?)")


def biosses_pairs(data_dir: Path, start: int, stop: int) -> list[dict]:
    """BIOSSES's sentence pairs start..stop with their mean score, as similarity JSONL records."""
    rows = [line.split("\t") for line in (data_dir / "BIOSSES" / "annotation_pairs_scores.tsv").read_text()
            .splitlines()[1:]]
    return [{"id": row[0], "text_a": row[1], "text_b": row[2], "label": sum(map(float, row[3:8])) / 5}
            for row in rows[start:stop]]


def similarity(folder: Path, train: list[dict], test: list[dict], raw: str = "") -> str:
    """A similarity dataset of JSONL records; `raw`: a line appended to the test file as written."""
    write(folder / "train.jsonl", "".join(json.dumps(r) + "\n" for r in train))
    write(folder / "test.jsonl", "".join(json.dumps(r) + "\n" for r in test) + raw)
    return "format: jsonl\ntask_type: similarity\nfiles: {train: train.jsonl, test: test.jsonl}\ndev: none\n"


def similarity_label(label: str, split: str = "test"):
    """A similarity record whose label is written as `label` in the JSON (NaN, Infinity, 1e308, "2.5", true)."""
    def case(data_dir: Path, folder: Path) -> tuple[str, str]:
        train, test = biosses_pairs(data_dir, 0, 30), biosses_pairs(data_dir, 30, 40)
        line = json.dumps({"text_a": "a protein binds", "text_b": "a gene binds", "label": 0}).replace(
            '"label": 0', f'"label": {label}') + "\n"
        if split == "train":
            write(folder / "train.jsonl", "".join(json.dumps(r) + "\n" for r in train) + line)
            write(folder / "test.jsonl", "".join(json.dumps(r) + "\n" for r in test))
            body = "format: jsonl\ntask_type: similarity\nfiles: {train: train.jsonl, test: test.jsonl}\ndev: none\n"
        else:
            body = similarity(folder, train, test, line)
        number = 31 if split == "train" else 11
        return body, f"{split}.jsonl:{number}: field 'label' (fields.label)"
    return case


def constant_gold(data_dir: Path, folder: Path) -> tuple[str, str]:
    test = [{**r, "label": 2.0} for r in biosses_pairs(data_dir, 30, 40)]
    return similarity(folder, biosses_pairs(data_dir, 0, 30), test), \
        "every test pair has the same gold score (2.0)"


def conll_without_mentions(data_dir: Path, folder: Path, split: str) -> tuple[str, str]:
    blocks = (data_dir / "NCBI-disease-IOB" / "train.tsv").read_text().split("\n\n")
    tagged, bare = blocks[:40], [re.sub(r"\t[BI](-\S+)?$", "\tO", b, flags=re.M) for b in blocks[40:80]]
    files = {"train": tagged, "test": tagged[:20]}
    files[split] = bare
    for name, chosen in files.items():
        write(folder / f"{name}.txt", "\n\n".join(chosen) + "\n")
    return ("format: conll\ntask_type: ner\nlabels: [Disease]\nfiles: {train: train.txt, test: test.txt}\n"
            "dev: none\n", f"no {split} sentence has a gold mention")


def gad_jsonl(data_dir: Path, folder: Path, records: list[dict], fragment: str) -> tuple[str, str]:
    train = [{"id": f"t{i}", "text": line.split("\t")[0], "label": line.split("\t")[1]}
             for i, line in enumerate(gad_lines(data_dir, 0, 30))]
    write(folder / "train.jsonl", "".join(json.dumps(r) + "\n" for r in train + records))
    write(folder / "test.jsonl", "".join(json.dumps({"text": line.split("\t")[0], "label": line.split("\t")[1]}) + "\n"
                                         for line in gad_lines(data_dir, 30, 40)))
    return ("format: jsonl\ntask_type: classification\nlabels: ['0', '1']\n"
            "files: {train: train.jsonl, test: test.jsonl}\ndev: none\n", fragment)


def relation_without_positive_test_pairs(data_dir: Path, folder: Path, score: str, fragment: str) -> tuple[str, str]:
    """GAD's pairs with every test pair relabelled '0': a relation F1 with no positive gold to find."""
    lines = gad_lines(data_dir, 0, 40)
    write(folder / "train.tsv", "\n".join(lines[:30]) + "\n")
    write(folder / "test.tsv", "".join(line.rsplit("\t", 1)[0] + "\t0\n" for line in lines[30:]))
    return (f"format: tsv\ntask_type: re\nlabels: ['0', '1']\n{score}\nentity_types: [GENE, DISEASE]\n"
            "files: {train: train.tsv, test: test.tsv}\ndev: none\n", fragment)


def carved_dev(data_dir: Path, folder: Path, fraction: str, fragment: str) -> tuple[str, str]:
    write(folder / "train.tsv", "\n".join(gad_lines(data_dir, 0, 40)) + "\n")
    write(folder / "test.tsv", "\n".join(gad_lines(data_dir, 40, 60)) + "\n")
    return GAD_RE + f"files: {{train: train.tsv, test: test.tsv}}\ndev: {{fraction: {fraction}, seed: 1}}\n", fragment


def golden_without_located_answers(data_dir: Path, folder: Path) -> tuple[str, str]:
    train = golden(data_dir, "5B1")
    for question in factoids(train):
        question["exact_answer"] = [["an answer no snippet holds"]]
    train["questions"] = factoids(train)
    return (qa_dataset(folder, "bioasq-golden", train, golden(data_dir, "6B1")),
            "its train file gives no example (extractive QA: a training snippet counts where its answer is located")


CASES = {
    "golden-duplicate-id-in-test": lambda d, f: duplicate_golden_id(d, f, "test"),
    "golden-duplicate-id-in-train": lambda d, f: duplicate_golden_id(d, f, "train"),
    "squad-negative-answer-start": negative_answer_start,
    "squad-no-questions": no_questions,
    "qa-train-without-answers": train_without_answers,
    "qa-test-without-answers": gold_without_answers,
    "folds-k-above-the-data": too_many_folds,
    "test-file-is-the-train-file": same_train_and_test,
    # the diagnosis names what to change (it said "no train / dev split")
    "dev-fraction-takes-every-example": lambda d, f: carved_dev(d, f, "0.99", "dev.fraction 0.99 took every one of"),
    "dev-fraction-carves-nothing": lambda d, f: carved_dev(d, f, "1e-300", "dev.fraction 1e-300 carves no dev example"),
    "golden-train-without-located-answers": golden_without_located_answers,
    # statistics on nonsense, refused before the run: a NaN gold score, a constant gold, no gold mention
    "similarity-nan-test-label": similarity_label("NaN"),
    "similarity-infinite-training-label": similarity_label("Infinity", "train"),
    "similarity-huge-training-label": similarity_label("1e308", "train"),
    "similarity-label-as-text": similarity_label('"2.5"'),
    "similarity-label-as-boolean": similarity_label("true"),
    "similarity-constant-gold": constant_gold,
    "ner-test-without-mentions": lambda d, f: conll_without_mentions(d, f, "test"),
    "ner-train-without-mentions": lambda d, f: conll_without_mentions(d, f, "train"),
    "relation-test-without-positive-pairs": lambda d, f: relation_without_positive_test_pairs(
        d, f, "negative_label: '0'", "no test pair has a positive gold label (every one is '0')"),
    "positive-class-test-without-positive-pairs": lambda d, f: relation_without_positive_test_pairs(
        d, f, "positive_label: '1'", "no test pair has a positive gold label (none is '1')"),
    "text-of-zero-width-characters": lambda d, f: gad_jsonl(d, f, [{"id": "z", "text": "\u200b\u200c\u0007",
                                                                    "label": "0"}],
                                                            "the text holds no visible character"),
    "text-with-a-nul-character": lambda d, f: gad_jsonl(d, f, [{"id": "n", "text": "a\u0000b", "label": "0"}],
                                                        "the text holds a NUL character"),
    "duplicate-id-in-a-jsonl-split": lambda d, f: gad_jsonl(d, f, [{"id": "t3", "text": "another sentence",
                                                                    "label": "0"}],
                                                            "id 't3' occurs twice"),
}


def stored_runs(work_dir: Path) -> list:
    if not (work_dir / "mlruns.db").exists():
        return []
    client = MlflowClient(f"sqlite:///{work_dir / 'mlruns.db'}")
    return client.search_runs([e.experiment_id for e in client.search_experiments()])


@pytest.mark.parametrize("case", list(CASES))
def test_bad_data_is_one_line_exit_2_and_no_run_in_the_store(case, data_dir, tmp_path):
    folder = tmp_path / "data"
    body, fragment = CASES[case](data_dir, folder)
    yaml = write(folder / "bad.yaml", f"name: {case}\npath: .\n{body}")  # a name per case: one registry
    work = tmp_path / "work"
    done = bioablate_in_process("finetune", "--task", case, "--datasets", str(yaml), "--data-dir", str(data_dir),
                                "--work-dir", str(work), "finetune.max_train_examples=8", "trainer.progress_bar=false",
                                cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("bioablate: error: "), done.stderr
    assert fragment in lines[0], lines[0]
    assert_nothing_left(work)


def assert_nothing_left(work: Path) -> None:
    """No run, and no store or claim created for it: refused before either exists."""
    assert stored_runs(work) == []
    assert not (work / "mlruns.db").exists() and not list(work.glob("runs/*/claim.lock")), sorted(work.rglob("*"))


def test_a_utf8_byte_order_mark_is_read_as_utf_8_sig_reads_it(data_dir, tmp_path):
    text = json.dumps(squad(data_dir))
    plain, marked = write(tmp_path / "plain.json", text), tmp_path / "marked.json"
    marked.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert read_squad_file(marked) == read_squad_file(plain) != []
    lines = [json.dumps({"text": line.split("\t")[0], "label": line.split("\t")[1]})
             for line in gad_lines(data_dir, 0, 6)]
    write(tmp_path / "a.jsonl", "\n".join(lines) + "\n")
    (tmp_path / "b.jsonl").write_bytes(b"\xef\xbb\xbf" + ("\n".join(lines) + "\n").encode())
    yaml = write(tmp_path / "bom.yaml", "name: bom\npath: .\nformat: jsonl\ntask_type: classification\n"
                                        "labels: ['0', '1']\nfiles: {train: a.jsonl, test: b.jsonl}\ndev: none\n")
    splits = register_from_yaml(yaml).read(None)
    assert [x.text for x in splits["test"]] == [x.text for x in splits["train"]] and len(splits["test"]) == 6


def test_the_overlap_warning_counts_repeats_by_input_and_by_id():
    def text(ident: str, words: str) -> TextInstance:
        return TextInstance(ident, words, ("0",))

    train = [text("a", "one"), text("b", "two"), text("c", "three")]
    dev = [text("d", "four")]
    test = [text("a", "new words"), text("x", "two"), text("y", "three"), text("z", "five"), text("b", "two")]
    warning = overlap_warning("hand", {"train": train, "dev": dev, "test": test})
    assert warning == ("hand: test repeats train: 3 of 5 by input, 2 by id; scores on repeated examples measure "
                       "memory, not generalisation (docs/data.md, 'Overlaps between splits')")
    assert overlap_warning("hand", {"train": train, "dev": dev, "test": test[3:4]}) is None


def test_a_run_shows_the_overlap_warning_once(data_dir, tmp_path, caplog):
    lines = gad_lines(data_dir, 0, 30)
    write(tmp_path / "train.tsv", "\n".join(lines) + "\n")
    write(tmp_path / "test.tsv", "\n".join(lines[:4] + gad_lines(data_dir, 30, 40)) + "\n")
    spec = register_from_yaml(write(tmp_path / "leaky.yaml", "name: leaky\npath: .\n" + GAD_RE +
                                    "files: {train: train.tsv, test: test.tsv}\ndev: none\n"))
    with caplog.at_level(logging.WARNING, logger="bioablate"):
        read_checked(spec, None)
        read_checked(spec, None)
    warnings = [r.getMessage() for r in caplog.records if "repeated examples" in r.getMessage()]
    assert warnings == ["leaky: test repeats train: 4 of 14 by input, 0 by id; scores on repeated examples measure "
                        "memory, not generalisation (docs/data.md, 'Overlaps between splits')"]


def test_the_same_content_is_checked_once_per_process_and_changed_content_again(data_dir, tmp_path, monkeypatch):
    """An experiment's runs on one dataset share one check (the overlaps of ChemProt's splits take a tenth
    of a second per run); a file changed between them is checked anew, and refused if it must be."""
    from datamodules import split_checks

    checked = []
    real = split_checks.check_splits
    monkeypatch.setattr(split_checks, "check_splits", lambda *a: checked.append(a[0].name) or real(*a))
    lines = gad_lines(data_dir, 0, 40)
    write(tmp_path / "train.tsv", "\n".join(lines[:30]) + "\n")
    write(tmp_path / "test.tsv", "\n".join(lines[30:]) + "\n")
    spec = register_from_yaml(write(tmp_path / "once.yaml", "name: once\npath: .\n" + GAD_RE +
                                    "files: {train: train.tsv, test: test.tsv}\ndev: none\n"))
    for _ in range(3):
        read_checked(spec, None)
    assert checked == ["once"]
    write(tmp_path / "test.tsv", "\n".join(lines[:30]) + "\n")  # now the training file again
    with pytest.raises(Exception, match="every test example repeats a training example"):
        read_checked(spec, None)
    assert checked == ["once", "once"]


def test_balanced_class_weights_without_a_class_in_training_leave_no_failed_run(data_dir, tmp_path):
    """`finetune.class_weights=balanced` where the training examples lack a class: the weight is undefined,
    said before the run exists (it was a FAILED run)."""
    folder = tmp_path / "data"
    lines = gad_lines(data_dir, 0, 200)
    write(folder / "train.tsv", "\n".join(line for line in lines if line.endswith("\t0")) + "\n")
    write(folder / "test.tsv", "\n".join(gad_lines(data_dir, 200, 240)) + "\n")
    yaml = write(folder / "one-class.yaml", "name: one-class\npath: .\nformat: tsv\ntask_type: classification\n"
                                            "labels: ['0', '1']\nfiles: {train: train.tsv, test: test.tsv}\n"
                                            "dev: none\n")
    work = tmp_path / "work"
    done = bioablate_in_process("finetune", "--task", "one-class", "--datasets", str(yaml), "--data-dir",
                                str(data_dir), "--work-dir", str(work), "finetune.class_weights=balanced",
                                "trainer.progress_bar=false", cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-3000:]
    assert ("finetune.class_weights = balanced on one-class: classes ['1'] do not occur in the training labels"
            in lines[0])
    assert_nothing_left(work)

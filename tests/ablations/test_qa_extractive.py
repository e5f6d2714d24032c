"""Extractive QA (task type qa-extractive) end to end on the staged BioASQ golden files: a question whose
answer is in no snippet counts as wrong at test, a micro fine-tune reports BioBERT's Table 6 measures and
logs each question's top-5 answers, the exported model answers through `bioablate predict`, and user
SQuAD / BioASQ golden files train and evaluate from a dataset YAML alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from transformers import BertTokenizer

from ablations.cli import main
from ablations.config import build_config
from ablations.run.finetune import run_finetune
from bioablate_core.errors import ConfigError
from datamodules.custom import register_from_yaml
from datamodules.finetune_data import FinetuneDataModule, FinetuneDataOptions, subsample
from datamodules.registry import get_dataset

MICRO = ["finetune.max_train_examples=48", "finetune.max_eval_examples=40", "finetune.epochs=1",
         "trainer.progress_bar=false"]


def oracle_raw(datamodule: FinetuneDataModule, split: str) -> dict[int, list[list[float]]]:
    """Raw predictions as the LightningModule hands them over (per window: [start, end] logits of its
    attended positions), peaked at each window's labelled answer tokens: the best a model can do."""
    features = datamodule.features[split]
    raw = {}
    for i in range(len(features)):
        start, end = features.columns["labels"][i].tolist()
        logits = [[0.0, 0.0] for _ in range(int(features.lengths[i]))]
        logits[start][0] = logits[end][1] = 20.0
        raw[i] = logits
    return raw


def test_a_question_whose_answer_is_in_no_snippet_counts_as_wrong_at_test(data_dir):
    tokenizer = BertTokenizer(vocab=str(data_dir / "vocab/bert-base-uncased/vocab.txt"), do_lower_case=True)
    datamodule = FinetuneDataModule(get_dataset("bioasq-6b-factoid"), data_dir, tokenizer,
                                    FinetuneDataOptions(max_length=384, batch_size=8, eval_batch_size=8))
    datamodule.setup()
    test = datamodule.instances["test"]
    questions = {x.question_id for x in test}
    unanswerable = questions - {x.question_id for x in test if x.answer_spans}
    assert len(questions) == 161 and len(unanswerable) > 30  # BioBERT's 161 test questions, all kept
    assert all(x.answer_spans for x in datamodule.instances["train"])  # training: located answers only

    metrics, predictions = datamodule.score("test", oracle_raw(datamodule, "test"))
    records = datamodule.encoder.question_records(test, predictions)
    assert metrics["total"] == 161 and len(records) == 161
    correct = {r["id"] for r in records if r["answers"] and r["answers"][0].lower() in
               {g.lower() for g in r["gold"]}}
    assert not correct & unanswerable  # nothing to find: wrong
    assert metrics["strict"] == pytest.approx(len(correct) / 161)
    # the oracle answers nearly every answerable question, so the unanswerable ones are what it misses
    assert len(correct) >= 0.9 * (161 - len(unanswerable)) and metrics["strict"] < 1 - len(unanswerable) / 161 + 1e-9
    assert metrics["score"] == metrics["mrr"] >= metrics["strict"] and metrics["lenient"] >= metrics["strict"]


def test_a_stride_too_large_for_the_window_is_one_line_before_any_run(data_dir, tmp_path, capsys):
    """Micro windows of 64 tokens hold a question of up to 16 and 3 special tokens: a stride of 45 or more
    leaves no new context. The CLI says so in one line, exit 2, and no run is left in the store."""
    code = main(["finetune", "--task", "bioasq-5b-factoid", "--data-dir", str(data_dir), "--work-dir", str(tmp_path),
                 "finetune.qa_stride=45"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "finetune.qa_stride = 45" in err and "set finetune.qa_stride below 45" in err
    store = tmp_path / "mlruns.db"
    assert not store.exists() or not MlflowClient(f"sqlite:///{store}").search_runs(
        [e.experiment_id for e in MlflowClient(f"sqlite:///{store}").search_experiments()])


@pytest.mark.slow
def test_micro_finetune_reports_table6_measures_logs_top5_answers_and_predicts(data_dir, tmp_path, capsys):
    work = tmp_path / "work"
    cfg = build_config("micro", MICRO, task="bioasq-5b-factoid", data_dir=str(data_dir), work_dir=str(work))
    result = run_finetune(cfg)
    assert {"strict", "lenient", "mrr", "score"} <= set(result.test) and result.test["score"] == result.test["mrr"]
    assert 0.0 <= result.test["strict"] <= result.test["lenient"] <= 1.0

    client = MlflowClient(result.tracking_uri)
    # the config leaves the stride null; the run records the one it used, a third of micro's 64-token windows
    assert client.get_run(result.run_id).data.params["finetune.qa_stride"] == "21"
    answers = Path(client.download_artifacts(result.run_id, "test_answers.jsonl", str(tmp_path)))
    records = [json.loads(line) for line in answers.read_text().splitlines()]
    # the run's test contexts: whole questions (BioASQ scores a question over all its snippets)
    tested = subsample(get_dataset("bioasq-5b-factoid").read(data_dir)["test"], 40, group_by="question_id")
    assert [r["id"] for r in records] == list(dict.fromkeys(x.question_id for x in tested))
    assert all(r["answers"] and len(r["answers"]) <= 5 and all(isinstance(a, str) for a in r["answers"])
               for r in records)
    assert any(len(r["answers"]) == 5 for r in records)
    assert all(r["gold"] for r in records) and all(r["contexts"] >= 1 for r in records)
    contexts = {x.id: x.context for x in tested}  # each answer's characters in the snippet it came from
    assert all([s["answer"] for s in r["spans"]] == r["answers"] and
               all(contexts[s["id"]][s["start"]:s["end"]] == s["answer"] for s in r["spans"]) for r in records)

    out = tmp_path / "model"
    assert main(["export", result.fingerprint, "--to", str(out), "--work-dir", str(work)]) == 0
    inputs = tmp_path / "questions.txt"  # plain text: question, tab, context
    inputs.write_text("Which gene is mutated in cystic fibrosis?\tCystic fibrosis is caused by mutations in the "
                      "CFTR gene on chromosome 7.\nWhat does insulin regulate?\tInsulin regulates glucose uptake.\n")
    capsys.readouterr()
    assert main(["predict", "--model", str(out), "--input", str(inputs)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["id"] for line in lines] == ["1", "2"]
    for line, context in zip(lines, ("Cystic fibrosis is caused by mutations in the CFTR gene on chromosome 7.",
                                     "Insulin regulates glucose uptake.")):
        assert 1 <= len(line["prediction"]) <= 20 and 1 <= len(line["answers"]) <= 5  # the n-best; the top 5
        assert all(text.lower() in context.lower() and 0 < p <= 1 for text, p in line["prediction"])

    # the run's real BioASQ test snippets: each answer with character offsets into its context, never
    # starting or ending inside a word (the model's sub-word spans widened to whole words)
    snippets, predicted = tmp_path / "snippets.jsonl", tmp_path / "answers.jsonl"
    snippets.write_text("".join(json.dumps({"id": x.id, "question": x.question, "context": x.context}) + "\n"
                                for x in tested))
    assert main(["predict", "--model", str(out), "--input", str(snippets), "--output", str(predicted)]) == 0
    widened = 0
    for x, line in zip(tested, (json.loads(line) for line in predicted.read_text().splitlines())):
        context = x.context
        assert line["id"] == x.id and len(line["answers"]) <= 5 and bool(line["answers"]) == bool(context.strip())
        if not line["answers"]:  # a question without snippets: an empty context, nothing to answer
            continue
        for answer in line["answers"]:
            start, end = answer["start"], answer["end"]
            assert list(answer) == ["answer", "score", "start", "end"] and context[start:end] == answer["answer"]
            assert not (start > 0 and context[start - 1].isalnum() and context[start].isalnum()), answer
            assert not (end < len(context) and context[end - 1].isalnum() and context[end].isalnum()), answer
        first, best = line["answers"][0], line["prediction"][0]
        assert best[0] in first["answer"] and first["score"] == best[1]  # the model's best answer, widened
        widened += first["answer"] != best[0]
    assert widened  # the micro model's best span started or ended inside a word somewhere


def write_yaml(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("fmt,files,measures", [
    ("squad", "{k: 2, seed: 13, file: BioELECTRA/bioasq/dev.json}", {"em", "f1"}),  # one file: 2 folds
    ("bioasq-golden", "{train: BioASQ/golden/4B1_golden.json, dev: BioASQ/golden/4B2_golden.json, "
                      "test: BioASQ/golden/4B3_golden.json}", {"strict", "lenient", "mrr"}),
])
def test_a_user_qa_file_trains_and_evaluates_from_a_dataset_yaml(fmt, files, measures, data_dir, tmp_path):
    name = f"user-qa-{fmt}"
    key = "folds" if fmt == "squad" else "files"  # the same file as train and test would be refused
    yaml = write_yaml(tmp_path / f"{name}.yaml",
                      f"name: {name}\nformat: {fmt}\npath: {data_dir}\n{key}: {files}\nmax_length: 256\n")
    spec = register_from_yaml(yaml)
    assert spec.task_type == "qa-extractive" and spec.metric == ("squad_v1" if fmt == "squad" else "bioasq_factoid")
    splits = spec.read(None)
    if fmt == "bioasq-golden":  # training keeps located answers only; test every snippet
        assert all(x.answer_spans for x in splits["train"]) and any(not x.answer_spans for x in splits["test"])
    cfg = build_config("micro", MICRO, task=name, data_dir=str(data_dir), work_dir=str(tmp_path / "work"))
    result = run_finetune(cfg)
    assert measures <= set(result.test)


@pytest.mark.parametrize("body,fragment", [
    ("format: squad\nlabels: [a, b]\n", "labels: a qa-extractive dataset has answer spans"),
    ("format: jsonl\ntask_type: qa-extractive\n", "task_type qa-extractive is read from format squad or bioasq-golden"),
    ("format: squad\nmetric: accuracy\n", "metric 'accuracy' cannot score task_type qa-extractive"),
])
def test_qa_yaml_mistakes_are_one_line_naming_the_file(body, fragment, tmp_path):
    yaml = write_yaml(tmp_path / "bad.yaml", "name: bad-qa\npath: .\nfiles: {train: a, dev: b, test: c}\n" + body)
    with pytest.raises(ConfigError) as error:
        register_from_yaml(yaml)
    assert str(error.value).startswith(str(yaml)) and fragment in str(error.value) and "\n" not in str(error.value)


def test_list_tasks_shows_the_extractive_qa_datasets(capsys):
    assert main(["list", "tasks"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if "qa-extractive" in line}
    assert set(rows) >= {"bioasq-4b-factoid", "bioasq-5b-factoid", "bioasq-6b-factoid", "bioelectra-factoid"}
    assert all(rows[f"bioasq-{year}b-factoid"][:3] == ["other", "qa-extractive", "bioasq_factoid"]
               for year in (4, 5, 6))
    assert rows["bioelectra-factoid"][:3] == ["other", "qa-extractive", "squad_v1"]


def test_list_tasks_says_which_datasets_are_blurbs(capsys):
    """Issue 38: the listing said "13 BLURB datasets" and printed 23, none marked."""
    from datamodules.blurb import BLURB_DATASETS

    assert main(["list", "tasks"]) == 0
    header, *lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert header.split()[:2] == ["task", "source"]
    rows = {line.split()[0]: line.split()[1] for line in lines}
    assert sorted(name for name, source in rows.items() if source == "BLURB") == \
        sorted(spec.name for spec in BLURB_DATASETS)
    assert len(BLURB_DATASETS) == 13 and set(rows.values()) == {"BLURB", "other"} and len(rows) > 13

"""`bioablate predict` on a model exported from a real micro fine-tuning run on BC5-chem: the task comes from
the folder, and each mention comes with its text and character offsets into the input, as a Hugging Face
token-classification pipeline with `aggregation_strategy="simple"` reports them (`entity_group`, `score`,
`word`, `start`, `end`), whatever the spacing, punctuation or alphabet of the input."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from ablations.cli import main
from ablations.config import build_config
from ablations.run.finetune import run_finetune

FINETUNE = ["finetune.max_train_examples=48", "finetune.max_eval_examples=40", "finetune.epochs=2",
            "finetune.max_length=64", "trainer.progress_bar=false"]
# Real sentences of the kind BC5CDR holds, with what trips offset arithmetic: runs of spaces, a tab,
# punctuation glued to words, and characters outside ASCII (Greek letters, an en dash, an umlaut, an
# ellipsis, and an emoji the vocabulary does not have: [UNK]).
SENTENCES = [
    "Naloxone reverses the antihypertensive effect of clonidine.",
    "Cocaine-induced  seizures were treated with diazepam (10 mg/kg i.v.) .",
    "Treatment with α-methyldopa and β-blockers caused hypotension in 12 % of patients…",
    "Lithium   carbonate–induced nephrotoxicity:\ta case report (Müller et al.) 💊",
]
WORDS = re.compile(r"\w+|[^\w\s]")
FIELDS = ["entity_group", "score", "word", "start", "end"]  # the pipeline's, in its order


@pytest.fixture(scope="module")
def exported(tmp_path_factory, data_dir: Path) -> Path:
    """A micro BC5-chem model, fine-tuned and exported through the CLI's code path."""
    work = tmp_path_factory.mktemp("predict-work")
    cfg = build_config("micro", FINETUNE, task="bc5-chem", data_dir=str(data_dir), work_dir=str(work))
    result = run_finetune(cfg)
    out = work / "model"
    assert main(["export", result.fingerprint, "--to", str(out), "--work-dir", str(work)]) == 0
    return out


def _predict(model: Path, lines: list[str], tmp_path: Path, suffix: str = ".txt") -> list[dict]:
    """`bioablate predict` without --task on `lines`, its JSONL output read back."""
    inputs, output = tmp_path / f"in{suffix}", tmp_path / "out.jsonl"
    inputs.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["predict", "--model", str(model), "--input", str(inputs), "--output", str(output)]) == 0
    return [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]


def _tagging_everywhere(exported: Path, tag: str, to: Path) -> Path:
    """A copy of the model whose output layer predicts `tag` at every word: the micro model tags few
    words, and these copies make every word a mention (B-) or the whole sentence one (I-, which the BIO
    decoding joins), so every offset is exercised. Only the classifier's numbers change; the folder is
    read as any export is."""
    shutil.copytree(exported, to)
    labels = json.loads((to / "bioablate.json").read_text())["labels"]
    weights = load_file(str(to / "model.safetensors"))
    weights["classifier.weight"] = torch.zeros_like(weights["classifier.weight"])
    weights["classifier.bias"] = torch.tensor([10.0 if label == tag else 0.0 for label in labels])
    save_file(weights, str(to / "model.safetensors"), metadata={"format": "pt"})
    return to


@pytest.mark.slow
def test_entities_carry_their_text_and_character_offsets(exported: Path, tmp_path: Path):
    records = _predict(exported, SENTENCES, tmp_path)
    assert [r["text"] for r in records] == SENTENCES and [r["id"] for r in records] == ["1", "2", "3", "4"]
    for record in records:
        text, tokens = record["text"], record["tokens"]
        assert tokens == WORDS.findall(text)
        assert len(record["entities"]) == len(record["prediction"])  # one entity per predicted span
        for entity, (first, last, label) in zip(record["entities"], record["prediction"]):
            assert list(entity) == FIELDS
            assert text[entity["start"]:entity["end"]] == entity["word"]
            # the entity is the span's words, with the text's own spacing between them
            assert entity["word"].split() and "".join(entity["word"].split()) == "".join(tokens[first:last])
            assert entity["entity_group"] == label == "Chemical" and 0.0 < entity["score"] <= 1.0


@pytest.mark.slow
def test_every_word_and_a_whole_sentence_map_back_to_the_input(exported: Path, tmp_path: Path):
    every_word = _tagging_everywhere(exported, "B-Chemical", tmp_path / "every-word")
    for record in _predict(every_word, SENTENCES, tmp_path):
        text = record["text"]
        expected = [(m.group(), m.start(), m.end()) for m in WORDS.finditer(text)]
        assert [(e["word"], e["start"], e["end"]) for e in record["entities"]] == expected
        assert all(e["score"] > 0.99 for e in record["entities"])  # softmax of a 10-logit lead over 0s
    one_span = _tagging_everywhere(exported, "I-Chemical", tmp_path / "one-span")
    for record in _predict(one_span, SENTENCES, tmp_path):
        text = record["text"]
        start, end = len(text) - len(text.lstrip()), len(text.rstrip())
        assert [(e["word"], e["start"], e["end"]) for e in record["entities"]] == [(text[start:end], start, end)]


@pytest.mark.slow
def test_offsets_are_those_the_transformers_pipeline_gives(exported: Path, tmp_path: Path):
    """Where the pipeline groups the same tokens (here: the whole sentence, one mention), its character
    offsets and entity group are ours. (Its `word` is the tokenizer's decoding, lowercased and respaced;
    ours is the input's own text.)"""
    from transformers import pipeline

    one_span = _tagging_everywhere(exported, "I-Chemical", tmp_path / "one-span")
    tagger = pipeline("token-classification", model=str(one_span), aggregation_strategy="simple", device="cpu")
    for record in _predict(one_span, SENTENCES, tmp_path):
        theirs = tagger(record["text"])
        assert [list(entity) for entity in theirs] == [FIELDS]
        ours = record["entities"]
        assert [(e["entity_group"], e["start"], e["end"]) for e in ours] == \
            [(e["entity_group"], int(e["start"]), int(e["end"])) for e in theirs]


@pytest.mark.slow
def test_jsonl_tokens_are_placed_in_their_text(exported: Path, tmp_path: Path, capsys):
    every_word = _tagging_everywhere(exported, "B-Chemical", tmp_path / "every-word")
    text = "Lithium   carbonate–induced  nephrotoxicity"
    lines = [json.dumps({"id": "both", "text": text, "tokens": ["Lithium", "carbonate–induced", "nephrotoxicity"]}),
             json.dumps({"id": "tokens", "tokens": ["α-methyldopa", "(", "oral", ")"]})]
    both, tokens_only = _predict(every_word, lines, tmp_path, ".jsonl")
    assert [(e["word"], e["start"], e["end"]) for e in both["entities"]] == \
        [("Lithium", 0, 7), ("carbonate–induced", 10, 27), ("nephrotoxicity", 29, 43)]
    assert tokens_only["text"] == "α-methyldopa ( oral )"  # tokens alone: joined by spaces, offsets into that
    assert [tokens_only["text"][e["start"]:e["end"]] for e in tokens_only["entities"]] == \
        ["α-methyldopa", "(", "oral", ")"]
    (tmp_path / "bad.jsonl").write_text(json.dumps({"text": "Aspirin helps.", "tokens": ["helps", "Aspirin"]}) + "\n")
    capsys.readouterr()
    code = main(["predict", "--model", str(every_word), "--input", str(tmp_path / "bad.jsonl")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "token 'helps' is not where the text continues" in err


@pytest.mark.slow
def test_the_task_comes_from_the_folder_and_a_wrong_one_is_refused(exported: Path, tmp_path: Path, capsys):
    (tmp_path / "in.txt").write_text("Aspirin helps.\n")
    assert main(["predict", "--model", str(exported), "--input", str(tmp_path / "in.txt")]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == ["Aspirin", "helps", "."]
    assert main(["predict", "--model", str(exported), "--task", "bc5-chem", "--input", str(tmp_path / "in.txt")]) == 0
    capsys.readouterr()
    code = main(["predict", "--model", str(exported), "--task", "hoc", "--input", str(tmp_path / "in.txt")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "fine-tuned on 'bc5-chem'" in err


@pytest.mark.slow
def test_a_binary_input_and_an_output_folder_are_one_line_each(exported: Path, tmp_path: Path, capsys):
    binary = tmp_path / "scan.txt"
    binary.write_bytes(b"Aspirin helps.\n\xff\xfe\x00\x01 not text\n")
    code = main(["predict", "--model", str(exported), "--input", str(binary)])
    assert code == 2 and capsys.readouterr().err.strip().startswith(f"bioablate: error: {binary}:2: ")
    folder = tmp_path / "out"
    folder.mkdir()
    code = main(["predict", "--model", str(exported), "--input", str(binary), "--output", str(folder)])
    assert code == 2 and capsys.readouterr().err.strip() == (
        f"bioablate: error: --output {folder} is a folder; name the JSONL file to write, e.g. "
        f"{folder / 'predictions.jsonl'}")


@pytest.mark.slow
def test_predict_refuses_to_write_onto_its_input(exported: Path, tmp_path: Path, capsys):
    """`--output` naming the input (or a link to it) would replace the user's text by JSONL."""
    text = tmp_path / "x.txt"
    text.write_text("Aspirin helps.\n")
    (tmp_path / "link.txt").symlink_to(text)
    for output in (text, tmp_path / "link.txt"):
        code = main(["predict", "--model", str(exported), "--input", str(text), "--output", str(output)])
        err = capsys.readouterr().err.strip()
        assert code == 2 and err.count("\n") == 0 and f"--output {output} is the --input file" in err
    assert text.read_text() == "Aspirin helps.\n"


@pytest.mark.slow
def test_a_long_input_is_tagged_all_through_window_by_window(exported: Path, tmp_path: Path):
    """100,000 characters (about 13,000 tokens, the model reads 64 at a time) get a mention at every word,
    at its offsets into the whole text: nothing past the first window is dropped."""
    every_word = _tagging_everywhere(exported, "B-Chemical", tmp_path / "every-word")
    text = ""
    while len(text) < 100_000:
        text += " ".join(SENTENCES).replace("\t", " ") + " "
    text = text.strip()
    [record] = _predict(every_word, [text], tmp_path)
    expected = [(m.group(), m.start(), m.end()) for m in WORDS.finditer(text)]
    assert len(expected) > 15_000
    assert [(e["word"], e["start"], e["end"]) for e in record["entities"]] == expected
    assert record["prediction"] == [[i, i + 1, "Chemical"] for i in range(len(expected))]
    one_span = _tagging_everywhere(exported, "I-Chemical", tmp_path / "one-span")
    [record] = _predict(one_span, [text], tmp_path)
    words = record["tokens"]
    # each window is one mention (I- after I- joins within a window, not across): the windows tile the input
    spans = record["prediction"]
    assert spans[0][0] == 0 and spans[-1][1] == len(words) and len(spans) > 100
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    # a window ends after a sentence where one ends in its second half
    assert sum(words[end - 1] in ".!?…" for _, end, _ in spans[:-1]) > len(spans) // 2


def test_an_input_folder_is_said_to_be_a_folder_before_any_model_is_loaded(tmp_path: Path, capsys):
    """`--input DIR` is named a folder with the file to pass instead (it said "no such file"), checked before
    the model folder is read: `--model` here holds no model at all."""
    folder = tmp_path / "texts"
    folder.mkdir()
    code = main(["predict", "--model", str(tmp_path / "no-model"), "--input", str(folder)])
    assert code == 2 and capsys.readouterr().err.strip() == (
        f"bioablate: error: --input {folder} is a folder; name the file to read (plain text or JSONL, one "
        f"example per line), e.g. --input {folder / 'examples.txt'}")

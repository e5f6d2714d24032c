"""User datasets from YAML. For every task type, a file the test writes from a built-in dataset's staged
data, in the user format, reads back as the built-in reader's instances (and, in the slow tier, a micro
run on it scores what the built-in run scores); every YAML or data mistake is one line naming the file,
the line and the key; the dataset YAML's content is part of the run fingerprint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from transformers import BertTokenizer

from bioablate_core.errors import ConfigError, DataFormatError
from datamodules.blurb import CHEMPROT_LABELS
from datamodules.custom import register_from_yaml
from datamodules.custom.schema import UserDatasetFile
from datamodules.encoders import EncodingSpec
from datamodules.instances import Instance, PairInstance, TaggingInstance, TextInstance
from datamodules.readers.hoc import HOC_LABELS
from datamodules.registry import dataset_names, get_dataset
from datamodules.spec import SPLITS
from datamodules.tagging import get_scheme
from datamodules.task_kinds import make_encoder
from tests import shapes
from tests.cli import bioablate_in_process

GOOD = "format: tsv\npath: data\nfiles: {train: train.tsv, dev: dev.tsv, test: test.tsv}\nlabels: [pos, neg]\n"


def write_dataset(folder: Path, name: str, body: str = GOOD, file: str | None = None) -> Path:
    (folder / "data").mkdir(exist_ok=True)
    for split in ("train", "dev", "test"):
        (folder / "data" / f"{split}.tsv").write_text(f"a {split} sentence\tpos\nanother one\tneg\n")
    path = folder / (file or f"{name}.yaml")
    path.write_text(f"name: {name}\n{body}")
    return path


# ------------------------------------------------------------------------------------ user-format writers
# Each writes a built-in dataset's splits in one user format and returns the YAML body that reads them.

def _files(folder: Path, suffix: str) -> str:
    return f"path: {folder.name}\nfiles: {{train: train.{suffix}, dev: devel.{suffix}, test: test.{suffix}}}\n"


def _split_file(folder: Path, split: str, suffix: str) -> Path:
    return folder / f"{'devel' if split == 'dev' else split}.{suffix}"


def _write_lines(folder: Path, splits: dict[str, list[Instance]], suffix: str, line) -> None:
    folder.mkdir(exist_ok=True)
    for split, instances in splits.items():
        _split_file(folder, split, suffix).write_text("".join(line(x) + "\n" for x in instances))


def _tags(x: TaggingInstance, scheme: str, typed: bool) -> list[str]:
    tags = get_scheme(scheme).encode(x.spans, len(x.tokens))
    return tags if typed else [t.split("-")[0] for t in tags]


def ner_untyped_conll(folder: Path, splits) -> str:
    """BC5-chem as `token<TAB>POS<TAB>tag` with untyped B/I/O tags and an ignored middle column."""
    folder.mkdir(exist_ok=True)
    for split, instances in splits.items():
        with open(_split_file(folder, split, "tsv"), "w") as f:
            for x in instances:
                f.writelines(f"{t}\tNN\t{tag}\n" for t, tag in zip(x.tokens, _tags(x, "bio", typed=False)))
                f.write("\n")
    return _files(folder, "tsv") + "format: conll\nentity_type: Chemical\ncolumns: {token: 0, tag: 2}\n"


def pico_conll(folder: Path, splits) -> str:
    """EBM-PICO as SciBERT writes it: `-DOCSTART- (<pmid>)` headers, `token NN O I-PAR` lines."""
    folder.mkdir(exist_ok=True)
    for split, instances in splits.items():
        with open(_split_file(folder, split, "txt"), "w") as f:
            document = None
            for x in instances:
                pmid = x.id.rsplit("-", 1)[0]
                if pmid != document:
                    f.write(f"-DOCSTART- ({pmid})\n\n")
                    document = pmid
                f.writelines(f"{t} NN O {tag}\n" for t, tag in zip(x.tokens, _tags(x, "io", typed=True)))
                f.write("\n")
    return _files(folder, "txt") + "format: conll\ntask_type: pico\nlabels: [PAR, INT, OUT]\n"


def ner_jsonl(folder: Path, splits) -> str:
    _write_lines(folder, splits, "jsonl", lambda x: json.dumps(
        {"id": x.id, "words": list(x.tokens), "bio": _tags(x, "bio", typed=True)}))
    return (_files(folder, "jsonl") + "format: jsonl\ntask_type: ner\nlabels: [Chemical]\n"
            "fields: {tokens: words, tags: bio}\n")


def re_offsets_jsonl(folder: Path, splits) -> str:
    """ChemProt pairs with character offsets, the head as an object and the tail as a list."""
    _write_lines(folder, splits, "jsonl", lambda x: json.dumps(
        {"id": x.id, "sentence": x.text, "relation": x.label,
         "e1": {"start": x.head.start, "end": x.head.end, "type": x.head.type},
         "e2": [x.tail.start, x.tail.end, x.tail.type]}))
    return (_files(folder, "jsonl") + f"format: jsonl\ntask_type: re\nlabels: {json.dumps(CHEMPROT_LABELS)}\n"
            "negative_label: 'false'\nfields: {text: sentence, label: relation, head: e1, tail: e2}\n"
            "max_length: 256\n")


def re_placeholder_tsv(folder: Path, splits) -> str:
    """GAD as BLURB distributes it: entities replaced by @GENE$ / @DISEASE$, a header line."""
    folder.mkdir(exist_ok=True)
    for split, instances in splits.items():
        _split_file(folder, split, "tsv").write_text(
            "index\tsentence\tlabel\n" + "".join(f"{x.id}\t{x.text}\t{x.label}\n" for x in instances))
    return (_files(folder, "tsv") + "format: tsv\ntask_type: re\nlabels: ['0', '1']\npositive_label: '1'\n"
            "entity_types: [GENE, DISEASE]\nheader: true\ncolumns: {id: 0, text: 1, label: 2}\n"
            "max_length: 128\n")


def similarity_jsonl(folder: Path, splits) -> str:
    _write_lines(folder, splits, "jsonl", lambda x: json.dumps(
        {"id": x.id, "s1": x.text_a, "s2": x.text_b, "score": x.label}))
    return _files(folder, "jsonl") + ("format: jsonl\ntask_type: similarity\n"
                                      "fields: {text_a: s1, text_b: s2, label: score}\n")


def multilabel_jsonl(folder: Path, splits) -> str:
    _write_lines(folder, splits, "jsonl", lambda x: json.dumps(
        {"id": x.id, "abstract": x.text, "hallmarks": list(x.labels)}))
    return (_files(folder, "jsonl") + f"format: jsonl\ntask_type: classification\nmulti_label: true\n"
            f"labels: {json.dumps(HOC_LABELS)}\nfields: {{text: abstract, label: hallmarks}}\n")


def multilabel_tsv(folder: Path, splits) -> str:
    folder.mkdir(exist_ok=True)
    for split, instances in splits.items():
        _split_file(folder, split, "tsv").write_text(
            "".join(f"{x.id}\t{x.text}\t{'|'.join(x.labels)}\n" for x in instances))
    return (_files(folder, "tsv") + f"format: tsv\nmulti_label: true\nlabel_separator: '|'\n"
            f"labels: {json.dumps(HOC_LABELS)}\ncolumns: {{id: 0, text: 1, label: 2}}\n")


def qa_jsonl(folder: Path, splits) -> str:
    """PubMedQA: the context as a list of passages (joined by spaces when read)."""
    _write_lines(folder, splits, "jsonl", lambda x: json.dumps(
        {"id": x.id, "question": x.text_a, "contexts": [x.text_b], "final_decision": x.label}))
    return (_files(folder, "jsonl") + "format: jsonl\ntask_type: qa\nlabels: ['yes', 'no', maybe]\n"
            "fields: {context: contexts, label: final_decision}\n")


def qa_jsonl_text(folder: Path, splits) -> str:
    """BioASQ: the context as one string, the label key as is."""
    _write_lines(folder, splits, "jsonl", lambda x: json.dumps(
        {"id": x.id, "question": x.text_a, "context": x.text_b, "label": x.label}))
    return _files(folder, "jsonl") + "format: jsonl\ntask_type: qa\nlabels: ['yes', 'no']\n"


# conversion -> (built-in dataset, writer)
CONVERSIONS = {
    "ner-untyped-conll": ("bc5-chem", ner_untyped_conll),
    "ner-jsonl": ("bc5-chem", ner_jsonl),
    "pico-conll": ("ebm-pico", pico_conll),
    "re-offsets-jsonl": ("chemprot", re_offsets_jsonl),
    "re-placeholder-tsv": ("gad", re_placeholder_tsv),
    "similarity-jsonl": ("biosses", similarity_jsonl),
    "multilabel-jsonl": ("hoc", multilabel_jsonl),
    "multilabel-tsv": ("hoc", multilabel_tsv),
    "qa-jsonl": ("pubmedqa", qa_jsonl),
    "qa-jsonl-text": ("bioasq", qa_jsonl_text),
}


def convert(conversion: str, data_dir: Path, folder: Path) -> tuple[object, object]:
    """(built-in spec, user spec) of `conversion`, the user files written under `folder`."""
    builtin_name, writer = CONVERSIONS[conversion]
    builtin = get_dataset(builtin_name)
    body = writer(folder / "data", builtin.read(data_dir))
    yaml = folder / f"{conversion}.yaml"
    yaml.write_text(f"name: user-{conversion}\n{body}")
    return builtin, register_from_yaml(yaml)


@pytest.mark.parametrize("conversion", list(CONVERSIONS))
def test_a_user_file_gives_the_built_in_instances(conversion, data_dir, tmp_path):
    builtin, user = convert(conversion, data_dir, tmp_path)
    assert (user.task_type, user.labels, user.metric, user.metric_args, user.multi_label) == (
        builtin.task_type, builtin.labels, builtin.metric, builtin.metric_args, builtin.multi_label)
    expected, got = builtin.read(data_dir), user.read(None)
    for split in SPLITS:
        assert len(got[split]) == len(expected[split]) > 0
        assert got[split] == expected[split], (split, next(
            (e, g) for e, g in zip(expected[split], got[split]) if e != g))


@pytest.mark.parametrize("re_input", ["dummify", "markers", "original"])
def test_every_relation_input_encodes_the_jsonl_form_as_the_built_in(re_input, data_dir, tmp_path):
    """Table 14's input styles need the entity offsets; the features the mention / entity-start
    featurizers read (entity masks, marker positions) come out the same as from the built-in reader."""
    builtin, user = convert("re-offsets-jsonl", data_dir, tmp_path)
    tokenizers = [BertTokenizer(vocab=str(data_dir / "vocab" / "pubmedbert-uncased" / "vocab.txt")) for _ in "ab"]
    features = [make_encoder(spec, tokenizer, 128, EncodingSpec(re_input=re_input)).encode(
                    spec.read(data_dir)["dev"][:200])
                for spec, tokenizer in zip((builtin, user), tokenizers)]
    assert features[0] == features[1]
    assert all(sum(f["head_mask"]) > 0 and sum(f["tail_mask"]) > 0 for f in features[1])
    assert any(f["head_start"] > 0 for f in features[1]) == (re_input == "markers")


def test_sentence_pairs_classify_and_documents_keep_single_labels(data_dir, tmp_path):
    (tmp_path / "data").mkdir()
    for split in SPLITS:
        (tmp_path / "data" / f"{split}.jsonl").write_text(
            '{"premise": "aspirin inhibits cox", "hypothesis": "cox is inhibited", "gold": "entailment"}\n'
            '{"premise": "a second pair", "hypothesis": "of sentences", "gold": "neutral"}\n')
    (tmp_path / "nli.yaml").write_text(
        "name: user-nli\nformat: jsonl\ntask_type: pair-classification\npath: data\n"
        "files: {train: train.jsonl, dev: dev.jsonl, test: test.jsonl}\nlabels: [entailment, neutral]\n"
        "fields: {text_a: premise, text_b: hypothesis, label: gold}\n")
    spec = register_from_yaml(tmp_path / "nli.yaml")
    assert (spec.task_type, spec.metric, spec.count_unit) == ("classification", "accuracy", "pairs")
    assert spec.read(None)["dev"][1] == PairInstance("dev-1", "a second pair", "of sentences", "neutral")
    assert "user-nli" in dataset_names("classification")
    tokenizer = BertTokenizer(vocab=str(data_dir / "vocab" / "pubmedbert-uncased" / "vocab.txt"))
    encoded = make_encoder(spec, tokenizer, 64).encode(spec.read(None)["dev"])
    assert [f["labels"] for f in encoded] == [0, 1] and all(1 in f["token_type_ids"] for f in encoded)

    spec = register_from_yaml(write_dataset(tmp_path, "user-docs", GOOD.replace("tsv\n", "tsv\nmetric: accuracy\n", 1)))
    assert spec.read(None)["test"][0] == TextInstance("test-0", "a test sentence", ("pos",))


# ---------------------------------------------------------------------------------------------- mistakes

@pytest.mark.parametrize("body,fragments", [
    (GOOD.replace("labels:", "label:"), ["unknown key 'label'", "did you mean 'labels'", "valid keys"]),
    (GOOD.replace(", test: test.tsv", ""), ["missing key 'files.test'", "or 'folds'"]),  # no dev file: carved
    (GOOD.replace("format: tsv\n", ""), ["missing key 'format'"]),
    (GOOD.replace("test: test.tsv", "test: test.tsv, validation: v.tsv"),
     ["unknown key 'files.validation'", "valid keys under 'files': train, dev, test"]),
    (GOOD.replace("format: tsv", "format: tssv"),
     ["unknown format 'tssv'", "known: bioasq-golden, conll, jsonl, squad, tsv"]),
    (GOOD.replace("format: tsv", "format: jsonl"), ["missing key 'task_type'"]),
    (GOOD + "task_type: relation\n", ["unknown task_type 'relation'", "pair-classification"]),
    (GOOD + "max_length: long\n", ["bad value for 'max_length'"]),
    (GOOD.replace("labels: [pos, neg]\n", ""), ["missing key 'labels'"]),
    (GOOD + "columns: {txt: 0}\n", ["unknown key 'columns.txt'", "valid keys under 'columns'", "text, label"]),
    (GOOD + "fields: {text: sentence}\n", ["fields applies to format jsonl"]),
    (GOOD + "task_type: re\n", ["missing key 'entity_types'"]),
    (GOOD + "task_type: re\nentity_types: [GENE, DISEASE]\n", ["missing key 'negative_label'"]),
    (GOOD + "task_type: re\nentity_types: [GENE, DISEASE]\nnegative_label: none\n",
     ["negative_label 'none' is not in labels ['pos', 'neg']"]),
    (GOOD + "metric: pearson\n", ["metric 'pearson' cannot score task_type classification", "accuracy"]),
    (GOOD + "multi_label: true\ntask_type: qa\n", ["multi_label applies to task_type classification"]),
    (GOOD.replace("format: tsv", "format: jsonl") + "task_type: qa\nheader: true\n", ["header applies to format tsv"]),
    (GOOD.replace("format: tsv", "format: conll") + "task_type: classification\n",
     ["format conll holds tagged tokens"]),
    (GOOD.replace("[pos, neg]", "[yes, no]"), ["labels: YAML reads yes/no", "quote them"]),
    (GOOD + "tagging: iobes\n", ["tagging applies to task_type ner or pico, not classification"]),
])
def test_schema_mistakes_are_one_line_naming_the_file(tmp_path, body, fragments):
    path = write_dataset(tmp_path, "custom-bad", body)
    with pytest.raises(ConfigError) as error:
        register_from_yaml(path)
    message = str(error.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


@pytest.mark.parametrize("name,expected", [
    ('""', "name: '' is not a safe name; use letters, digits, '.', '_' and '-', e.g. my_dataset"),
    ("../../evil/x", "name: '../../evil/x' is not a safe name; use letters, digits, '.', '_' and '-', e.g. evil_x"),
    ("my@fold3", "name: 'my@fold3' is not a safe name; use letters, digits, '.', '_' and '-', e.g. my_fold3"),
])
def test_a_name_that_is_no_safe_folder_or_tag_is_refused(tmp_path, name, expected):
    """A dataset's name ends up in run names, MLflow tags and folders; '@fold' names one of its folds."""
    path = write_dataset(tmp_path, name, file="bad.yaml")
    with pytest.raises(ConfigError) as error:
        register_from_yaml(path)
    assert str(error.value) == f"{path}: {expected}"


JSONL_RE = ("format: jsonl\ntask_type: re\npath: data\nfiles: {train: a.jsonl, dev: a.jsonl, test: a.jsonl}\n"
            "labels: [rel, none]\nnegative_label: none\nfields: {text: sentence}\n")
LINE = {"sentence": "EGFR binds erlotinib.", "label": "rel", "head": [0, 4, "GENE"], "tail": [11, 20, "CHEMICAL"]}


@pytest.mark.parametrize("body,bad_line,fragments", [
    (JSONL_RE, {k: v for k, v in LINE.items() if k != "sentence"}, ["missing field 'sentence' (fields.text)"]),
    (JSONL_RE, {**LINE, "label": "binds"}, ["label 'binds'", "is not in labels ['rel', 'none']"]),
    (JSONL_RE, {**LINE, "tail": [11, 99, "CHEMICAL"]}, ["field 'tail' (fields.tail)", "not inside the text"]),
    (JSONL_RE, {**LINE, "head": {"start": 0, "end": 4}}, ["field 'head' (fields.head)", "expected"]),
    (JSONL_RE + "entity_types: [GENE, CHEMICAL]\n", LINE, ["expected 1 @GENE$", "found 0"]),
    (JSONL_RE.replace("task_type: re", "task_type: ner").replace("labels: [rel, none]\nnegative_label: none\n"
                                                                  "fields: {text: sentence}\n", "labels: [Gene]\n"),
     {"tokens": ["EGFR", "binds"], "tags": ["B", "O"]}, ["untyped tag 'B'", "key 'entity_type'"]),
    (JSONL_RE.replace("task_type: re", "task_type: ner").replace("labels: [rel, none]\nnegative_label: none\n"
                                                                  "fields: {text: sentence}\n", "labels: [Gene]\n"),
     {"tokens": ["EGFR", "binds"], "tags": ["B-Chemical", "O"]}, ["entity type 'Chemical'", "not in labels ['Gene']"]),
])
def test_data_mistakes_name_the_file_the_line_and_the_key(tmp_path, body, bad_line, fragments):
    (tmp_path / "data").mkdir()
    good = json.dumps({"sentence": "@GENE$ binds @CHEMICAL$.", "label": "none"} if "entity_types" in body
                      else LINE if "task_type: re" in body else {"tokens": ["EGFR"], "tags": ["O"]})
    (tmp_path / "data" / "a.jsonl").write_text(f"{good}\n\n{json.dumps(bad_line)}\n")
    yaml = tmp_path / "mistake.yaml"
    yaml.write_text("name: custom-mistake\n" + body)
    spec = register_from_yaml(yaml)
    with pytest.raises(DataFormatError) as error:
        spec.read(None)
    message = str(error.value)
    assert message.startswith(f"{tmp_path / 'data' / 'a.jsonl'}:3: ") and "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_a_conll_line_without_the_tag_column_names_the_columns_key(tmp_path):
    path = write_dataset(tmp_path, "custom-conll", GOOD.replace("format: tsv", "format: conll").replace(
        "[pos, neg]", "[Disease]") + "columns: {token: 0, tag: 2}\n")
    with pytest.raises(DataFormatError, match=r"train\.tsv:1: expected at least 3 columns .*'columns'"):
        register_from_yaml(path).read(None)


# ------------------------------------------------------------------------------------ registry behaviour

def test_a_tsv_file_becomes_a_classification_task(tmp_path):
    spec = register_from_yaml(write_dataset(tmp_path, "custom-tsv"))
    assert get_dataset("custom-tsv") is spec and "custom-tsv" in dataset_names("classification")
    assert (spec.task_type, spec.metric, spec.labels, spec.max_length) == ("classification", "accuracy",
                                                                          ("pos", "neg"), 512)
    assert [x.labels for x in spec.read(None)["dev"]] == [("pos",), ("neg",)]


def test_a_built_in_name_cannot_be_taken(tmp_path):
    builtin = get_dataset("bc5-chem")
    path = write_dataset(tmp_path, "bc5-chem")
    with pytest.raises(ConfigError, match=r"bc5-chem\.yaml: task 'bc5-chem' is already defined"):
        register_from_yaml(path)
    assert get_dataset("bc5-chem") is builtin


def test_the_same_file_again_replaces_its_entry_another_file_may_not(tmp_path):
    first = register_from_yaml(write_dataset(tmp_path, "custom-twice"))
    second = register_from_yaml(tmp_path / "custom-twice.yaml")  # e.g. every run of an experiment
    assert get_dataset("custom-twice") is second is not first
    (tmp_path / "other").mkdir()
    other = write_dataset(tmp_path / "other", "custom-twice")
    with pytest.raises(ConfigError, match="already defined"):
        register_from_yaml(other)
    assert get_dataset("custom-twice") is second


def test_a_label_outside_labels_names_the_data_file_and_line(tmp_path):
    spec = register_from_yaml(write_dataset(tmp_path, "custom-labels", GOOD.replace("[pos, neg]", "[pos]")))
    with pytest.raises(DataFormatError, match=r"train\.tsv:2: label 'neg' \(column 1 \(columns\.label\)\) is "
                                              r"not in labels \['pos'\]"):
        spec.read(None)


# ------------------------------------------------------------------------------------------ fingerprints

def test_the_run_fingerprint_covers_the_dataset_yaml(data_dir, tmp_path):
    """Issue 18: changing max_length (or labels, or the format's keys) in the YAML reused a finished run."""
    from ablations.config import build_config
    from ablations.run.finetune_identity import identify

    yaml = write_dataset(tmp_path, "custom-fp")

    def run_fingerprint() -> str:
        cfg = build_config("micro", [f"datasets=[{yaml}]"], task="custom-fp", data_dir=str(data_dir))
        return identify(cfg).fingerprint

    first = run_fingerprint()
    yaml.write_text(yaml.read_text() + "# a comment changes nothing\nmax_length: 512\n")
    assert run_fingerprint() == first  # the content, normalized: comments and defaults spelled out
    yaml.write_text(yaml.read_text().replace("max_length: 512", "max_length: 128"))
    second = run_fingerprint()
    assert second != first
    yaml.write_text(yaml.read_text().replace("[pos, neg]", "[neg, pos]"))
    assert run_fingerprint() not in (first, second)


# ------------------------------------------------------------------------------------------- micro runs

@pytest.mark.slow
@pytest.mark.parametrize("conversion", ["ner-untyped-conll", "pico-conll", "re-offsets-jsonl", "similarity-jsonl",
                                        "multilabel-jsonl", "qa-jsonl"])
def test_a_micro_run_on_the_user_file_scores_as_the_built_in(conversion, data_dir, tmp_path):
    from ablations.config import build_config
    from ablations.run.finetune import run_finetune

    builtin, user = convert(conversion, data_dir, tmp_path)
    results = []
    for spec in (builtin, user):
        cfg = build_config("micro", ["finetune.max_train_examples=24", "finetune.max_eval_examples=24",
                                     f"datasets=[{tmp_path / (conversion + '.yaml')}]"],
                           task=spec.name, seed=3, data_dir=str(data_dir), work_dir=str(tmp_path / "work"))
        results.append(run_finetune(cfg))
    assert results[0].fingerprint != results[1].fingerprint and not results[1].reused
    assert results[1].test == pytest.approx(results[0].test) and results[1].test
    assert results[1].best_dev == pytest.approx(results[0].best_dev)


def test_a_user_dataset_does_not_change_what_pretraining_leaves_out(data_dir, tmp_path):
    """Pretraining drops the PMIDs of BLURB's evaluation documents; a user dataset registered beside them
    (an experiment's `datasets:`) is not in a pretraining run's fingerprint, so it must not count."""
    from datamodules.pretrain.corpora import evaluation_pmids

    spec = register_from_yaml(write_dataset(tmp_path, "custom-pmids", GOOD + "columns: {id: 0, text: 0, label: 1}\n"))
    for split in SPLITS:
        (tmp_path / "data" / f"{split}.tsv").write_text("99999999\tpos\n")
    assert spec.read(None)["train"][0].id == "99999999"
    assert "99999999" not in evaluation_pmids(data_dir)


# ------------------------------------------------------------------------------------ shapes
# A list where the dataset schema takes a mapping, or the reverse, for every key (cases generated from
# UserDatasetFile by tests/shapes.py: a new key is covered by construction).

DATASET_CASES = list(shapes.cases(UserDatasetFile))


@pytest.mark.parametrize("case", DATASET_CASES, ids=[c.id for c in DATASET_CASES])
def test_a_wrong_container_in_a_dataset_file_is_one_line_naming_the_key(tmp_path, case):
    path = write_dataset(tmp_path, "custom-shapes")
    path.write_text(yaml.safe_dump(shapes.put(yaml.safe_load(path.read_text()), case.path, case.value)))
    with pytest.raises(ConfigError) as error:
        register_from_yaml(path)
    message = str(error.value)
    assert message.startswith(f"{path}: {case.key}: expected ") and message.endswith(f", got {case.got}")
    assert "\n" not in message


def test_a_files_list_is_refused_on_the_command_line_before_any_run(tmp_path, data_dir):
    path = write_dataset(tmp_path, "custom-files", GOOD.replace("{train: train.tsv, dev: dev.tsv, test: test.tsv}",
                                                                "[train.tsv, dev.tsv, test.tsv]"))
    out = bioablate_in_process("finetune", "--task", "custom-files", "--datasets", str(path), "--data-dir",
                               str(data_dir), "--work-dir", str(tmp_path / "work"), cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip() == (
        f"bioablate: error: {path}: files: expected a mapping with keys train, dev, test, got a list")
    assert not (tmp_path / "work" / "mlruns.db").exists()


@pytest.mark.parametrize("max_length", [-5, 0, 7, 100000000000000000000])
def test_a_max_length_no_encoder_can_take_is_refused_before_any_run(tmp_path, data_dir, max_length):
    path = write_dataset(tmp_path, "custom-short", GOOD + f"max_length: {max_length}\n")
    message = f"{path}: max_length = {max_length}: must be >= 8 and <= 8192 (config key max_length)"
    with pytest.raises(ConfigError) as error:
        register_from_yaml(path)
    assert str(error.value) == message
    out = bioablate_in_process("finetune", "--task", "custom-short", "--datasets", str(path), "--data-dir",
                               str(data_dir), "--work-dir", str(tmp_path / "work"), "finetune.max_length=null",
                               cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip() == f"bioablate: error: {message}"
    assert not (tmp_path / "work" / "mlruns.db").exists()

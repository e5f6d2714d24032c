"""Model cards carry the exact command and config, without the paths of the machine that made them; a
fine-tuned model's card carries what the Hub reads (base model, datasets, model-index, the data's licence)
and, for a micro model, a warning that it is plumbing; for a mini one, a note that it is a small-budget model."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from huggingface_hub import ModelCard
from transformers import BertConfig, BertModel, BertTokenizer

from ablations.config import build_config
from ablations.run.card_metadata import base_model, license_metadata
from ablations.run.cards import (
    PretrainFacts,
    Provenance,
    card_part,
    invoked_command,
    pretrain_card,
    shareable_config,
)
from ablations.run.export import save_finetuned
from datamodules.registry import dataset_names, get_dataset
from datamodules.task_kinds import make_encoder
from datamodules.vocabs import resolve_vocab
from lightning_modules.finetune_spec import FinetuneSpec


def test_the_command_keeps_every_setting_but_hides_local_paths():
    argv = ["/home/me/.venv/bin/bioablate", "finetune", "--task", "bc5-chem", "--work-dir", "/home/me/w",
            "--data-dir=/data", "tracking_uri=sqlite:////home/me/m.db", "finetune.lr=1e-5"]
    command = invoked_command(argv)
    assert command.startswith("bioablate finetune --task bc5-chem --work-dir '<local>'")
    assert "finetune.lr=1e-5" in command and "'--data-dir=<local>'" in command
    assert "/home/me" not in command and "/data" not in command


def test_the_config_is_the_resolved_one_minus_local_paths(tmp_path):
    cfg = build_config("micro", ["finetune.lr=3e-5"], task="bc5-chem", data_dir=str(tmp_path / "data"),
                       work_dir=str(tmp_path / "work"))
    written = yaml.safe_load(shareable_config(cfg))
    assert written["finetune"]["lr"] == 3e-5 and written["task"] == "bc5-chem"
    assert written["data_dir"] == written["work_dir"] == "<local>"
    assert str(tmp_path) not in shareable_config(cfg)


# ------------------------------------------------------------------------- a fine-tuned model's card

def _saved_card(task: str, overrides: list[str], profile: str, data_dir: Path, tmp_path: Path,
                metrics: dict[str, float] | None = None) -> tuple[dict, str]:
    """The card a finished run writes (`save_finetuned`, which `bioablate export` copies), for an untrained
    one-layer encoder: (its front matter, the whole text)."""
    cfg = build_config(profile, overrides, task=task, data_dir=str(data_dir), work_dir=str(tmp_path / "work"))
    spec = get_dataset(task)
    tokenizer = BertTokenizer(vocab=str(resolve_vocab("bert-base-uncased", data_dir)))
    task_encoder = make_encoder(spec, tokenizer, 64)
    encoder = BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=64), add_pooling_layer=False)
    choices = FinetuneSpec.from_config(cfg.finetune, spec)
    head = choices.head.build(task_encoder, 32)
    provenance = Provenance("f" * 16, "r" * 32, "sqlite:///x", "c" * 40, cfg)
    metrics = metrics or {"score": 0.8123456, "precision": 0.75, "recall": 0.9, "tp": 9.0}
    out = save_finetuned(tmp_path / "model", encoder, head, task_encoder, choices, cfg, provenance, metrics)
    text = (out / "README.md").read_text(encoding="utf-8")
    return yaml.safe_load(text.split("---")[1]), text


def _config_keys(card: str) -> set[str]:
    """The top-level keys of the config the card's Provenance section shows."""
    block = card.split("Config (resolved")[1].split("```yaml\n")[1].split("```")[0]
    return set(yaml.safe_load(block))


def test_a_fine_tuned_cards_metadata_is_the_hubs(data_dir: Path, tmp_path: Path):
    front, card = _saved_card("bc5-chem", [], "micro", data_dir, tmp_path)
    assert front["datasets"] == ["bc5-chem"] and front["license"] == "cc-by-4.0"  # the data's, not MIT
    assert "base_model" not in front  # a random BERT has none
    assert front["pipeline_tag"] == "token-classification" and "bioablate-micro" in front["tags"]
    (index,) = front["model-index"]
    results = {m["type"]: m["value"] for r in index["results"] for m in r["metrics"]}
    assert results == {"f1": 0.8123, "precision": 0.75, "recall": 0.9}  # counts (tp) are no results
    result = index["results"][0]
    assert result["task"]["type"] == "token-classification"
    assert result["dataset"] == {"name": "bc5-chem", "type": "bc5-chem", "split": "test"}
    # huggingface_hub reads it back as evaluation results: the format the Hub's widget takes
    parsed = ModelCard(card).data.eval_results
    assert [(e.task_type, e.dataset_name, e.metric_type, e.metric_value) for e in parsed][0] == \
        ("token-classification", "bc5-chem", "f1", 0.8123)
    assert "plumbing, not a usable model" in card.split("## Labels")[0]  # the banner, above everything
    keys = _config_keys(card)
    assert {"finetune", "model", "task"} <= keys and not keys & {"pretrain", "launcher"}


def test_a_mini_model_is_called_a_small_budget_model_not_plumbing(data_dir: Path, tmp_path: Path):
    front, card = _saved_card("bc5-chem", [], "mini", data_dir, tmp_path)
    banner = card.split("## Labels")[0]
    assert "a small-budget model" in banner and "`mini` profile" in banner and "plumbing" not in card
    assert "bioablate-mini" in front["tags"]


def test_a_base_profile_model_from_a_hub_id_has_no_banner_and_names_its_base(data_dir: Path, tmp_path: Path):
    front, card = _saved_card("ddi", ["model.name_or_path=dmis-lab/biobert-v1.1@main"], "base", data_dir, tmp_path)
    assert front["base_model"] == "dmis-lab/biobert-v1.1" and "dmis-lab/biobert-v1.1` at revision `main`" in card
    assert front["license"] == "cc-by-nc-4.0" and "plumbing" not in card
    assert not any(tag.startswith("bioablate-") for tag in front["tags"])
    assert ModelCard(card).data.eval_results[0].task_type == "text-classification"


@pytest.mark.parametrize("name_or_path,expected", [
    ("pubmedbert-abstract", "microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract"),  # a named model: its Hub id
    ("random-bert", None), ("general-minilm", None),  # built here; shipped in a package
])
def test_base_model_of_named_models(name_or_path, expected):
    assert base_model(name_or_path)[0] == expected


def test_a_pretraining_runs_folder_is_the_base_model_by_its_name(data_dir: Path, tmp_path: Path):
    folder = tmp_path / "bert-pubmed-wwm-s42-0123abcd"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    facts = PretrainFacts("bert", False, "pubmed", 10, 100, 150, 5, 64, "bert-base-uncased", 30522, True,
                          "scratch", "wwm", 10, 16, {"mlm": 5.0}, 512, True)
    cfg = build_config("micro", [], task="pretrain", data_dir=str(data_dir), work_dir=str(tmp_path))
    (folder / "README.md").write_text(pretrain_card(facts, Provenance("a" * 16, "b" * 32, "x", "c" * 40, cfg)))
    name, sentence = base_model(str(folder))
    assert name == folder.name and "a" * 16 in sentence and "b" * 32 in sentence
    assert str(tmp_path) not in sentence  # the folder's name, not where it lies
    (folder / "README.md").write_text("---\ntags: [bert]\n---\n# someone else's model\n")
    assert base_model(str(folder))[0] is None


@pytest.mark.parametrize("task,licence", [
    ("jnlpba", {"license": "other", "license_name": "genia-project-license",
                "data_licenses": ["genia-project-license"]}),  # not a licence the Hub knows
    ("ebm-pico", {"license": "unknown"}),  # none stated
    ("hoc", {"license": "gpl-3.0"}),
])
def test_the_licence_is_the_datas(task, licence):
    assert license_metadata(get_dataset(task).licenses) == licence


def test_several_licences_are_other_with_their_list():
    assert license_metadata(("gpl-3.0", "cc-by-4.0", "gpl-3.0")) == {
        "license": "other", "license_name": "cc-by-4.0-and-gpl-3.0", "data_licenses": ["cc-by-4.0", "gpl-3.0"]}


def test_every_blurb_dataset_states_its_licence_or_that_there_is_none():
    """Each BLURB dataset's licence as MANIFEST.md gives it; the two that state none say so in the card."""
    stated = {name: get_dataset(name).licenses for name in dataset_names()}
    assert {name for name, licences in stated.items() if not licences} == {"ebm-pico", "chemprot"}
    assert stated["bc5-chem"] == stated["gad"] == ("cc-by-4.0",) and stated["ddi"] == ("cc-by-nc-4.0",)


@pytest.mark.parametrize("tagging, named", [
    ("bioul", "Tags use the IOBES (in BILOU's letters: L- for IOBES' E-, U- for its S-; config value `bioul`) scheme"),
    ("bio", "Tags use the BIO scheme"), ("io", "Tags use the IO scheme")])
def test_a_tagging_models_card_names_its_scheme_as_corpora_do(tagging, named):
    """A user with IOBES files read `bioul` and took it for another scheme: the card says IOBES."""
    meta = {"output_kind": "token", "subtoken_labels": "first", "max_length": 128, "tagging": tagging}
    assert named in card_part(meta).inputs(meta)

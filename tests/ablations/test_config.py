"""The run config (ablations/config.py): every numeric key's range checked when the config is built, before
any run exists; command-line paths taken as strings; the data and work directories checked."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from ablations.cli import main
from ablations.config import PROFILES, RunConfig, build_config, fingerprint, merge_file, profile_path
from ablations.places import resolve_data_dir, resolve_work_dir
from ablations.run.pretrain_identity import pretrain_fingerprint
from bioablate_core.errors import ConfigError
from bioablate_core.schema import RANGE, load_yaml
from tests import shapes
from tests.cli import bioablate_in_process

# (override, the message it must give): every case the hostile-user pass found, and the range neighbours
OUT_OF_RANGE = [
    ("finetune.epochs=-1", "finetune.epochs = -1: must be >= 1 and <= 1000 (config key finetune.epochs)"),
    ("finetune.epochs=0", "finetune.epochs = 0: must be >= 1"),
    ("finetune.epochs=1001", "finetune.epochs = 1001: must be >= 1 and <= 1000"),
    ("finetune.lr=nan", "finetune.lr = nan: must be a finite number (config key finetune.lr)"),
    ("finetune.lr=inf", "finetune.lr = inf: must be a finite number (config key finetune.lr)"),
    ("finetune.dropout=-inf", "finetune.dropout = -inf: must be a finite number"),
    ("finetune.batch_size=0", "finetune.batch_size = 0: must be >= 1"),
    ("finetune.eval_batch_size=0", "finetune.eval_batch_size = 0: must be >= 1"),
    ("finetune.lr=-1", "finetune.lr = -1.0: must be > 0"),
    ("finetune.lr=0", "finetune.lr = 0.0: must be > 0"),
    ("finetune.dropout=2", "finetune.dropout = 2.0: must be >= 0 and < 1"),
    ("finetune.warmup_ratio=1.5", "finetune.warmup_ratio = 1.5: must be >= 0 and <= 1"),
    ("finetune.max_length=2", "finetune.max_length = 2: must be >= 8"),
    ("finetune.max_train_examples=0", "finetune.max_train_examples = 0: must be >= 1"),
    ("finetune.alum.steps=0", "finetune.alum.steps = 0: must be >= 1"),
    ("pretrain.seq_len=2", "pretrain.seq_len = 2: must be >= 8"),
    # lengths bounded before anything is allocated for them (an attention matrix of hundreds of GB)
    ("finetune.max_length=100000000000000000000", "finetune.max_length = 100000000000000000000: must be >= 8 and "
                                                  "<= 8192"),
    ("pretrain.seq_len=100000", "pretrain.seq_len = 100000: must be >= 8 and <= 8192"),
    ("model.max_position_embeddings=1000000000", "model.max_position_embeddings = 1000000000: must be >= 8 and "
                                                 "<= 8192"),
    ("pretrain.max_words=0", "pretrain.max_words = 0: must be >= 1000"),
    ("pretrain.mask_rate=1", "pretrain.mask_rate = 1.0: must be > 0 and < 1"),
    ("pretrain.max_steps=0", "pretrain.max_steps = 0: must be >= 1"),
    ("pretrain.generator_size=0", "pretrain.generator_size = 0.0: must be > 0 and <= 1"),
    ("model.num_layers=0", "model.num_layers = 0: must be >= 1"),
    ("trainer.num_workers=-1", "trainer.num_workers = -1: must be >= 0"),
    ("seed=-1", "seed = -1: must be >= 0 and < 4294967296"),
]


@pytest.mark.parametrize("override,message", OUT_OF_RANGE, ids=[o for o, _ in OUT_OF_RANGE])
def test_an_out_of_range_value_is_one_error_naming_key_and_range(override, message):
    with pytest.raises(ConfigError) as error:
        build_config("micro", [override], task="gad")
    assert str(error.value).startswith(f"overrides: {message}")


def test_values_at_the_edges_of_their_ranges_are_accepted():
    cfg = build_config("micro", ["finetune.epochs=1", "finetune.dropout=0", "finetune.warmup_ratio=1",
                                 "pretrain.generator_size=1", "pretrain.max_words=1000", "seed=0"], task="gad")
    assert cfg.finetune.epochs == 1 and cfg.pretrain.generator_size == 1


def _numeric(annotation) -> bool:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return annotation in (int, float) or (typing.get_origin(annotation) is typing.Union and
                                          len(args) == 1 and args[0] in (int, float))


def _numeric_fields(schema: type, prefix: str = ""):
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        if dataclasses.is_dataclass(hints[f.name]):
            yield from _numeric_fields(hints[f.name], f"{prefix}{f.name}.")
        elif _numeric(hints[f.name]):
            yield f"{prefix}{f.name}", f


def test_every_numeric_key_declares_its_range():
    keys = dict(_numeric_fields(RunConfig))
    assert len(keys) > 40  # the walk reaches the nested sections
    unbounded = [key for key, f in keys.items() if RANGE not in f.metadata]
    assert unbounded == []


def _float_keys(schema: type, prefix: str = ""):
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        if dataclasses.is_dataclass(hints[f.name]):
            yield from _float_keys(hints[f.name], f"{prefix}{f.name}.")
        elif float in (hints[f.name], *typing.get_args(hints[f.name])):
            yield f"{prefix}{f.name}"


@pytest.mark.parametrize("key", list(_float_keys(RunConfig)))
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_no_float_key_takes_nan_or_infinity(key, value):
    """nan passes every comparison and inf a lower bound: every float key of the schema refuses both."""
    with pytest.raises(ConfigError) as error:
        build_config("micro", [f"{key}={value}"], task="gad")
    assert str(error.value) == f"overrides: {key} = {value}: must be a finite number (config key {key})"


def test_the_command_line_refuses_a_range_before_any_run_exists(capsys, tmp_path, data_dir):
    code = main(["finetune", "--task", "gad", "--data-dir", str(data_dir), "--work-dir", str(tmp_path),
                 "finetune.epochs=-1"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == ("bioablate: error: overrides: finetune.epochs = -1: must be >= 1 and <= 1000 "
                                 "(config key finetune.epochs)")
    assert not (tmp_path / "mlruns.db").exists()


def test_max_length_above_the_models_positions_is_refused_naming_the_maximum(capsys, tmp_path, data_dir):
    code = main(["finetune", "--task", "gad", "--data-dir", str(data_dir), "--work-dir", str(tmp_path),
                 "finetune.max_length=1024"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "finetune.max_length = 1024: above the maximum input length of model 'random-bert' (512" in err
    assert not (tmp_path / "mlruns.db").exists()


def test_vocab_train_refuses_a_tiny_vocabulary_before_reading_the_corpus(capsys, tmp_path, data_dir):
    code = main(["vocab", "train", "--size", "0", "--out", str(tmp_path / "v"), "--data-dir", str(data_dir)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == ("bioablate: error: --size 0: a vocabulary needs at least 100 entries (the "
                                 "special tokens, an alphabet and its ## continuations)")
    code = main(["vocab", "train", "--max-words", "0", "--out", str(tmp_path / "v"), "--data-dir", str(data_dir)])
    assert code == 2 and "pretrain.max_words = 0: must be >= 1000" in capsys.readouterr().err
    assert not (tmp_path / "v").exists()


def test_command_line_paths_are_strings_never_yaml(tmp_path):
    # a dataset file whose name reads as YAML (the name checks register it as the config is built)
    dataset = tmp_path / "my data: 1.yaml"
    dataset.write_text("name: my-data\npath: .\nfiles: {train: train.tsv, test: test.tsv}\nformat: tsv\ntask_type: re\n"
                       "labels: ['0', '1']\npositive_label: '1'\nentity_types: [GENE, DISEASE]\n")
    cfg = build_config("micro", [], task="gad", work_dir="runs: v2", data_dir="[a, b]", tracking_uri="x: {y: 1}",
                       datasets=[str(dataset)])
    assert cfg.work_dir == "runs: v2" and cfg.data_dir == "[a, b]" and cfg.tracking_uri == "x: {y: 1}"
    assert list(cfg.datasets) == [str(dataset)]


@pytest.mark.parametrize("override, key, value", [
    ("launcher.time=4:00:00", "launcher.time", "4:00:00"),  # YAML 1.1 reads 4:00:00 as sexagesimal 14400
    ("launcher.time=1:30", "launcher.time", "1:30"),
    ("launcher.partition=123", "launcher.partition", "123"),
    ("pretrain.init=1e3", "pretrain.init", "1e3"),  # YAML reads 1000.0
    ("launcher.partition=null", "launcher.partition", None),  # an Optional string unset, as YAML says
    ("finetune.lr=3e-5", "finetune.lr", 3e-5),  # a number where the schema types one
])
def test_a_string_key_keeps_the_text_of_its_override(override, key, value):
    assert OmegaConf.select(build_config("micro", [override], task="gad"), key) == value


def test_a_data_dir_that_is_a_file_says_so(tmp_path):
    path = tmp_path / "data.tsv"
    path.write_text("x")
    with pytest.raises(ConfigError, match=f"data directory {path} is a file, expected the folder"):
        resolve_data_dir(str(path))


def test_an_unwritable_work_dir_is_one_error_before_anything_runs(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    cfg = build_config("micro", [], task="gad", work_dir=str(blocker / "work"))
    with pytest.raises(ConfigError, match=f"work directory {blocker / 'work'} is not usable: "):
        resolve_work_dir(cfg)


@pytest.mark.parametrize("under", [False, True], ids=["the-file", "under-the-file"])
def test_a_work_dir_that_is_a_file_says_so_not_free_space(tmp_path, under):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    work = blocker / "work" if under else blocker
    with pytest.raises(ConfigError) as error:
        resolve_work_dir(build_config("micro", [], task="gad", work_dir=str(work)))
    assert str(error.value) == (f"work directory {work} is not usable: a file is in its place (or in the place of a "
                                "folder above it), not a folder; give a folder (from --work-dir, work_dir or "
                                "BIOABLATE_WORK)")


def test_a_work_dir_that_cannot_be_made_is_not_called_full():
    cannot = Path("/proc/bioablate-work")  # procfs: mkdir there fails (No such file or directory), root included
    with pytest.raises(ConfigError) as error:
        resolve_work_dir(build_config("micro", [], task="gad", work_dir=str(cannot)))
    assert str(error.value) == (f"work directory {cannot} is not usable: No such file or directory; pick another "
                                "folder (from --work-dir, work_dir or BIOABLATE_WORK)")


def test_a_read_only_work_dir_says_it_is_read_only_not_full():
    read_only = Path("/sys/bioablate-work")  # sysfs: no one, root included, creates files or folders there
    cfg = build_config("micro", [], task="gad", work_dir=str(read_only))
    with pytest.raises(ConfigError) as error:
        resolve_work_dir(cfg)
    message = str(error.value)
    assert message.startswith(f"work directory {read_only} is not usable: ") and "free space" not in message
    assert message.endswith(": it is read-only for this user; pick a writable folder (from --work-dir, work_dir or "
                            "BIOABLATE_WORK)")


def test_vocab_train_refuses_an_out_it_cannot_write_before_reading_the_corpus(capsys, tmp_path, data_dir):
    taken = tmp_path / "vocab.txt"
    taken.write_text("not a folder")
    code = main(["vocab", "train", "--out", str(taken), "--data-dir", str(data_dir)])
    assert code == 2 and capsys.readouterr().err.strip() == (
        f"bioablate: error: --out {taken} is a file; name a folder (it is created if missing)")
    unwritable = Path("/proc/self/bioablate-vocab")  # no one, root included, creates folders under /proc
    code = main(["vocab", "train", "--out", str(unwritable), "--data-dir", str(data_dir)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith(f"bioablate: error: --out {unwritable}: cannot write there ("), err


# ---- shapes: every key of a `--config` file or a profile, a list for a mapping and the reverse (generated
# from RunConfig by tests/shapes.py, so a new key is covered by construction)

SHAPE_CASES = list(shapes.cases(RunConfig))


@pytest.mark.parametrize("case", SHAPE_CASES, ids=[c.id for c in SHAPE_CASES])
def test_a_config_file_with_a_wrong_container_is_one_line_naming_the_file_and_key(tmp_path, case):
    path = tmp_path / "layer.yaml"
    path.write_text(yaml.safe_dump(shapes.put({}, case.path, case.value)))
    with pytest.raises(ConfigError) as error:
        build_config("micro", [], config_files=[path], task="gad")
    message = str(error.value)
    assert message.startswith(f"{path}: {case.key}: expected ") and message.endswith(f", got {case.got}")
    assert "\n" not in message


@pytest.mark.parametrize("case", SHAPE_CASES, ids=[c.id for c in SHAPE_CASES])
def test_a_profile_with_a_wrong_container_is_one_line_naming_the_profile_file(tmp_path, case):
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(shapes.put(OmegaConf.to_container(load_yaml(profile_path("micro"))), case.path,
                                              case.value)))
    with pytest.raises(ConfigError) as error:
        merge_file(OmegaConf.structured(RunConfig), path, "profile 'mine'")
    assert str(error.value).startswith(f"profile 'mine' ({path}): {case.key}: expected ")
    assert str(error.value).endswith(f", got {case.got}")


@pytest.mark.parametrize("profile", PROFILES)
def test_the_packaged_profiles_have_the_right_shapes(profile):
    assert build_config(profile, [], task="gad").profile == profile


def test_the_command_line_names_a_config_file_with_a_list_for_a_section(tmp_path, data_dir):
    layer = tmp_path / "best.yaml"
    layer.write_text("finetune: [1, 2]\n")
    out = bioablate_in_process("finetune", "--task", "gad", "--config", str(layer), "--data-dir", str(data_dir),
                               "--work-dir", str(tmp_path / "work"), cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip() == (
        f"bioablate: error: {layer}: finetune: expected a mapping with keys lr, batch_size, eval_batch_size, "
        "epochs, warmup_ratio, weight_decay, dropout, max_length, max_train_examples, max_eval_examples, "
        "tagging, head, subtoken_labels, re_input, re_feature, classifier, qa_stride, max_answer_length, qa_merge, "
        "bucketing, cache_tokenized, static_shapes, adversarial, alum, class_weights, got a list")
    assert not (tmp_path / "work" / "mlruns.db").exists()


# ---- model.resize_embeddings: a key added after runs existed leaves their fingerprints as they were


def test_resize_embeddings_changes_no_fingerprint():
    cfg = build_config("micro", [], task="gad")
    before_the_key = OmegaConf.create(OmegaConf.to_container(cfg))
    del before_the_key.model["resize_embeddings"]  # a config as built before the key existed
    assert fingerprint(cfg, "data") == fingerprint(before_the_key, "data")
    allowed = build_config("micro", ["model.resize_embeddings=true"], task="gad")
    assert fingerprint(allowed, "data") == fingerprint(cfg, "data")  # it permits a run, it changes none
    assert fingerprint(build_config("micro", ["model.hidden_size=128"], task="gad"), "data") != \
        fingerprint(cfg, "data")  # a model key that changes the result still counts
    vocab = profile_path("micro")  # any file: the fingerprints compare the configs
    assert pretrain_fingerprint(allowed, "corpus", vocab, "scratch") == \
        pretrain_fingerprint(before_the_key, "corpus", vocab, "scratch")


# ------------------------------------------------------------------ one rule for both fingerprints

def test_every_schema_field_says_which_runs_results_it_decides():
    """Each field of the schema carries its mark (`ablations.config.ft`, `both`, ...) in its metadata; a field
    without one fails as soon as its class's marks are read (the config module reads them all on import)."""
    from ablations.config import FINETUNE_RUN, ft, result_keys
    from bioablate_core.identity import MARK

    def schema_classes(cls: type) -> list[type]:
        out = [cls]
        for f in dataclasses.fields(cls):
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            if dataclasses.is_dataclass(default):
                out += schema_classes(type(default))
        return out

    for cls in schema_classes(RunConfig):
        assert all(MARK in f.metadata for f in dataclasses.fields(cls)), cls.__name__

    @dataclasses.dataclass
    class Grown:
        lr: float = ft(1.0)
        added: int = 0

    with pytest.raises(TypeError, match=r"Grown: unmarked fields \['added'\]"):
        result_keys(FINETUNE_RUN, Grown)


# Fingerprints as this version computes them: a change here recomputes every user's store, so it comes
# with a version bump and a CHANGELOG line.
PINNED_FINETUNE = {
    "micro-gad": ("micro", [], "gad", "bd995c0a7d714e51", "1afa4ff773dafc1a"),
    "mini-chemprot-markers": ("mini", ["finetune.re_input=markers", "finetune.re_feature=entity-start",
                                       "trainer.compile=true", "keep_checkpoints=true", "launcher.partition=gpu"],
                              "chemprot", "21aa48feaf536b41", "054963935a9af290"),
    "base-bc5-crf-alum": ("base", ["finetune.head=crf", "finetune.adversarial=true", "finetune.alum.alpha=2",
                                   "pretrain.max_steps=7", "model.resize_embeddings=true",
                                   "launcher.sbatch={constraint: a100}"], "bc5-chem", "89acaeb6dc2fa85a",
                          "711025f4d63f84e8"),
}
PINNED_PRETRAIN = {
    "micro": ("micro", ["pretrain.max_steps=30", "pretrain.checkpoint_every=10"], "0d88d97adf2fe5e8",
              "302804652f94e9d9"),
    "mini-electra-alum": ("mini", ["pretrain.objective=electra", "pretrain.adversarial=true", "pretrain.alum.steps=2",
                                   "finetune.lr=1", "trainer.precision=bf16-mixed", "trainer.compile=true"],
                          "ddbe53d502b28fcd", "670ba1e804664463"),
    "continual": ("mini", ["pretrain.init=general-minilm", "pretrain.masking=wordpiece"], "170334f201625e81",
                  "b3170b4a31d2948d"),
}


@pytest.mark.parametrize("name", PINNED_FINETUNE)
def test_finetune_fingerprints_are_pinned(name):
    from ablations.config import fingerprint

    profile, overrides, task, plain, by_content = PINNED_FINETUNE[name]
    cfg = build_config(profile, overrides, task=task, work_dir="/x" if "markers" in name else None,
                       tracking_uri="sqlite:///y.db" if "markers" in name else None)
    assert fingerprint(cfg, "DATA") == plain
    assert fingerprint(cfg, "DATA", exclude=["model.name_or_path", "model.vocab"]) == by_content


@pytest.mark.parametrize("name", PINNED_PRETRAIN)
def test_pretrain_fingerprints_are_pinned(name, data_dir):
    profile, overrides, scratch, continual = PINNED_PRETRAIN[name]
    cfg = build_config(profile, overrides, task="pretrain")
    vocab = data_dir / "vocab" / "bert-base-uncased" / "vocab.txt"
    assert pretrain_fingerprint(cfg, "CORPUS", vocab, "scratch") == scratch
    assert pretrain_fingerprint(cfg, "CORPUS", vocab, "INITFP") == continual


@pytest.mark.parametrize("key", ["pretrain.packing", "pretrain.master_weights", "pretrain.fused_qkv"])
def test_a_speed_choice_that_changes_the_numbers_is_part_of_the_pretraining_fingerprint(key, data_dir):
    """On, the run is another pretraining run; fine-tuning never reads them."""
    from ablations.config import fingerprint

    vocab = data_dir / "vocab" / "bert-base-uncased" / "vocab.txt"
    base = build_config("micro", [], task="pretrain")
    on = build_config("micro", [f"{key}=true"], task="pretrain")
    assert pretrain_fingerprint(on, "C", vocab, "scratch") != pretrain_fingerprint(base, "C", vocab, "scratch")
    assert fingerprint(on, "D") == fingerprint(base, "D")


def test_a_key_that_decides_no_result_leaves_both_fingerprints_alone(data_dir):
    from ablations.config import FINETUNE_RESULT_KEYS, NON_RESULT_KEYS, PRETRAIN_RESULT_KEYS, fingerprint

    vocab = data_dir / "vocab" / "bert-base-uncased" / "vocab.txt"
    base = build_config("micro", [], task="gad")
    for key, value in (("trainer.compile", "true"), ("trainer.log_every_n_steps", "3"), ("keep_model", "false"),
                       ("launcher.nodes", "4")):
        assert key in NON_RESULT_KEYS and key not in PRETRAIN_RESULT_KEYS
        cfg = build_config("micro", [f"{key}={value}"], task="gad")
        assert fingerprint(cfg, "D") == fingerprint(base, "D")
        assert pretrain_fingerprint(cfg, "C", vocab, "scratch") == pretrain_fingerprint(base, "C", vocab, "scratch")
    # and one that decides both changes both
    cfg = build_config("micro", ["trainer.precision=bf16-mixed"], task="gad")
    assert "trainer.precision" in FINETUNE_RESULT_KEYS & PRETRAIN_RESULT_KEYS
    assert fingerprint(cfg, "D") != fingerprint(base, "D")
    assert pretrain_fingerprint(cfg, "C", vocab, "scratch") != pretrain_fingerprint(base, "C", vocab, "scratch")


def test_static_shapes_are_part_of_a_finetuning_fingerprint_only_when_on():
    from ablations.config import fingerprint

    profile, overrides, task, plain, _ = PINNED_FINETUNE["micro-gad"]
    off = build_config(profile, [*overrides, "finetune.static_shapes=false"], task=task)
    assert fingerprint(off, "DATA") == plain  # stored runs keep theirs
    on = build_config(profile, [*overrides, "finetune.static_shapes=true"], task=task)
    assert fingerprint(on, "DATA") != plain  # other dropout draws: another run

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import pytest
import yaml

from bioablate_core.errors import ConfigError
from bioablate_core.schema import bounded, check_ranges, defaults, describe, load, load_yaml, merge, schema_at, validate
from tests import shapes


@dataclass
class Axis:
    key: str = ""
    values: list = field(default_factory=list)


@dataclass
class Table:
    rows: str = "task"
    columns: str = "variant"


@dataclass
class Experiment:
    name: str = ""
    seeds: int = 1
    table: Table = field(default_factory=Table)
    vary: Dict[str, Axis] = field(default_factory=dict)
    baseline: Optional[Table] = None


def test_schema_at_follows_nested_dataclasses_and_named_entries():
    assert schema_at(Experiment, []) is Experiment
    assert schema_at(Experiment, ["table"]) is Table
    assert schema_at(Experiment, ["vary", "tagging"]) is Axis
    assert schema_at(Experiment, ["baseline"]) is Table
    assert schema_at(Experiment, ["vary"]) is None
    assert schema_at(Experiment, ["name"]) is None


def test_valid_file_loads_with_defaults(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text("name: x\nvary:\n  tagging: {key: finetune.tagging, values: [bio, io]}\n")
    cfg = load(path, Experiment)
    assert cfg.name == "x" and cfg.seeds == 1 and cfg.vary.tagging["values"] == ["bio", "io"]


@pytest.mark.parametrize("text, message", [
    ("nmae: x\n", "unknown key 'nmae' (did you mean 'name'?); valid keys at the top level: name, seeds, table"),
    ("table: {rosw: task}\n", "unknown key 'table.rosw' (did you mean 'rows'?); valid keys under 'table': rows"),
    ("vary: {t: {key: a, valeus: [1]}}\n",
     "unknown key 'vary.t.valeus' (did you mean 'values'?); valid keys under 'vary.t': key, values"),
    ("seeds: many\n", "bad value for 'seeds'"),
    ("- a\n- b\n", "expected a mapping of keys at the top level"),
    ("a: [1\n", "not valid YAML"),
])
def test_every_mistake_is_one_line_naming_the_file_and_key(tmp_path, text, message):
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        load(path, Experiment)
    assert message in str(error.value) and str(error.value).startswith(str(path)) and "\n" not in str(error.value)


def test_missing_undecodable_and_directory_files_are_one_line(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_yaml(tmp_path / "nope.yaml")
    (tmp_path / "latin1.yaml").write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_yaml(tmp_path / "latin1.yaml")
    with pytest.raises(ConfigError, match="is a directory"):
        load_yaml(tmp_path)


@dataclass
class _Documented:
    """A schema whose comments document its keys."""

    # the learning rate (a comment above the field)
    lr: float = 1e-3
    steps: int = 10  # optimizer steps (a comment beside it wins over one above)
    note: Optional[str] = "# not a comment"
    inner: Table = field(default_factory=Table)


def test_describe_gives_every_leaf_key_its_type_and_comment():
    rows = {key: (kind, text) for key, kind, text in describe(_Documented)}
    assert rows == {
        "lr": ("float", "the learning rate (a comment above the field)"),
        "steps": ("int", "optimizer steps (a comment beside it wins over one above)"),
        "note": ("str | None", ""),
        "inner.rows": ("str", ""),
        "inner.columns": ("str", ""),
    }


@dataclass
class Bounded:
    steps: int = bounded(1, ge=1)
    rate: float = bounded(0.5, gt=0, lt=1)
    cap: Optional[int] = bounded(None, ge=10)
    inner: Dict[str, Table] = field(default_factory=dict)


@pytest.mark.parametrize("raw, message", [
    ({"steps": 0}, "x.yaml: steps = 0: must be >= 1 (config key steps)"),
    ({"rate": 1.0}, "x.yaml: rate = 1.0: must be > 0 and < 1 (config key rate)"),
    ({"cap": 9}, "x.yaml: cap = 9: must be >= 10 (config key cap)"),
])
def test_a_bounded_key_outside_its_range_is_one_error(raw, message):
    with pytest.raises(ConfigError) as error:
        validate("x.yaml", raw, Bounded)
    assert str(error.value) == message


@dataclass
class Weighted:
    weight: float = 1.0  # no range: still a finite number
    rate: Optional[float] = bounded(0.5, gt=0, lt=1)


@pytest.mark.parametrize("raw, message", [
    ({"weight": float("nan")}, "x.yaml: weight = nan: must be a finite number (config key weight)"),
    ({"weight": float("inf")}, "x.yaml: weight = inf: must be a finite number (config key weight)"),
    ({"rate": float("nan")}, "x.yaml: rate = nan: must be a finite number (config key rate)"),
    ({"rate": float("-inf")}, "x.yaml: rate = -inf: must be a finite number (config key rate)"),
])
def test_nan_and_infinity_are_refused_for_every_float_key(raw, message):
    with pytest.raises(ConfigError) as error:
        validate("x.yaml", raw, Weighted)
    assert str(error.value) == message


def test_bounded_keys_inside_their_range_and_unset_optionals_pass():
    cfg = validate("x.yaml", {"steps": 5, "rate": 0.1, "cap": None}, Bounded)
    assert cfg.steps == 5 and cfg.cap is None
    check_ranges("x", Bounded, {"steps": 1, "unrelated": -5})


# ---- shapes: a list where a mapping belongs, or the reverse, at any depth (cases from tests/shapes.py)


@dataclass
class Shaped:
    name: str = ""
    table: Table = field(default_factory=Table)
    vary: Dict[str, Axis] = field(default_factory=dict)
    order: List[str] = field(default_factory=list)
    paper: Dict[str, Dict[str, float]] = field(default_factory=dict)
    loose: Any = None  # anything goes: no case
    extra: dict = field(default_factory=dict)


@pytest.mark.parametrize("case", shapes.cases(Shaped), ids=lambda c: c.id)
def test_a_wrong_container_anywhere_is_one_line_naming_the_key(tmp_path, case):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(shapes.put({"name": "x"}, case.path, case.value)))
    with pytest.raises(ConfigError) as error:
        load(path, Shaped)
    message = str(error.value)
    assert message.startswith(f"{path}: {case.key}: expected ") and message.endswith(f", got {case.got}")
    assert "\n" not in message


def test_the_generated_cases_reach_every_depth():
    keys = {c.key for c in shapes.cases(Shaped)}
    assert {"table", "table.rows", "vary.entry", "vary.entry.values", "order[0]", "paper.entry.entry",
            "extra"} <= keys and not any(k.startswith("loose") for k in keys)


@pytest.mark.parametrize("text, message", [
    ("vary: {head: [linear, bilstm]}\n",
     "exp.yaml: vary.head: expected a mapping with keys key, values, got a list"),
    ("table: [rows, task]\n", "exp.yaml: table: expected a mapping with keys rows, columns, got a list"),
    ("table: task\n", "exp.yaml: table: expected a mapping with keys rows, columns, got 'task'"),
    ("order: {a: 1}\n", "exp.yaml: order: expected a list of strings, got a mapping"),
    ("order: [a, {b: 1}]\n", "exp.yaml: order[1]: expected a string, got a mapping"),
    ("paper: {gad: [1, 2]}\n", "exp.yaml: paper.gad: expected a mapping of names, each a number, got a list"),
    ("vary: [a, b]\n", "exp.yaml: vary: expected a mapping of names, each a mapping with keys key, values, "
                       "got a list"),
    ("order: ${extra.names}\nextra: {names: [a]}\n", None),  # an interpolation: OmegaConf resolves it
])
def test_shape_messages_say_what_fits(tmp_path, text, message):
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    if message is None:
        load(path, Shaped)
        return
    with pytest.raises(ConfigError) as error:
        load(path, Shaped)
    assert str(error.value) == f"{tmp_path}/{message}"


def test_a_list_on_a_mapping_under_an_open_key_names_the_key():
    """`extra: dict` takes any entries; a later layer putting a list on an earlier layer's mapping there is
    OmegaConf's TypeError, named here."""
    base = merge(Shaped, "first.yaml", {"extra": {"constraint": {"gpu": "a100"}}})
    with pytest.raises(ConfigError) as error:
        merge(Shaped, "second.yaml", {"extra": {"constraint": ["a100"]}}, base=base)
    assert str(error.value) == "second.yaml: extra.constraint: expected a mapping, got a list"


def test_a_mapping_on_a_list_under_an_open_key_names_the_key_too():
    base = merge(Shaped, "first.yaml", {"extra": {"setup": ["module load cuda"]}})
    with pytest.raises(ConfigError) as error:
        merge(Shaped, "second.yaml", {"extra": {"setup": {"cuda": 12}}}, base=base)
    assert str(error.value) == "second.yaml: extra.setup: expected a list, got a mapping"


def test_schema_defaults_are_fresh_copies_with_the_schema_s_checks():
    """`defaults` hands out copies of one cached config: what a caller changes never reaches the next."""
    from omegaconf import OmegaConf
    from omegaconf.errors import ValidationError

    from ablations.config import RunConfig

    first = defaults(RunConfig)
    assert OmegaConf.to_yaml(first) == OmegaConf.to_yaml(OmegaConf.structured(RunConfig))
    first.finetune.lr = 123.0
    first.finetune.class_weights = {"a": 2.0}
    second = defaults(RunConfig)
    assert second.finetune.lr != 123.0 and second.finetune.class_weights != {"a": 2.0}
    with pytest.raises(ValidationError):  # still typed by the schema
        second.finetune.lr = "fast"


@pytest.mark.parametrize("given, named", [(2, "2"), (1, "1"), (0, "0"), ("yes", "'yes'"), ("on", "'on'")])
def test_a_boolean_key_takes_true_or_false_only(given, named):
    """OmegaConf turns 2 (any non-zero number) and the strings "yes"/"on" into true: a typo'd value would
    switch a setting on in silence."""
    from ablations.config import RunConfig

    with pytest.raises(ConfigError) as error:
        merge(RunConfig, "cli", {"finetune": {"bucketing": given}})
    assert str(error.value) == f"cli: finetune.bucketing: expected true or false, got {named}"
    for spelled, value in ((False, False), (True, True), ("false", False), ("True", True)):
        assert merge(RunConfig, "cli", {"finetune": {"bucketing": spelled}}).finetune.bucketing is value

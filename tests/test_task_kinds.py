"""Every task kind has every part (datamodules/task_kinds.py): the data layer's encoder, and the head, export,
card and predict parts the upper layers attach; every registered dataset resolves to a kind. A kind
missing a part fails here, before the slow conformance walk (tests/test_conformance.py) trains it."""

from __future__ import annotations

import pytest

import ablations.run.cards  # noqa: F401  (each upper layer attaches its part of the built-in kinds)
import ablations.run.export  # noqa: F401
import ablations.run.predict  # noqa: F401
import lightning_modules.heads  # noqa: F401
from ablations.run.cards import SEQUENCE_INPUTS
from ablations.run.predict_inputs import INPUT_FORMS, read_inputs
from bioablate_core.errors import DataFormatError
from datamodules.custom.records import _Builder
from datamodules.custom.schema import KINDS
from datamodules.registry import dataset_names, get_dataset
from datamodules.task_kinds import TASK_KINDS, kind_name
from datamodules.task_types import TASK_TYPES

PARTS = ("head", "export", "card", "predict")


@pytest.mark.parametrize("kind", list(TASK_KINDS))
@pytest.mark.parametrize("layer", PARTS)
def test_every_kind_has_every_layers_part(kind, layer):
    assert callable(TASK_KINDS.get(kind).encoder)
    assert TASK_KINDS.part(kind, layer) is not None


def test_a_kind_without_a_part_is_named():
    entry = TASK_KINDS.get("token")
    TASK_KINDS.register("partial", type(entry)(encoder=entry.encoder))
    try:
        with pytest.raises(LookupError, match="task kind 'partial' has no export part"):
            TASK_KINDS.part("partial", "export")
    finally:
        TASK_KINDS.unregister("partial")


def test_every_dataset_has_a_kind_and_every_kind_a_dataset():
    kinds = {name: kind_name(get_dataset(name)) for name in dataset_names()}
    assert set(kinds.values()) == set(TASK_KINDS)
    assert kinds["hoc"] == "multilabel" and kinds["biosses"] == "regression" and kinds["bc5-chem"] == "token"
    assert kinds["bioelectra-rerank"] == "ranking" and kinds["bioasq-6b-factoid"] == "span"
    assert kinds["chemprot"] == kinds["pubmedqa"] == "classification"


@pytest.mark.parametrize("task_type", list(TASK_TYPES))
def test_every_task_type_is_a_kind_with_inputs_every_layer_reads(task_type):
    """A task type's kind is registered, its input form has a `predict` reader (and, for one output per
    example, a card text), and each of its user-dataset forms builds an instance of a known input form."""
    entry = TASK_TYPES.get(task_type)
    assert entry.kind in TASK_KINDS and entry.inputs in INPUT_FORMS
    assert not entry.sequence or entry.inputs in SEQUENCE_INPUTS
    for name, form in entry.forms.items():
        assert KINDS.get(name).task_type == task_type
        assert entry.spans or KINDS.get(name).inputs in _Builder.BY_INPUTS


def test_task_types_differ_where_their_entries_say(tmp_path):
    """What the task-type names were once compared for: QA keeps the question whole, a relation has
    entities, similarity's gold is a score (its placeholder a number), extractive QA reads question TAB
    context, and a directly named kind reads one text."""
    assert TASK_TYPES.get("qa").truncation == "only_second" and TASK_TYPES.get("similarity").truncation is True
    assert TASK_TYPES.names(lambda t: t.relation) == ["re"]
    assert TASK_TYPES.names(lambda t: t.tagged) == ["ner", "pico"]
    assert TASK_TYPES.names(lambda t: t.class_weights) == ["re", "classification", "qa"]
    assert TASK_TYPES.of("any-label").inputs == "text" and TASK_TYPES.of("any-label").kind == "any-label"
    lines = tmp_path / "in.txt"
    lines.write_text("What binds?\tAspirin binds COX-1.\n")
    (qa,) = read_inputs(lines, get_dataset("bioasq-6b-factoid"))
    assert (qa.instance.question, qa.instance.context) == ("What binds?", "Aspirin binds COX-1.")
    (pair,) = read_inputs(lines, get_dataset("biosses"))
    assert (pair.instance.text_a, pair.instance.label) == ("What binds?", 0.0)
    with pytest.raises(DataFormatError, match="chemprot needs JSONL with text, head and tail"):
        read_inputs(lines, get_dataset("chemprot"))

"""Every task kind has every part (datamodules/task_kinds.py): the data layer's encoder, and the head, export,
card and predict parts the upper layers attach; every registered dataset resolves to a kind. A kind
missing a part fails here, before the slow conformance walk (tests/test_conformance.py) trains it."""

from __future__ import annotations

import pytest

import ablations.run.cards  # noqa: F401  (each upper layer attaches its part of the built-in kinds)
import ablations.run.export  # noqa: F401
import ablations.run.predict  # noqa: F401
import lightning_modules.heads  # noqa: F401
from datamodules.registry import dataset_names, get_dataset
from datamodules.task_kinds import TASK_KINDS, kind_name

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

"""The pretraining objective travels as one ObjectiveSpec, built from the config and checked by name."""

from __future__ import annotations

import pytest

from ablations.config import build_config
from bioablate_core.errors import UnknownNameError
from lightning_modules.pretrain_models import OBJECTIVES, ObjectiveSpec


def test_from_config_reads_every_objective_key():
    p = build_config("micro", ["pretrain.objective=electra", "pretrain.embedding_size=64",
                               "pretrain.share_layers=false", "pretrain.generator_size=0.5",
                               "pretrain.discriminator_weight=20"], task="pretrain").pretrain
    assert ObjectiveSpec.from_config(p) == ObjectiveSpec("electra", False, 64, False, 0.5, 20.0)
    assert ObjectiveSpec.from_config(build_config("micro", task="pretrain").pretrain) == ObjectiveSpec()


@pytest.mark.parametrize("name,nsp,pairs", [("bert", False, "none"), ("bert", True, "nsp"), ("albert", False, "sop"),
                                            ("albert", True, "sop"), ("electra", False, "none"),
                                            ("electra", True, "none")])
def test_pairs_the_shards_carry(name, nsp, pairs):
    assert ObjectiveSpec(name, nsp).pairs == pairs


def test_an_unknown_objective_lists_the_known():
    assert list(OBJECTIVES) == ["bert", "albert", "electra"]
    with pytest.raises(UnknownNameError, match="unknown pretrain.objective 'elektra'; known: albert, bert, electra"):
        ObjectiveSpec("elektra")

"""The masking kinds and schedules are looked up by name: an unknown one is one line listing the known."""

from __future__ import annotations

import pytest
import torch

from core.errors import UnknownNameError
from datamodules.pretrain.masking import MASKING_MODES, SCHEDULES, check_masking, masking_rate, select_positions


def test_known_names():
    assert list(MASKING_MODES) == ["wordpiece", "wwm"] and list(SCHEDULES) == ["constant", "ramp"]
    check_masking("wwm", "ramp")


@pytest.mark.parametrize("call,message", [
    (lambda: check_masking("wwn", "constant"), "unknown masking 'wwn'; known: wordpiece, wwm (did you mean 'wwm'?)"),
    (lambda: check_masking("wwm", "ramps"), "unknown mask_schedule 'ramps'; known: constant, ramp"),
    (lambda: masking_rate(0.5, "linear"), "unknown mask_schedule 'linear'; known: constant, ramp"),
    (lambda: select_positions(torch.ones(1, 4, dtype=torch.bool), torch.ones(1, 4, dtype=torch.bool), 0.5, "span"),
     "unknown masking 'span'; known: wordpiece, wwm"),
])
def test_unknown_names_list_the_known_ones(call, message):
    with pytest.raises(UnknownNameError) as error:
        call()
    assert str(error.value).startswith(message)

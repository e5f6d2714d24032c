"""`pretrain.masking` and `pretrain.mask_schedule`, declared torch-free so a misspelt name is answered before
torch is imported; masking.py registers their entries. The first option is the default."""

from __future__ import annotations

from typing import Any

from bioablate_core.choices import Choice

MASKING_MODES: Choice[Any] = Choice("pretrain.masking", "which tokens become prediction targets: whole words "
                                    "or single word pieces", implemented_in="datamodules.pretrain.masking")
MASKING_MODES.declare("wwm")
MASKING_MODES.declare("wordpiece")

# the rate at a training progress (0 at the first step, 1 at the end)
SCHEDULES: Choice[Any] = Choice("pretrain.mask_schedule", "masking rate over training: constant, or the "
                                "paper's ramp (5% -> 25%)", implemented_in="datamodules.pretrain.masking")
SCHEDULES.declare("constant")
SCHEDULES.declare("ramp")

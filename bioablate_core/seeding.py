"""Seeds derived from a run's seed, one function for pretraining and fine-tuning alike."""

from __future__ import annotations

import numpy as np


def batch_seed(seed: int, micro_batch: int, stream: int) -> int:
    """An unrelated seed per `stream` (0: masks, 1: the training step) of each global `micro_batch`."""
    return int(np.random.SeedSequence([int(seed), int(micro_batch), stream]).generate_state(1)[0])

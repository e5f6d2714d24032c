"""Masked-language-model masking as pure tensor functions (no Python per token).

- `select_positions`: ``wordpiece`` selects each maskable token with probability `rate`, ``wwm`` each
  word, all its pieces together; special tokens never.
- `corrupt`: BERT's 80/10/10 ([MASK], a random token, unchanged); labels -100 elsewhere.
- `masking_rate`: a constant, or the paper's ``ramp`` (Sec. 2.1.3, after ALUM): 5% for the first 20% of
  training, +5% every further 20%, up to 25%.
- `prediction_slots`: the selected positions as indices, padded with label -100, so the step gathers by
  index without a host sync. `pretrain.max_predictions` (BERT's `max_predictions_per_seq`) fixes the width;
  a row over it keeps the lowest draws, whole words together, before corruption.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from datamodules.encoders import IGNORE_INDEX
from datamodules.pretrain.choice_names import MASKING_MODES, SCHEDULES
from datamodules.pretrain.vocab import SPECIAL_TOKENS

# a uniform draw per token [B, L] from (word_start, generator); tokens that share a draw are selected together
Draw = Callable[[torch.Tensor, "torch.Generator | None"], torch.Tensor]


@dataclass(frozen=True)
class MaskingMode:
    """One `pretrain.masking` mode: its draw, and whether it selects whole words."""

    draw: Draw
    whole_word: bool

    def __call__(self, word_start: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        return self.draw(word_start, generator)


def _draw_per_token(word_start: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    return torch.rand(word_start.shape, generator=generator)


def _draw_per_word(word_start: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    word_index = torch.cumsum(word_start.long(), dim=1)  # tokens of one word share an index
    word_draw = torch.rand((word_start.shape[0], word_start.shape[1] + 1), generator=generator)
    return torch.gather(word_draw, 1, word_index)


MASKING_MODES.register("wwm", MaskingMode(_draw_per_word, whole_word=True))
MASKING_MODES.register("wordpiece", MaskingMode(_draw_per_token, whole_word=False))


@SCHEDULES.register("constant")
def _constant_rate(progress: float, rate: float) -> float:
    return rate


@SCHEDULES.register("ramp")
def _ramp_rate(progress: float, rate: float) -> float:
    return 0.05 + 0.05 * min(4, int(max(progress, 0.0) / 0.2))


def check_masking(mode: str, schedule: str) -> None:
    MASKING_MODES.get(mode)
    SCHEDULES.get(schedule)


@dataclass(frozen=True)
class MaskingSpec:
    """`pretrain.masking`, `mask_rate` and `mask_schedule`, checked against their registries when built."""

    mode: str = "wwm"
    rate: float = 0.15
    schedule: str = "constant"
    max_predictions: int | None = None  # `pretrain.max_predictions`: predicted positions per row; None: as drawn

    def __post_init__(self) -> None:
        check_masking(self.mode, self.schedule)  # an unknown name: UnknownNameError listing the known

    @classmethod
    def from_config(cls, pretrain: Any) -> "MaskingSpec":
        """From the `pretrain` section of a run config (the schema has checked the rate's range)."""
        return cls(pretrain.masking, pretrain.mask_rate, pretrain.mask_schedule, pretrain.max_predictions)

    def rate_at(self, progress: float) -> float:
        """The masking rate at `progress` (0 at the first step, 1 at the end) of training."""
        return masking_rate(progress, self.schedule, self.rate)


@dataclass(frozen=True)
class MaskTokens:
    """The vocabulary ids masking reads: [MASK], and the special tokens, never selected nor drawn."""

    mask_id: int
    special_ids: tuple[int, ...]

    @classmethod
    def from_vocab(cls, vocab: Sequence[str]) -> "MaskTokens":
        index = {t: i for i, t in enumerate(vocab)}
        return cls(index["[MASK]"], tuple(index[t] for t in SPECIAL_TOKENS))

    @property
    def replace_low(self) -> int:
        return max(self.special_ids) + 1


def masking_rate(progress: float, schedule: str = "constant", rate: float = 0.15) -> float:
    """The masking rate at `progress` (0 at the first step, 1 at the end) of training."""
    return SCHEDULES.get(schedule)(progress, rate)


def select_positions(word_start: torch.Tensor, maskable: torch.Tensor, rate: float, mode: str,
                     generator: torch.Generator | None = None, max_predictions: int | None = None) -> torch.Tensor:
    """Boolean [B, L]: the targets `mode` draws at `rate` from `generator` among `maskable`, at most
    `max_predictions` a row when given."""
    draw = MASKING_MODES.get(mode)(word_start, generator)
    selected = (draw < rate) & maskable
    return selected if max_predictions is None else _lowest_draws(selected, draw, max_predictions)


def _lowest_draws(selected: torch.Tensor, draw: torch.Tensor, limit: int) -> torch.Tensor:
    """A random subset of at most `limit` of each row's `selected` tokens, pieces of a word together."""
    if limit >= selected.shape[1]:
        return selected
    ranked = torch.where(selected, draw, torch.full_like(draw, 2.0)).sort(dim=1).values
    return selected & (draw < ranked[:, limit:limit + 1])  # 2.0 (above every draw) where none is cut


def corrupt(input_ids: torch.Tensor, selected: torch.Tensor, mask_id: int, replace_low: int,
            replace_high: int, generator: torch.Generator | None = None,
            mask_prob: float = 0.8, random_prob: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """80/10/10 corruption (`mask_prob` to `mask_id`, `random_prob` to a random id in [replace_low,
    replace_high), the rest unchanged) of the `selected` positions -> (inputs, labels)."""
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    action = torch.rand(input_ids.shape, generator=generator)
    to_mask = selected & (action < mask_prob)
    to_random = selected & (action >= mask_prob) & (action < mask_prob + random_prob)
    random_ids = torch.randint(replace_low, replace_high, input_ids.shape, generator=generator,
                               dtype=input_ids.dtype)
    inputs = torch.where(to_mask, torch.full_like(input_ids, mask_id), input_ids)
    inputs = torch.where(to_random, random_ids, inputs)
    return inputs, labels


def mask_batch(input_ids: torch.Tensor, word_start: torch.Tensor, special: torch.Tensor, rate: float,
               mode: str, mask_id: int, replace_low: int, replace_high: int,
               generator: torch.Generator | None = None,
               max_predictions: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """`select_positions` then `corrupt`, the `special` tokens never selected: (masked inputs, labels)."""
    selected = select_positions(word_start | special, ~special, rate, mode, generator, max_predictions)
    return corrupt(input_ids, selected, mask_id, replace_low, replace_high, generator)


def prediction_slots(labels: torch.Tensor, width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(positions, slot labels), both [B, width]: each row's labelled positions, then padding slots at
    position 0 with label -100. `width` None: the batch's largest count; no row may exceed it."""
    selected = labels != IGNORE_INDEX
    counts = selected.sum(dim=1)
    width = max(1, int(counts.max())) if width is None else width
    if int(counts.max()) > width:
        raise ValueError(f"a row has {int(counts.max())} labelled positions, more than the {width} slots")
    order = torch.sort((~selected).to(torch.uint8), dim=1, stable=True).indices[:, :width]
    if order.shape[1] < width:  # more slots than positions in a row
        order = torch.cat([order, order.new_zeros(order.shape[0], width - order.shape[1])], dim=1)
    valid = torch.arange(width)[None, :] < counts[:, None]
    positions = torch.where(valid, order, torch.zeros_like(order))
    return positions, torch.where(valid, labels.gather(1, positions), torch.full_like(positions, IGNORE_INDEX))

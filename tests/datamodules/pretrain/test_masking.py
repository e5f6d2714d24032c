"""The masking kinds and schedules are looked up by name: an unknown one is one line listing the known."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bioablate_core.errors import UnknownNameError
from datamodules.pretrain.masking import (
    MASKING_MODES,
    SCHEDULES,
    MaskingSpec,
    MaskTokens,
    check_masking,
    corrupt,
    mask_batch,
    masking_rate,
    prediction_slots,
    select_positions,
)
from datamodules.pretrain.shards import build_shards
from datamodules.pretrain.vocab import resolve_vocab_file


def test_known_names():
    assert list(MASKING_MODES) == ["wwm", "wordpiece"] and list(SCHEDULES) == ["constant", "ramp"]
    check_masking("wwm", "ramp")


@pytest.mark.parametrize("call,message", [
    (lambda: check_masking("wwn", "constant"),
     "unknown pretrain.masking 'wwn'; known: wordpiece, wwm (did you mean 'wwm'?)"),
    (lambda: check_masking("wwm", "ramps"), "unknown pretrain.mask_schedule 'ramps'; known: constant, ramp"),
    (lambda: masking_rate(0.5, "linear"), "unknown pretrain.mask_schedule 'linear'; known: constant, ramp"),
    (lambda: select_positions(torch.ones(1, 4, dtype=torch.bool), torch.ones(1, 4, dtype=torch.bool), 0.5, "span"),
     "unknown pretrain.masking 'span'; known: wordpiece, wwm"),
])
def test_unknown_names_list_the_known_ones(call, message):
    with pytest.raises(UnknownNameError) as error:
        call()
    assert str(error.value).startswith(message)


@pytest.fixture(scope="module")
def real_batch(small_pubmed, data_dir, tmp_path_factory):
    bert = resolve_vocab_file("bert-base-uncased", data_dir)
    shards = build_shards(small_pubmed, bert, True, 128, "none", 0, tmp_path_factory.mktemp("s") / "x")
    ids = torch.from_numpy(np.asarray(shards.input_ids, dtype=np.int64))
    word_start = torch.from_numpy(np.asarray(shards.word_start)).bool()
    attention = torch.arange(128)[None] < torch.from_numpy(np.asarray(shards.lengths))[:, None]
    special = (ids < 999) | ~attention  # [PAD], [unused*], [UNK], [CLS], [SEP], [MASK]
    return ids, word_start, special


def _word_index(word_start, special):
    return torch.cumsum((word_start | special).long(), dim=1)


def test_whole_word_masking_never_splits_a_word(real_batch):
    ids, word_start, special = real_batch
    g = torch.Generator().manual_seed(0)
    inputs, labels = mask_batch(ids, word_start, special, 0.15, "wwm", 103, 999, 30522, g)
    targets = labels != -100
    words = _word_index(word_start, special)
    multi_piece = 0
    for row in range(ids.shape[0]):
        for w in torch.unique(words[row][targets[row]]):
            in_word = (words[row] == w) & ~special[row]
            assert targets[row][in_word].all()  # every piece of a selected word is a target
            multi_piece += int(in_word.sum() > 1)
    assert multi_piece > 50  # the property is exercised on words of several pieces
    rate = targets.sum() / (~special).sum()
    assert abs(float(rate) - 0.15) < 0.01
    # 80/10/10 over the targets
    masked = (inputs == 103) & targets
    kept = (inputs == ids) & targets
    assert abs(float(masked.sum() / targets.sum()) - 0.8) < 0.02
    assert abs(float(kept.sum() / targets.sum()) - 0.1) < 0.02
    assert (inputs[~targets] == ids[~targets]).all() and (labels[targets] == ids[targets]).all()


def test_wordpiece_masking_splits_words_and_hits_the_rate(real_batch):
    ids, word_start, special = real_batch
    for rate in (0.05, 0.15, 0.25):
        selected = select_positions(word_start | special, ~special, rate, "wordpiece",
                                    torch.Generator().manual_seed(1))
        assert abs(float(selected.sum() / (~special).sum()) - rate) < 0.01
        wwm = select_positions(word_start | special, ~special, rate, "wwm", torch.Generator().manual_seed(1))
        assert abs(float(wwm.sum() / (~special).sum()) - rate) < 0.01
    words = _word_index(word_start, special)
    partial = 0
    for row in range(ids.shape[0]):
        for w in torch.unique(words[row][selected[row]]):
            in_word = (words[row] == w) & ~special[row]
            partial += int(not selected[row][in_word].all())
    assert partial > 10  # wordpiece masking does split words
    assert not selected[special].any()


@pytest.mark.parametrize("mode", list(MASKING_MODES))
def test_every_masking_mode_makes_a_valid_mask(real_batch, mode):
    """Each registered mode (a new entry is covered by being registered): the rate is met, special tokens
    and padding are never targets, and a whole-word mode never splits a word."""
    ids, word_start, special = real_batch
    words = _word_index(word_start, special)
    for rate in (0.05, 0.15, 0.4):
        g = torch.Generator().manual_seed(3)
        inputs, labels = mask_batch(ids, word_start, special, rate, mode, 103, 999, 30522, g)
        targets = labels != -100
        assert abs(float(targets.sum() / (~special).sum()) - rate) < 0.015, (mode, rate)
        assert not targets[special].any() and torch.equal(inputs[special], ids[special])
        if MASKING_MODES.get(mode).whole_word:
            # a word's pieces are all targets or none: every word has one target count, 0 or its length
            pieces = torch.zeros(ids.shape[0], words.max() + 1).scatter_add_(1, words, (~special).float())
            hit = torch.zeros_like(pieces).scatter_add_(1, words, targets.float())
            assert ((hit == 0) | (hit == pieces)).all(), mode


def test_masking_spec_from_config_and_its_checks():
    from ablations.config import build_config

    cfg = build_config("micro", ["pretrain.masking=wordpiece", "pretrain.mask_rate=0.2",
                                 "pretrain.mask_schedule=ramp"], task="pretrain")
    spec = MaskingSpec.from_config(cfg.pretrain)
    assert spec == MaskingSpec("wordpiece", 0.2, "ramp") and spec.rate_at(0.5) == masking_rate(0.5, "ramp", 0.2)
    assert MaskingSpec.from_config(build_config("micro", task="pretrain").pretrain) == MaskingSpec()
    with pytest.raises(UnknownNameError, match="unknown pretrain.masking 'span'"):
        MaskingSpec("span")
    with pytest.raises(UnknownNameError, match="unknown pretrain.mask_schedule 'linear'"):
        MaskingSpec("wwm", 0.15, "linear")
    tokens = MaskTokens.from_vocab(["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##b"])
    assert tokens == MaskTokens(5, (0, 2, 3, 4, 5)) and tokens.replace_low == 6


def test_masks_are_seeded_and_fresh(real_batch):
    ids, word_start, special = real_batch
    a = mask_batch(ids, word_start, special, 0.15, "wwm", 103, 999, 30522, torch.Generator().manual_seed(5))
    b = mask_batch(ids, word_start, special, 0.15, "wwm", 103, 999, 30522, torch.Generator().manual_seed(5))
    c = mask_batch(ids, word_start, special, 0.15, "wwm", 103, 999, 30522, torch.Generator().manual_seed(6))
    assert torch.equal(a[1], b[1]) and not torch.equal(a[1], c[1])


def test_masking_rate_schedule():
    assert [masking_rate(p, "ramp") for p in (0, 0.19, 0.2, 0.5, 0.79, 0.8, 0.99)] == \
        pytest.approx([0.05, 0.05, 0.10, 0.15, 0.20, 0.25, 0.25])
    assert masking_rate(0.7, "constant", 0.15) == 0.15
    with pytest.raises(UnknownNameError, match="unknown pretrain.mask_schedule 'linear'"):
        masking_rate(0.1, "linear")


def test_corrupt_only_touches_selected_positions():
    ids = torch.arange(1000, 1000 + 4000).reshape(40, 100)
    selected = torch.zeros_like(ids, dtype=torch.bool)
    selected[:, ::3] = True
    inputs, labels = corrupt(ids, selected, 103, 999, 30522, torch.Generator().manual_seed(0))
    assert torch.equal(inputs[~selected], ids[~selected]) and (labels[~selected] == -100).all()
    replaced = selected & (inputs != ids) & (inputs != 103)
    assert 0.07 < float(replaced.sum() / selected.sum()) < 0.13 and (inputs[replaced] >= 999).all()


# ---- pretrain.max_predictions: a fixed number of predicted positions per row (BERT's max_predictions_per_seq)

@pytest.mark.parametrize("mode", list(MASKING_MODES))
def test_fixed_predictions_per_row_keep_the_rate_and_the_80_10_10_rule(real_batch, mode):
    """Counted on the staged PubMed corpus: with 32 slots for rows of 128 the share of targets and the
    80/10/10 split are those of the unbounded draw (BERT's 20 would lose 2-4% of a 15% draw); no row has
    more targets than slots; the cut drops whole words; with room for every draw the masks are exactly
    the unbounded ones."""
    ids, word_start, special = real_batch
    draw = lambda limit: mask_batch(ids, word_start, special, 0.15, mode, 103, 999, 30522,  # noqa: E731
                                    torch.Generator().manual_seed(7), limit)
    unbounded = draw(None)[1] != -100
    tight = draw(20)[1] != -100
    assert tight.sum(1).max() <= 20 and tight.sum() < unbounded.sum()  # a cap that binds drops targets
    assert not (tight & ~unbounded).any()  # it only drops, and only what was drawn
    inputs, labels = draw(32)
    targets = labels != -100
    assert targets.sum(1).max() <= 32 and targets.sum() >= 0.999 * unbounded.sum()
    rate = float(targets.sum() / (~special).sum())
    assert abs(rate - 0.15) < 0.01 and abs(rate - float(unbounded.sum() / (~special).sum())) < 0.0005, rate
    masked, kept = (inputs == 103) & targets, (inputs == ids) & targets
    assert abs(float(masked.sum() / targets.sum()) - 0.8) < 0.02
    assert abs(float(kept.sum() / targets.sum()) - 0.1) < 0.02
    assert torch.equal(inputs[~targets], ids[~targets])  # a dropped position stays uncorrupted
    if MASKING_MODES.get(mode).whole_word:
        words = _word_index(word_start, special)
        pieces = torch.zeros(ids.shape[0], words.max() + 1).scatter_add_(1, words, (~special).float())
        hit = torch.zeros_like(pieces).scatter_add_(1, words, targets.float())
        assert ((hit == 0) | (hit == pieces)).all()
    # room for every draw: the same masks as without a limit
    assert torch.equal(draw(128)[1], draw(None)[1]) and torch.equal(draw(128)[0], draw(None)[0])


def test_prediction_slots_hold_the_labelled_positions_in_order(real_batch):
    ids, word_start, special = real_batch
    _, labels = mask_batch(ids, word_start, special, 0.15, "wwm", 103, 999, 30522,
                           torch.Generator().manual_seed(2), 20)
    positions, slot_labels = prediction_slots(labels, 20)
    assert positions.shape == slot_labels.shape == (ids.shape[0], 20)
    valid = slot_labels != -100
    # gathering at the slots gives what boolean indexing gives, in the same order
    assert torch.equal(labels.gather(1, positions)[valid], labels[labels != -100])
    assert (positions[~valid] == 0).all()
    widest, _ = prediction_slots(labels)  # unset: the batch's largest count
    assert widest.shape[1] == int((labels != -100).sum(1).max())
    with pytest.raises(ValueError, match="more than the 5 slots"):
        prediction_slots(labels, 5)

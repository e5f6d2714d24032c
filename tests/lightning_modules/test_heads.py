"""Heads: the constrained CRF (Viterbi and marginals) against brute force, compaction of tagged positions,
featurizers, the probabilities predictions report."""

from __future__ import annotations

import itertools

import pytest
import torch

from datamodules.tagging import get_scheme
from lightning_modules.heads import (
    A_NUMBER,
    HEADS,
    LABEL_SET,
    ONE_CLASS,
    ConstrainedCRF,
    SequenceClassifier,
    TokenTagger,
    compact,
)


def brute_force_best(crf: ConstrainedCRF, emissions: torch.Tensor) -> list[int]:
    """argmax over every tag sequence of start + emissions + transitions + end (one sequence)."""
    best, best_score = None, -float("inf")
    emissions = emissions.detach()
    n, k = emissions.shape
    for seq in itertools.product(range(k), repeat=n):
        score = (crf.start_transitions[seq[0]] + crf.end_transitions[seq[-1]]).detach()
        score = score + sum(emissions[i, t] for i, t in enumerate(seq))
        score = score + sum(crf.transitions[a, b].detach() for a, b in zip(seq, seq[1:]))
        if score > best_score:
            best, best_score = list(seq), float(score)
    return best


def random_crf(scheme_name: str, std: float):
    """The scheme, its tags for one entity type, and a constrained CRF with normal random transitions."""
    scheme = get_scheme(scheme_name)
    tags = scheme.tags(["X"])
    crf = ConstrainedCRF(len(tags), scheme.allowed_transitions(tags))
    for parameter in (crf.transitions, crf.start_transitions, crf.end_transitions):
        torch.nn.init.normal_(parameter, std=std)
    return scheme, tags, crf


@pytest.mark.parametrize("scheme_name", ["bio", "bioul"])
def test_viterbi_matches_brute_force_and_is_always_valid(scheme_name):
    torch.manual_seed(0)
    scheme, tags, crf = random_crf(scheme_name, std=2.0)  # random, then forbidden entries get pinned
    for trial in range(30):
        n = 1 + trial % 5
        emissions = torch.randn(1, n, len(tags)) * 3
        path = crf.viterbi(emissions, torch.ones(1, n, dtype=torch.bool))[0]
        assert path == brute_force_best(crf, emissions[0])
        names = [tags[i] for i in path]
        assert scheme.encode(scheme.decode(names), n) == names  # valid: decoding needed no repair


def test_crf_handles_padding_in_a_batch():
    scheme = get_scheme("bio")
    tags = scheme.tags(["X"])
    crf = ConstrainedCRF(len(tags), scheme.allowed_transitions(tags))
    emissions = torch.randn(2, 4, len(tags))
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.bool)
    paths = crf.viterbi(emissions, mask)
    assert [len(p) for p in paths] == [4, 2]
    assert paths[1] == crf.viterbi(emissions[1:, :2], mask[1:, :2])[0]
    assert torch.isfinite(crf.nll(emissions, torch.zeros(2, 4, dtype=torch.long), mask))


def brute_force_marginals(crf: ConstrainedCRF, emissions: torch.Tensor) -> torch.Tensor:
    """P(tag at each position) by summing exp(score) over every tag sequence (one sequence)."""
    n, k = emissions.shape
    totals = torch.zeros(n, k, dtype=torch.float64)
    for seq in itertools.product(range(k), repeat=n):
        score = crf.start_transitions[seq[0]] + crf.end_transitions[seq[-1]]
        score = score + sum(emissions[i, t] for i, t in enumerate(seq))
        score = score + sum(crf.transitions[a, b] for a, b in zip(seq, seq[1:]))
        weight = torch.exp(score.detach().double())
        for i, t in enumerate(seq):
            totals[i, t] += weight
    return totals / totals.sum(1, keepdim=True)


@pytest.mark.parametrize("scheme_name", ["bio", "bioul"])
def test_crf_marginals_match_brute_force_also_in_a_padded_batch(scheme_name):
    torch.manual_seed(1)
    scheme, tags, crf = random_crf(scheme_name, std=1.5)
    emissions = torch.randn(2, 4, len(tags)) * 2
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.bool)
    marginals = crf.marginals(emissions, mask)
    crf.pin()  # forbidden transitions get probability ~0 in the brute force too
    torch.testing.assert_close(marginals[0].double(), brute_force_marginals(crf, emissions[0]), atol=1e-5, rtol=0)
    torch.testing.assert_close(marginals[1, :3].double(), brute_force_marginals(crf, emissions[1, :3]),
                               atol=1e-5, rtol=0)


def test_probabilities_of_the_heads():
    scheme = get_scheme("bio")
    tags = scheme.tags(["X"])
    batch = {"attention_mask": torch.ones(1, 4, dtype=torch.long), "tag_mask": torch.tensor([[0, 1, 1, 0]])}
    logits = torch.randn(1, 4, len(tags))
    linear = TokenTagger(HEADS.get("linear"), 8, len(tags), 0.0, scheme.allowed_transitions(tags))
    torch.testing.assert_close(linear.probabilities(logits, batch), logits.softmax(-1))
    crf = TokenTagger(HEADS.get("crf"), 8, len(tags), 0.0, scheme.allowed_transitions(tags))
    probs = crf.probabilities(logits, batch)
    torch.testing.assert_close(probs[0, 1:3], crf.crf.marginals(logits[:, 1:3], torch.ones(1, 2, dtype=torch.bool))[0])
    assert probs[0, 0].sum() == 0 and probs[0, 3].sum() == 0  # untagged positions: nothing
    classes = torch.tensor([[2.0, 0.0, -1.0]])
    single = SequenceClassifier(HEADS.get("linear"), "cls", "linear", 4, 3, 0.0, ONE_CLASS)
    torch.testing.assert_close(single.probabilities(classes, {}), classes.softmax(-1))
    multi = SequenceClassifier(HEADS.get("linear"), "cls", "linear", 4, 3, 0.0, LABEL_SET)
    torch.testing.assert_close(multi.probabilities(classes, {}), classes.sigmoid())
    assert SequenceClassifier(HEADS.get("linear"), "cls", "linear", 4, 1, 0.0, A_NUMBER).probabilities(
        classes, {}) is None


def test_compact_gathers_tagged_positions_in_order():
    values = torch.arange(12).view(2, 6)
    mask = torch.tensor([[0, 1, 0, 1, 1, 0], [1, 0, 0, 0, 0, 0]])
    out, out_mask = compact(values, mask)
    assert out.tolist() == [[1, 3, 4], [6, 0, 0]] and out_mask.tolist() == [[True] * 3, [True, False, False]]


def test_token_tagger_predictions_only_on_tagged_positions():
    scheme = get_scheme("bioul")
    tags = scheme.tags(["X"])
    head = TokenTagger(HEADS.get("bilstm-crf"), 8, len(tags), 0.0, scheme.allowed_transitions(tags))
    hidden = torch.randn(2, 5, 8)
    batch = {"attention_mask": torch.tensor([[1] * 5, [1, 1, 1, 0, 0]]),
             "tag_mask": torch.tensor([[0, 1, 1, 0, 1], [0, 1, 0, 0, 0]]),
             "labels": torch.tensor([[-100, 1, 3, -100, 4], [-100, 4, -100, -100, -100]])}
    logits = head(hidden, batch)
    loss = head.loss(logits, batch)
    loss.backward()
    assert torch.isfinite(loss) and head.out.weight.grad is not None
    predictions = head.predict(logits, batch)
    assert predictions.shape == (2, 5)
    for row in range(2):
        path = [tags[t] for t in predictions[row][batch["tag_mask"][row].bool()].tolist()]
        assert scheme.encode(scheme.decode(path), len(path)) == path


def test_mention_and_entity_start_features():
    hidden = torch.tensor([[[0.0, 0.0], [1.0, 5.0], [3.0, 2.0], [9.0, 9.0]]])
    batch = {"head_mask": torch.tensor([[0, 1, 1, 0]]), "tail_mask": torch.tensor([[0, 0, 0, 0]]),
             "head_start": torch.tensor([1]), "tail_start": torch.tensor([3])}
    mention = SequenceClassifier(HEADS.get("linear"), "mention", "linear", 2, 3, 0.0, ONE_CLASS)
    # head: max over tokens 1-2 = [3, 5]; tail mask empty (cut off) -> falls back to [CLS] = [0, 0]
    assert mention.featurize(hidden, batch).tolist() == [[3.0, 5.0, 0.0, 0.0]]
    start = SequenceClassifier(HEADS.get("linear"), "entity-start", "mlp", 2, 3, 0.0, ONE_CLASS)
    assert start.featurize(hidden, batch).tolist() == [[1.0, 5.0, 9.0, 9.0]]

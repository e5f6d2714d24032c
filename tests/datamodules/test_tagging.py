"""Tagging schemes: exact round trips on every staged NER dataset and PICO, repair rules, IO merges."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from bioablate_core.errors import UnknownNameError
from datamodules.instances import Span, iob_to_spans
from datamodules.registry import dataset_names, get_dataset
from datamodules.tagging import SCHEMES, TAGGED_TASK_TYPES, TaggingScheme, continues, get_scheme, io_merges

TAGGED = dataset_names("ner") + dataset_names("pico")


@pytest.fixture(scope="module")
def tagged_splits(data_dir: Path):
    return {name: get_dataset(name).read(data_dir) for name in TAGGED}


@pytest.mark.parametrize("name", TAGGED)
def test_round_trip_on_real_data(tagged_splits, name):
    bio, bioul, io = get_scheme("bio"), get_scheme("bioul"), get_scheme("io")
    merged_total = 0
    for instances in tagged_splits[name].values():
        for x in instances:
            n = len(x.tokens)
            assert bio.decode(bio.encode(x.spans, n)) == x.spans
            assert bioul.decode(bioul.encode(x.spans, n)) == x.spans
            decoded = io.decode(io.encode(x.spans, n))
            merges = io_merges(x.spans)
            merged_total += merges
            # IO loses exactly the boundaries between touching mentions of one type, nothing else
            assert len(decoded) == len(x.spans) - merges
            assert {w for s in decoded for w in range(s.start, s.end)} == \
                   {w for s in x.spans for w in range(s.start, s.end)}
    if name == "jnlpba":
        assert merged_total > 0  # JNLPBA does have adjacent mentions: IO genuinely merges some


def test_encodings_by_hand():
    spans = (Span(0, 1, "X"), Span(1, 4, "X"), Span(5, 7, "Y"))
    assert get_scheme("bio").encode(spans, 8) == ["B-X", "B-X", "I-X", "I-X", "O", "B-Y", "I-Y", "O"]
    assert get_scheme("bioul").encode(spans, 8) == ["U-X", "B-X", "I-X", "L-X", "O", "B-Y", "L-Y", "O"]
    assert get_scheme("io").encode(spans, 8) == ["I-X", "I-X", "I-X", "I-X", "O", "I-Y", "I-Y", "O"]
    assert get_scheme("io").decode(get_scheme("io").encode(spans, 8)) == (Span(0, 4, "X"), Span(5, 7, "Y"))
    assert io_merges(spans) == 1


@pytest.mark.parametrize("tags,expected", [
    # BIO: I after O starts a mention (conlleval); a type switch starts a new one
    ("O I-X I-X O", "1-3X"), ("B-X I-Y", "0-1X 1-2Y"),
])
def test_bio_repair(tags, expected):
    assert _fmt(get_scheme("bio").decode(tags.split())) == expected


@pytest.mark.parametrize("tags,expected", [
    ("B-X I-X O", "0-2X"),          # unfinished mention closed before the O
    ("I-X L-X", "0-2X"),            # I with nothing open opens a mention
    ("L-X O", "0-1X"),              # a lone L is a one-word mention
    ("B-X B-X L-X", "0-1X 1-3X"),   # B while open: close, then open anew
    ("B-X U-X", "0-1X 1-2X"),
    ("B-X I-Y L-Y", "0-1X 1-3Y"),   # type switch
    ("B-X I-X", "0-2X"),            # open at the end: closed at the end
])
def test_bioul_repair(tags, expected):
    assert _fmt(get_scheme("bioul").decode(tags.split())) == expected


def assert_transitions_are_the_sequences_needing_no_repair(scheme: TaggingScheme) -> None:
    """Every tag sequence up to length 4 over two types: allowed by the transition sets <=> decoding it
    and re-encoding gives it back unchanged."""
    tags = scheme.tags(["X", "Y"])
    starts, pairs, ends = scheme.allowed_transitions(tags)
    for n in range(1, 5):
        for seq in itertools.product(range(len(tags)), repeat=n):
            allowed = seq[0] in starts and seq[-1] in ends and all(p in pairs for p in zip(seq, seq[1:]))
            names = [tags[i] for i in seq]
            canonical = scheme.encode(scheme.decode(names), n) == names
            assert allowed == canonical, (scheme.name, names)


@pytest.mark.parametrize("name", list(SCHEMES))
def test_allowed_transitions_are_exactly_the_sequences_needing_no_repair(name):
    assert_transitions_are_the_sequences_needing_no_repair(get_scheme(name))


# CoNLL-2003's IOB1: I-X inside a mention, B-X only where a mention directly follows one of the same type
IOB1 = TaggingScheme("iob1", ("B", "I"), "I-X inside; B-X opens a mention right after one of its type",
                     prefix=lambda i, span, after_same: "B" if i == span.start and after_same else "I",
                     decode_rule=iob_to_spans, may_follow=lambda prev, cur: cur[0] != "B" or continues(prev, cur))


@pytest.fixture
def iob1():
    SCHEMES.register("iob1", IOB1, task_types=TAGGED_TASK_TYPES)  # the one edit
    yield get_scheme("iob1")
    SCHEMES.unregister("iob1")


def test_a_scheme_added_by_one_registration_meets_every_rule(iob1, tagged_splits):
    spans = (Span(0, 1, "X"), Span(1, 4, "X"), Span(5, 7, "Y"), Span(7, 8, "X"))
    assert iob1.encode(spans, 9) == ["I-X", "B-X", "I-X", "I-X", "O", "I-Y", "I-Y", "I-X", "O"]
    assert iob1.decode(["B-X", "I-X", "I-Y", "B-Y"]) == (Span(0, 2, "X"), Span(2, 3, "Y"), Span(3, 4, "Y"))
    assert_transitions_are_the_sequences_needing_no_repair(iob1)
    for splits in tagged_splits.values():
        for x in (x for instances in splits.values() for x in instances):
            assert iob1.decode(iob1.encode(x.spans, len(x.tokens))) == x.spans
    assert "iob1" in SCHEMES.options_for("ner") and get_scheme("iob1") is IOB1


def test_unknown_scheme():
    with pytest.raises(UnknownNameError, match="unknown finetune.tagging 'bieo'; known: bio, bioul, io"):
        get_scheme("bieo")


def _fmt(spans) -> str:
    return " ".join(f"{s.start}-{s.end}{s.label}" for s in spans)

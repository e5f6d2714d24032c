"""Extractive QA windows, span decoding and the task encoder (datamodules/qa_spans.py), with a real fast
WordPiece tokenizer built offline from a staged vocabulary, and the datamodule's own column store."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from transformers import BertTokenizer

from bioablate_core.errors import ConfigError
from datamodules.encoders import EncodingSpec
from datamodules.finetune_data import EncodedSplit
from datamodules.instances import AnswerSpan, QAInstance
from datamodules.qa_spans import (
    QA_MERGES,
    Answer,
    ExtractiveQAEncoder,
    SpanCandidate,
    encode_windows,
    instance_nbest,
    merge_answers,
    merge_in_effect,
    rank_best_snippet,
    rank_biobert_sum,
    token_span,
    whole_word_answers,
    window_candidates,
    word_bounds,
)
from datamodules.readers.bioasq_golden import read_golden_file
from datamodules.readers.squad import BIOELECTRA_BIOASQ_FILE, read_squad_file
from datamodules.spec import DatasetSpec
from datamodules.task_kinds import resolve_windows

ANSWER = "interleukin-6 receptor"
LONG_CONTEXT = (" ".join(f"gene{i} binds" for i in range(120)) + f". The target is the {ANSWER} on cells. "
                + " ".join(f"protein{i} is expressed" for i in range(60)))


@pytest.fixture(scope="module")
def tokenizer(data_dir: Path) -> BertTokenizer:
    # transformers 5: BertTokenizer is the fast one; `vocab=` (vocab_file= is ignored, giving all [UNK])
    tok = BertTokenizer(vocab=str(data_dir / "vocab/pubmedbert-uncased/vocab.txt"), do_lower_case=True)
    assert tok.is_fast and tok.tokenize(ANSWER) == ["interleukin", "-", "6", "receptor"]
    return tok


def spec(metric: str) -> DatasetSpec:
    return DatasetSpec(name="qa-test", task_type="qa-extractive", reader=lambda _: {}, files=(), labels=(),
                       metric=metric, max_length=128)


def gold_logits(features: list[dict], width: int | None = None) -> torch.Tensor:
    """[rows, T, 2] logits peaked (10) at each row's labelled start and end token, 0 elsewhere."""
    width = width or max(len(f["input_ids"]) for f in features)
    logits = torch.zeros(len(features), width, 2)
    for row, feature in enumerate(features):
        start, end = feature["labels"]
        logits[row, start, 0] = logits[row, end, 1] = 10.0
    return logits


def test_long_context_windows_share_stride_tokens_and_locate_the_answer(tokenizer):
    start = LONG_CONTEXT.index(ANSWER)
    answer = AnswerSpan(start, start + len(ANSWER))
    windows = encode_windows(tokenizer, ["What is the target?"], [LONG_CONTEXT], [answer], max_length=128, stride=32)
    assert len(windows) >= 5 and [w.window for w in windows] == list(range(len(windows)))
    assert all(len(w.input_ids) <= 128 and w.example == 0 for w in windows)
    for before, after in zip(windows, windows[1:]):  # consecutive windows overlap by exactly `stride` tokens
        before_context = [o for o in before.offsets if o is not None]
        after_context = [o for o in after.offsets if o is not None]
        assert before_context[-32:] == after_context[:32]
    labelled = [w for w in windows if w.start_position]
    assert labelled, "no window holds the answer"
    for w in windows:
        context = [o for o in w.offsets if o is not None]
        holds = context[0][0] <= start and context[-1][1] >= start + len(ANSWER)
        assert bool(w.start_position) == holds  # labelled exactly where the whole answer is in the window
        if holds:
            assert LONG_CONTEXT[w.offsets[w.start_position][0]:w.offsets[w.end_position][1]] == ANSWER
            assert tokenizer.decode(w.input_ids[w.start_position:w.end_position + 1]) == "interleukin - 6 receptor"
        else:
            assert (w.start_position, w.end_position) == (0, 0)  # [CLS]


def test_token_span_partial_answer_points_at_cls():
    offsets = [None, None, None, (0, 4), (5, 9), (10, 14), None]  # [CLS] q [SEP] ctx ctx ctx [SEP]
    assert token_span(offsets, AnswerSpan(5, 14)) == (4, 5)
    assert token_span(offsets, AnswerSpan(6, 8)) == (4, 4)  # inside one token: that token
    assert token_span(offsets, AnswerSpan(10, 20)) == (0, 0)  # runs past the window's context
    assert token_span([None, None], AnswerSpan(0, 1)) == (0, 0)  # empty context


def test_window_candidates_respect_context_order_and_length():
    offsets = [None, (0, 3), (4, 7), (8, 11)]
    starts, ends = [9.0, 1.0, 3.0, 0.0], [9.0, 0.0, 2.0, 5.0]
    found = {(c.start, c.end): c.score for c in window_candidates(starts, ends, offsets, max_answer_length=2)}
    # [CLS] (position 0) is never a candidate; spans 1..3 (3 tokens) exceed max_answer_length 2; end >= start
    assert found == {(0, 3): 1.0, (0, 7): 3.0, (4, 7): 5.0, (4, 11): 8.0, (8, 11): 5.0}


def test_instance_nbest_softmax_and_merge_dedupes_lowercased():
    nbest = instance_nbest([SpanCandidate(2.0, 0, 4), SpanCandidate(0.0, 5, 9), SpanCandidate(1.0, 0, 4)], "IL-6 il-6")
    # (0, 4) keeps its best score 2; probabilities e^2 / (e^2 + e^0) and 1 / (e^2 + 1)
    assert [a.text for a in nbest] == ["IL-6", "il-6"] and [(a.start, a.end) for a in nbest] == [(0, 4), (5, 9)]
    assert nbest[0][1] == pytest.approx(math.exp(2) / (math.exp(2) + 1))
    merged = merge_answers([nbest, [("x", 0.95), ("y", 0.01)]], top_k=5)
    assert merged == ["x", "IL-6", "y"]  # "il-6" is "IL-6" lower-cased: kept once, at its best rank
    assert merge_answers([[("a", 0.5), ("b", 0.4)], [("c", 0.3)]], top_k=2) == ["a", "b"]


def run_split(encoder: ExtractiveQAEncoder, instances: list[QAInstance]) -> dict[str, float]:
    """The datamodule's path: encode -> EncodedSplit -> padded batches -> gather -> unpack -> decode_split
    -> score, with gold start/end logits standing in for the model."""
    features = encoder.encode(instances)
    split = EncodedSplit.from_features(features, position_labels=False)
    assert encoder.encoded_instances(split) == len(instances)
    raw: dict[int, list] = {}
    for first in range(0, len(split), 64):
        batch = split.batch(list(range(first, min(first + 64, len(split)))), encoder.tokenizer.pad_token_id)
        rows = [features[i] for i in batch["index"].tolist()]
        values, counts = encoder.gather(batch, gold_logits(rows, batch["input_ids"].shape[1]))
        raw.update(zip(batch["index"].tolist(), encoder.unpack(values, counts)))
    examples = [split.example(i) for i in range(len(split))]
    predictions = encoder.decode_split(instances, examples, [raw[i] for i in range(len(split))])
    assert len(predictions) == len(instances)
    return encoder.score(instances, predictions), predictions


def test_gold_logits_recover_every_squad_answer_exactly(tokenizer, data_dir: Path):
    instances = read_squad_file(data_dir / BIOELECTRA_BIOASQ_FILE)
    # max_answer_length 40: one gold answer is 33 tokens, over the default 30
    encoder = ExtractiveQAEncoder(spec("squad_v1"), tokenizer, 128, "span", stride=32, max_question_tokens=64,
                                  max_answer_length=40)
    metrics, predictions = run_split(encoder, instances)
    aligned = 0
    for instance, nbest in zip(instances, predictions):
        gold, context = instance.answer_spans[0], instance.context
        # an answer whose edges are token edges is recovered exactly; one that starts or ends inside a
        # token (50 of Bio-ELECTRA's, e.g. "0" of "2007") can only come back as the tokens covering it
        tokens = tokenizer(context, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        if any(s == gold.start for s, _ in tokens) and any(e == gold.end for _, e in tokens):
            aligned += 1
            assert nbest[0][0] == instance.answers[0]
        else:
            start = next(s for s, e in reversed(tokens) if s <= gold.start)
            end = next(e for s, e in tokens if e >= gold.end)
            assert nbest[0][0] == context[start:end] and instance.answers[0] in nbest[0][0]
    assert aligned == 1759 and metrics["total"] == 1809
    assert metrics["em"] >= aligned / 1809


def test_bioasq_unlocated_questions_count_as_wrong(tokenizer, data_dir: Path):
    # 6B1 factoid at test: 31 questions, an answer located in the snippets of 24. With gold logits the 24
    # are answered right at rank 1; the other 7 can only produce spans that are not a synonym.
    instances, counts = read_golden_file(data_dir / "BioASQ/golden/6B1_golden.json")
    encoder = ExtractiveQAEncoder(spec("bioasq_factoid"), tokenizer, 128, "span", stride=32, max_question_tokens=64)
    metrics, _ = run_split(encoder, instances)
    assert metrics["total"] == 31
    assert metrics["strict"] == metrics["lenient"] == metrics["mrr"] == pytest.approx(24 / 31)


def test_bioasq_list_with_gold_logits(tokenizer, data_dir: Path):
    instances, _ = read_golden_file(data_dir / "BioASQ/golden/6B1_golden.json", question_types=("list",))
    encoder = ExtractiveQAEncoder(spec("bioasq_list"), tokenizer, 128, "span", stride=32, max_question_tokens=64)
    metrics, _ = run_split(encoder, instances)
    assert metrics["total"] == 11
    assert 0.0 < metrics["recall"] < 1.0 and 0.0 < metrics["precision"] <= 1.0


def test_stride_must_leave_room():
    """The span kind's window rule: a stride that leaves no new context beside the question (a quarter of
    the window) and 3 special tokens is a one-line config error; null is a third of the window."""
    with pytest.raises(ConfigError, match=r"^finetune.qa_stride = 93: .* set finetune.qa_stride below 93"):
        resolve_windows(spec("squad_v1"), EncodingSpec(qa_stride=93), 128)
    assert resolve_windows(spec("squad_v1"), EncodingSpec(qa_stride=92), 128).qa_stride == 92
    assert resolve_windows(spec("squad_v1"), EncodingSpec(), 384).qa_stride == 128  # BioBERT's


def test_question_without_snippets_is_scored_wrong(tokenizer):
    # the golden reader turns a question without snippets into one instance with an empty context: its
    # window has no context token, so no answer, and the question still counts (strict 1/2, not 1/1)
    answered = QAInstance("q1_000", "q1", "Which cytokine?", "It is IL-6 here.", ("IL-6",), (AnswerSpan(6, 10),),
                          question_type="factoid")
    empty = QAInstance("q2_000", "q2", "Which gene?", "", ("BRCA1",), question_type="factoid")
    encoder = ExtractiveQAEncoder(spec("bioasq_factoid"), tokenizer, 128, "span", stride=32, max_question_tokens=64)
    metrics, predictions = run_split(encoder, [answered, empty])
    assert predictions[0][0][0] == "IL-6" and predictions[1] == []
    assert (metrics["strict"], metrics["total"]) == (0.5, 2.0)


# ------------------------------------------------------------------------ finetune.qa_merge, by hand

def test_distinct_texts_count_a_text_found_twice_in_a_snippet_once_in_its_softmax():
    context = "IL-6 binds IL-6"
    found = [SpanCandidate(2.0, 0, 4), SpanCandidate(1.0, 11, 15), SpanCandidate(0.0, 5, 10)]
    spans = instance_nbest(found, context)  # every span: e^2, e^1, e^0 over their sum
    assert [(a.text, a.start) for a in spans] == [("IL-6", 0), ("IL-6", 11), ("binds", 5)]
    assert spans[1].probability == pytest.approx(math.e / (math.e ** 2 + math.e + 1))
    texts = instance_nbest(found, context, distinct_texts=True)  # run_squad.py: "IL-6" once, at its better span
    assert [(a.text, a.start) for a in texts] == [("IL-6", 0), ("binds", 5)]
    assert texts[0].probability == pytest.approx(math.e ** 2 / (math.e ** 2 + 1))


# One question, three snippets' n-best lists (probabilities of each snippet's softmax)
SNIPPETS = [[("Chloroquine", 0.5), ("malaria", 0.3), ("quinine", 0.2)],
            [("quinine", 0.45), ("Malaria", 0.35), ("fever", 0.2)],
            [("malaria", 0.4), ("QUININE", 0.25), ("x" * 101, 0.35)]]


def test_best_snippet_ranks_by_the_best_probability_in_any_one_snippet():
    ranked = rank_best_snippet(SNIPPETS, 5)
    # .5 Chloroquine, .45 quinine, .4 malaria, .35 Malaria (= malaria: once) and x*101 (the later snippet
    # at a tie), .3 malaria, .25 QUININE, .2 quinine and fever
    assert [(r.text, r.score, r.snippet) for r in ranked] == [
        ("Chloroquine", 0.5, 0), ("quinine", 0.45, 1), ("malaria", 0.4, 2), ("x" * 101, 0.35, 2), ("fever", 0.2, 1)]
    assert merge_answers(SNIPPETS, 2) == ["Chloroquine", "quinine"]


def test_biobert_sum_adds_an_answers_probabilities_over_snippets_and_drops_long_ones():
    ranked = rank_biobert_sum(SNIPPETS, 5)
    # malaria .4 + .35 + .3 = 1.05, quinine .45 + .25 + .2 = .90, Chloroquine .5, fever .2; x*101 (101
    # characters) dropped; each shown in its most probable form
    assert [r.text for r in ranked] == ["malaria", "quinine", "Chloroquine", "fever"]
    assert [r.score for r in ranked] == pytest.approx([1.05, 0.90, 0.5, 0.2])
    assert [r.snippet for r in ranked] == [2, 1, 0, 1]
    assert [r.text for r in rank_biobert_sum(SNIPPETS, 2)] == ["malaria", "quinine"]


def hand_built_question(tokenizer, merge: str):
    """The question of SNIPPETS (gold: malaria) as three instances with those n-best lists, and its encoder."""
    contexts = [" ".join(text for text, _ in nbest) for nbest in SNIPPETS]
    instances = [QAInstance(f"q1_{k:03d}", "q1", "What does chloroquine treat?", context, ("malaria",),
                            question_type="factoid") for k, context in enumerate(contexts)]
    predictions = []
    for context, nbest in zip(contexts, SNIPPETS):
        at, answers = 0, []
        for text, probability in nbest:
            answers.append(Answer(text, probability, at, at + len(text)))
            at += len(text) + 1
        predictions.append(answers)
    encoder = ExtractiveQAEncoder(spec("bioasq_factoid"), tokenizer, 128, "span", stride=32, max_question_tokens=64,
                                  merge=merge)
    return encoder, instances, predictions


@pytest.mark.parametrize("merge,strict,lenient,mrr,total", [
    ("best-snippet", 0.0, 1.0, 1 / 3, 1),  # malaria third: 1/3
    ("biobert-sum", 1.0, 1.0, 1.0, 1),  # malaria first
    ("bioelectra-pairs", 1 / 3, 1.0, 2 / 3, 3),  # three pairs: malaria 2nd, 2nd ("Malaria"), 1st: (.5 + .5 + 1) / 3
])
def test_each_merge_rule_scores_the_hand_built_question_as_worked_out(tokenizer, merge, strict, lenient, mrr,
                                                                      total):
    encoder, instances, predictions = hand_built_question(tokenizer, merge)
    metrics = encoder.score(instances, predictions)
    assert (metrics["strict"], metrics["lenient"], metrics["mrr"], metrics["total"]) == \
        pytest.approx((strict, lenient, mrr, total))
    assert encoder.group_by == (None if merge == "bioelectra-pairs" else "question_id")
    records = encoder.question_records(instances, predictions)
    assert len(records) == total
    contexts = {x.id: x.context for x in instances}
    for record in records:  # each answer's characters in the context it was taken from
        assert record["answers"] == [span["answer"] for span in record["spans"]]
        assert all(contexts[span["id"]][span["start"]:span["end"]] == span["answer"] for span in record["spans"])


def test_the_rule_in_effect_on_a_dataset_scored_per_pair_is_bioelectras():
    assert list(QA_MERGES) == ["best-snippet", "biobert-sum", "bioelectra-pairs"]
    assert merge_in_effect(spec("bioasq_factoid"), "biobert-sum") == "biobert-sum"
    assert merge_in_effect(spec("squad_v1"), "best-snippet") == "bioelectra-pairs"


def test_answers_are_widened_to_the_tokenizers_whole_words_with_offsets_into_the_context(tokenizer):
    context = "Chloroquine is an antimalarial; interleukin-6 (IL-6) is not."
    at = context.index
    nbest = [Answer("oquine is an antimalarial", 0.4, 5, at(";")),  # starts inside "Chloroquine"
             Answer("Chloroquine is an antimal", 0.3, 0, at("arial")),  # ends inside "antimalarial": the same span
             Answer("interleukin-6", 0.2, at("interleukin"), at(" (IL")),  # whole words ("-" is one): kept
             Answer("L-6", 0.1, at("L-6)"), at(") is"))]
    words = word_bounds(tokenizer, context)
    assert (0, len("Chloroquine")) in words and (at("-6"), at("-6") + 1) in words  # BERT splits at punctuation
    answers = whole_word_answers(nbest, context, words, top_k=5)
    assert answers == [
        {"answer": "Chloroquine is an antimalarial", "score": 0.4, "start": 0, "end": at(";")},
        {"answer": "interleukin-6", "score": 0.2, "start": at("interleukin"), "end": at(" (IL")},
        {"answer": "IL-6", "score": 0.1, "start": at("IL-6)"), "end": at(") is")}]
    assert all(context[a["start"]:a["end"]] == a["answer"] for a in answers)
    assert whole_word_answers(nbest, context, words, top_k=1) == answers[:1]

"""Extractive QA as span prediction: question x context -> sliding windows -> start/end logits -> answers.

A context longer than the window is cut into overlapping windows (`stride` tokens shared); a window that
does not hold the whole answer is labelled (0, 0), i.e. [CLS], as Hugging Face's `run_qa.py` does. Each
window's best spans are pooled into the instance's n-best (Google's `run_squad.py`, which BioBERT ran), then
over a question's snippets by the rule `finetune.qa_merge` names, read from each paper's code:

- `best-snippet` (default): an answer ranks by its best probability in any one snippet.
- `biobert-sum`: BioBERT's `biocodes/transform_nbset2bioasqform.py`: probabilities summed over snippets,
  answers over 100 characters dropped; a snippet's n-best holds distinct texts, as `run_squad.py`'s does.
- `bioelectra-pairs`: Bio-ELECTRA's `qa_metrics.py`: nothing is pooled; each question x snippet pair is
  scored on its own. SQuAD's measures (`squad_v1`) always score so; the rule then shapes only the n-best.

Texts are compared lower-cased, the most probable form kept. One instance gives a feature row per window,
so the encoder decodes a whole split at once (`decode_split`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

import torch
from transformers import PreTrainedTokenizerBase

import datamodules.qa_metrics  # noqa: F401  (registers the QA metrics this encoder scores with)
from datamodules.instances import AnswerSpan, QAInstance
from datamodules.metrics import METRICS
from datamodules.qa_merges import QA_MERGES
from datamodules.spec import DatasetSpec
from datamodules.task_encoder import QUESTION_LEVEL_METRICS, Features, TaskEncoder

NO_OFFSET = -1  # a bookkeeping column's character offset of a token outside the context


@dataclass(frozen=True)
class Window:
    """One feature row: window `window` of instance `example`."""

    example: int
    window: int
    input_ids: list[int]
    attention_mask: list[int]
    token_type_ids: list[int]
    offsets: list[tuple[int, int] | None]  # per token, its characters in the context; None outside it
    start_position: int  # token of the answer's first character; 0 ([CLS]) where the window lacks it
    end_position: int


@dataclass(frozen=True)
class SpanCandidate:
    """Characters `start` .. `end - 1` of the context, with the model's score (start + end logit)."""

    score: float
    start: int
    end: int


def token_span(offsets: Sequence[tuple[int, int] | None], answer: AnswerSpan) -> tuple[int, int]:
    """The first and last token of `answer` in a window, or (0, 0) where the window does not hold all of it."""
    context = [i for i, offset in enumerate(offsets) if offset is not None]
    if not context or not (offsets[context[0]][0] <= answer.start and offsets[context[-1]][1] >= answer.end):
        return 0, 0
    start = next(i for i in reversed(context) if offsets[i][0] <= answer.start)
    end = next(i for i in context if offsets[i][1] >= answer.end)
    return start, end


def _cut_questions(tokenizer: PreTrainedTokenizerBase, questions: Sequence[str], max_tokens: int) -> list[str]:
    """Questions cut after `max_tokens` tokens (BioBERT's max_query_length), so the context keeps room."""
    encoded = tokenizer(list(questions), add_special_tokens=False, return_offsets_mapping=True)
    return [q if len(offsets) <= max_tokens else q[:offsets[max_tokens - 1][1]]
            for q, offsets in zip(questions, encoded["offset_mapping"])]


def encode_windows(tokenizer: PreTrainedTokenizerBase, questions: Sequence[str], contexts: Sequence[str],
                   answers: Sequence[AnswerSpan | None], max_length: int, stride: int,
                   max_question_tokens: int = 64) -> list[Window]:
    """Every window of `max_length` tokens, `stride` shared, of every (question, context), in instance order;
    `answers[i]`: the span to label (None: (0, 0)); questions keep `max_question_tokens`."""
    if not tokenizer.is_fast or tokenizer.padding_side != "right":
        raise ValueError("extractive QA needs a fast tokenizer (offsets) that pads on the right")
    cut = _cut_questions(tokenizer, questions, max_question_tokens)
    enc = tokenizer(cut, list(contexts), truncation="only_second", max_length=max_length, stride=stride,
                    return_overflowing_tokens=True, return_offsets_mapping=True)
    windows: list[Window] = []
    for row, example in enumerate(enc["overflow_to_sample_mapping"]):
        offsets = [tuple(o) if sequence == 1 else None
                   for o, sequence in zip(enc["offset_mapping"][row], enc.sequence_ids(row))]
        start, end = token_span(offsets, answers[example]) if answers[example] is not None else (0, 0)
        number = windows[-1].window + 1 if windows and windows[-1].example == example else 0
        windows.append(Window(example, number, enc["input_ids"][row], enc["attention_mask"][row],
                              enc["token_type_ids"][row], offsets, start, end))
    return windows


def window_candidates(start_logits: Sequence[float], end_logits: Sequence[float],
                      offsets: Sequence[tuple[int, int] | None], n_best: int = 20,
                      max_answer_length: int = 30) -> list[SpanCandidate]:
    """The spans of at most `max_answer_length` tokens from a window's `n_best` best start and end tokens
    among those with context `offsets`."""
    context = [i for i, offset in enumerate(offsets) if offset is not None]
    starts = sorted(context, key=lambda i: -start_logits[i])[:n_best]
    ends = sorted(context, key=lambda i: -end_logits[i])[:n_best]
    return [SpanCandidate(start_logits[s] + end_logits[e], offsets[s][0], offsets[e][1])
            for s in starts for e in ends if s <= e < s + max_answer_length]


class Answer(NamedTuple):
    """One answer of an instance's n-best; `context[start:end] == text`."""

    text: str
    probability: float
    start: int
    end: int


def instance_nbest(candidates: Sequence[SpanCandidate], context: str, n_best: int = 20,
                   distinct_texts: bool = False) -> list[Answer]:
    """One instance's `n_best` answers over its windows, best first, with softmax probabilities.
    `distinct_texts`: a text found at two spans is one answer, at its better span (run_squad.py's n-best)."""
    best: dict[tuple[int, int], float] = {}
    for c in candidates:
        if c.end > c.start and best.get((c.start, c.end), -math.inf) < c.score:
            best[(c.start, c.end)] = c.score
    ranked = sorted(best.items(), key=lambda item: (-item[1], item[0]))
    if distinct_texts:
        kept: dict[str, tuple[tuple[int, int], float]] = {}
        for (s, e), score in ranked:
            kept.setdefault(context[s:e], ((s, e), score))
        ranked = list(kept.values())
    ranked = ranked[:n_best]
    if not ranked:
        return []
    top = ranked[0][1]
    weights = [math.exp(score - top) for _, score in ranked]
    total = sum(weights)
    return [Answer(context[s:e], w / total, s, e) for ((s, e), _), w in zip(ranked, weights)]


def word_bounds(tokenizer: PreTrainedTokenizerBase, context: str) -> list[tuple[int, int]]:
    """The context's words as the tokenizer's pre-tokenizer splits them, as (start, end) characters."""
    enc = tokenizer(context, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    words: dict[int, tuple[int, int]] = {}
    for word, (start, end) in zip(enc.word_ids(), enc["offset_mapping"]):
        if word is not None and end > start:
            first, last = words.get(word, (start, end))
            words[word] = (min(first, start), max(last, end))
    return sorted(words.values())


def whole_word_answers(nbest: Sequence[Answer], context: str, words: Sequence[tuple[int, int]],
                       top_k: int = 5) -> list[dict[str, Any]]:
    """An instance's first `top_k` answers as Hugging Face's QA pipeline gives them, each span widened to
    the whole `words` it cuts ("oquine" -> "Chloroquine"); spans that merge keep the better score."""
    out: dict[tuple[int, int], dict[str, Any]] = {}
    for item in nbest:
        start = next((s for s, e in words if s <= item.start < e), item.start)
        end = next((e for s, e in words if s < item.end <= e), item.end)
        out.setdefault((start, end), {"answer": context[start:end], "score": item.probability,
                                      "start": start, "end": end})
    return list(out.values())[:top_k]


class Ranked(NamedTuple):
    """One of a question's ranked answers, with the snippet and n-best item it was found at."""

    text: str
    score: float
    snippet: int
    item: Any  # an `Answer`, or any (text, probability) pair


def _by_probability(nbests: Sequence[Sequence[Any]]) -> list[tuple[int, Any]]:
    """Every (snippet, item) of a question's n-best lists, most probable first (ties: snippet order)."""
    return sorted(((snippet, item) for snippet, nbest in enumerate(nbests) for item in nbest),
                  key=lambda found: -found[1][1])


def rank_best_snippet(nbests: Sequence[Sequence[Any]], top_k: int = 5) -> list[Ranked]:
    """`best-snippet`: each text once, at its best probability in any snippet; the first `top_k`."""
    answers: dict[str, Ranked] = {}
    for snippet, item in _by_probability(nbests):
        if item[0].strip():
            answers.setdefault(item[0].lower(), Ranked(item[0], item[1], snippet, item))
    return list(answers.values())[:top_k]


BIOBERT_MAX_ANSWER_CHARS = 100  # transform_nbset2bioasqform.py drops longer answers


def rank_biobert_sum(nbests: Sequence[Sequence[Any]], top_k: int = 5) -> list[Ranked]:
    """`biobert-sum`: each text once, by its probabilities summed over the snippets; the first `top_k`."""
    answers: dict[str, Ranked] = {}
    for snippet, item in _by_probability(nbests):
        text = item[0]
        if not text.strip() or len(text) > BIOBERT_MAX_ANSWER_CHARS:
            continue
        found = answers.get(text.lower())
        answers[text.lower()] = Ranked(text, item[1], snippet, item) if found is None else \
            found._replace(score=found.score + item[1])
    return sorted(answers.values(), key=lambda ranked: -ranked.score)[:top_k]


def merge_answers(nbests: Sequence[Sequence[Any]], top_k: int = 5) -> list[str]:
    """A question's answers by `best-snippet` (the default rule), as texts."""
    return [ranked.text for ranked in rank_best_snippet(nbests, top_k)]


@dataclass(frozen=True)
class AnswerRule:
    """A rule of `finetune.qa_merge` (module docstring); `source` names it in tables."""

    rank: Callable[[Sequence[Sequence[Any]], int], list[Ranked]]
    pooled: bool
    distinct_texts: bool
    source: str


QA_MERGES.register("best-snippet", AnswerRule(
    rank_best_snippet, pooled=True, distinct_texts=False,
    source="bioablate's rule: an answer ranked by its best probability in any one snippet"))
QA_MERGES.register("biobert-sum", AnswerRule(
    rank_biobert_sum, pooled=True, distinct_texts=True,
    source="BioBERT's rule: an answer's probabilities summed over a question's snippets, answers over 100 "
           "characters dropped"))
QA_MERGES.register("bioelectra-pairs", AnswerRule(
    rank_best_snippet, pooled=False, distinct_texts=True,
    source="Bio-ELECTRA's rule: each question × snippet pair scored on its own, no merging"))


def merge_in_effect(spec: DatasetSpec, merge: str) -> str:
    """The rule `spec` is scored by under `merge`: SQuAD's measures are always `bioelectra-pairs`."""
    return merge if spec.metric in QUESTION_LEVEL_METRICS else "bioelectra-pairs"


def describe_merge(spec: DatasetSpec, merge: str) -> str:
    """What a table says of an extractive-QA run's answers: the rule in effect, named after its source."""
    name = merge_in_effect(spec, merge)
    return f"QA answers by {name} ({QA_MERGES.get(name).source})"


class ExtractiveQAEncoder(TaskEncoder):
    """QAInstances -> one feature row per window; start/end logits -> answers -> SQuAD or BioASQ scores.

    A row's labels are [start token, end token]; `_example`, `_window` and `_context_offsets` are
    bookkeeping. `score` merges the n-bests per question by the `merge` rule for BioASQ's question-level
    metrics, and takes each instance's best answer for SQuAD's."""

    def __init__(self, spec: DatasetSpec, tokenizer: PreTrainedTokenizerBase, max_length: int, output_kind: str,
                 stride: int, max_question_tokens: int, max_answer_length: int = 30,
                 n_best: int = 20, top_k: int = 5, merge: str = QA_MERGES.default):
        """`stride` and `max_question_tokens` come checked from the span kind's window rule (task_kinds.py)."""
        super().__init__(spec, tokenizer, max_length)
        self.output_kind = output_kind
        self.merge, self.rule = merge, QA_MERGES.get(merge)
        if not self.rule.pooled:
            self.group_by = None  # each question x snippet pair scored on its own
        self.stride, self.max_question_tokens = stride, max_question_tokens
        self.max_answer_length, self.n_best, self.top_k = max_answer_length, n_best, top_k

    @property
    def num_labels(self) -> int:
        return 2  # a start and an end logit per position

    def label_names(self) -> list[str]:
        return ["start", "end"]

    def encode(self, instances: Sequence[QAInstance]) -> list[Features]:
        windows = encode_windows(self.tokenizer, [x.question for x in instances], [x.context for x in instances],
                                 [x.answer_spans[0] if x.answer_spans else None for x in instances],
                                 self.max_length, self.stride, self.max_question_tokens)
        return [{"input_ids": w.input_ids, "attention_mask": w.attention_mask, "token_type_ids": w.token_type_ids,
                 "labels": [w.start_position, w.end_position], "_example": [w.example], "_window": [w.window],
                 "_context_offsets": [c for offset in w.offsets for c in (offset or (NO_OFFSET, NO_OFFSET))]}
                for w in windows]

    def encoded_instances(self, split: Any) -> int:
        """How many instances a stored split covers (every instance has at least one window)."""
        examples = split.columns["_example"]
        return int(examples[-1]) + 1 if len(examples) else 0

    def gather(self, batch: dict[str, torch.Tensor], predictions: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, T, 2] start/end logits -> the rows of the attended positions, and how many per window."""
        mask = batch["attention_mask"].bool()
        return predictions[mask], mask.sum(1)

    def unpack(self, values: torch.Tensor, counts: torch.Tensor) -> list[list[list[float]]]:
        flat, out, start = values.tolist(), [], 0
        for count in counts.tolist():
            out.append(flat[start:start + count])
            start += count
        return out

    def decode(self, feature: Features, raw: list[list[float]]) -> list[SpanCandidate]:
        """One window's [start, end] logits per position -> its candidate spans."""
        flat = feature["_context_offsets"]
        offsets = [None if flat[k] == NO_OFFSET else (flat[k], flat[k + 1]) for k in range(0, len(flat), 2)]
        return window_candidates([r[0] for r in raw], [r[1] for r in raw], offsets[:len(raw)],
                                 self.n_best, self.max_answer_length)

    def decode_split(self, instances: Sequence[QAInstance], examples: Sequence[Features],
                     raws: Sequence[Any]) -> list[list[tuple[str, float]]]:
        """Every row of a split -> one n-best [(text, probability)] per instance, in instance order."""
        candidates: list[list[SpanCandidate]] = [[] for _ in instances]
        for feature, raw in zip(examples, raws):
            candidates[feature["_example"][0]] += self.decode(feature, raw)
        return [instance_nbest(found, x.context, self.n_best, self.rule.distinct_texts)
                for found, x in zip(candidates, instances)]

    def gold(self, instance: QAInstance) -> tuple[str, ...]:
        return instance.answers

    def question_gold(self, instance: QAInstance) -> Any:
        """A question's gold: answer groups for list measures, else every accepted answer text."""
        if self.spec.metric == "bioasq_list":
            return instance.answer_groups or tuple((a,) for a in instance.answers)
        return instance.answers

    def _scored_units(self, instances: Sequence[QAInstance], predictions: Sequence[list[Answer]]
                      ) -> list[tuple[QAInstance, list[QAInstance], list[list[Answer]]]]:
        """Each question's (first instance, instances, n-best lists), or each instance under `bioelectra-pairs`."""
        if len(instances) != len(predictions):
            raise ValueError(f"{len(instances)} instances but {len(predictions)} predictions")
        units: dict[str, tuple[QAInstance, list, list]] = {}
        for instance, nbest in zip(instances, predictions):
            key = instance.question_id if self.rule.pooled else instance.id
            unit = units.setdefault(key, (instance, [], []))
            unit[1].append(instance)
            unit[2].append(nbest)
        return list(units.values())

    def score(self, instances: Sequence[QAInstance], predictions: Sequence[list[Answer]]) -> dict[str, float]:
        metric = METRICS.get(self.spec.metric)
        if self.spec.metric not in QUESTION_LEVEL_METRICS:  # SQuAD: each question x context, its best answer
            if len(instances) != len(predictions):
                raise ValueError(f"{len(instances)} instances but {len(predictions)} predictions")
            golds = [self.question_gold(x) for x in instances]
            return metric(golds, [nbest[0][0] if nbest else "" for nbest in predictions], **self.spec.metric_args)
        units = self._scored_units(instances, predictions)
        golds = [self.question_gold(first) for first, _, _ in units]
        answers = [[r.text for r in self.rule.rank(nbests, self.top_k)] for _, _, nbests in units]
        return metric(golds, answers, **self.spec.metric_args)

    def to_json(self, prediction: Sequence[Any]) -> list[Any]:
        """An instance's every candidate as [text, probability] (BioBERT's transform_nbset2bioasqform.py
        rebuilds answer lists from them), and its gold texts."""
        if all(isinstance(item, str) for item in prediction):
            return list(prediction)
        return [[item[0], item[1]] for item in prediction]

    def question_records(self, instances: Sequence[QAInstance], predictions: Sequence[list[Answer]]
                         ) -> list[dict[str, Any]]:
        """One record per question (per pair under `bioelectra-pairs`): its gold and the `top_k` answers as
        `score` ranks them; `spans`: each answer's score, context `id` and characters there."""
        records = []
        for first, members, nbests in self._scored_units(instances, predictions):
            ranked = self.rule.rank(nbests, self.top_k)
            records.append({
                "id": first.question_id if self.rule.pooled else first.id, "question": first.question,
                "contexts": len(nbests), "gold": [list(g) for g in first.answer_groups] or list(first.answers),
                "answers": [r.text for r in ranked],
                "spans": [{"answer": r.text, "score": r.score, "id": members[r.snippet].id,
                           "start": r.item.start, "end": r.item.end} for r in ranked]})
        return records

"""Windows over the words of a text longer than a tagging model reads at once (`bioablate predict`)."""

from __future__ import annotations

from datamodules.encoders import TaggingEncoder

SENTENCE_ENDS = frozenset(".!?")  # words a window prefers to end after


def tagging_windows(encoder: TaggingEncoder, tokens: tuple[str, ...]) -> list[tuple[int, int]]:
    """Word ranges [start, end) of `tokens` that each fit `encoder`'s max_length with specials. A full range
    ends after the last sentence end in its second half, where there is one: the model was fine-tuned on
    sentences, and a mention rarely crosses one."""
    if not tokens:
        return [(0, 0)]
    pieces = encoder.tokenizer(list(tokens), is_split_into_words=True, add_special_tokens=False)
    cost = [0] * len(tokens)
    for word in pieces.word_ids():
        if word is not None:
            cost[word] += 1
    budget = max(1, encoder.max_length - encoder.tokenizer.num_special_tokens_to_add())
    windows, start, used = [], 0, 0
    for word, n in enumerate(cost):
        if used + n > budget and word > start:
            ends = [w + 1 for w in range(start + (word - start) // 2, word) if tokens[w] in SENTENCE_ENDS]
            end = ends[-1] if ends else word
            windows.append((start, end))
            start, used = end, sum(cost[end:word])
        used += n
    windows.append((start, len(tokens)))
    return windows

"""What a pretraining run will see of its corpus, said before it runs (`bioablate pretrain --dry-run`).

Exact from built shards; else estimated from each corpus's first files (words per byte, tokens per word)
scaled by the file sizes. De-duplication is not estimated (it only lowers the numbers).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from datamodules.pretrain.corpora import Corpus
from datamodules.pretrain.formats import read_documents

MAX_EPOCHS = 10  # more passes than this over one corpus: a warning (the model starts to memorise it)
ASSUMED_TOKENS_PER_WORD = 1.3  # WordPiece on English biomedical text, when no vocabulary is at hand


@dataclass
class CorpusSummary:
    corpus: str
    exact: bool  # from built shards; else estimated
    files: int
    bytes: int
    words: int
    tokens: int
    sequences: int
    seq_len: int
    steps: int
    sequences_per_step: int
    note: str = ""

    @property
    def sequences_seen(self) -> int:
        return self.steps * self.sequences_per_step

    @property
    def tokens_seen(self) -> int:
        return round(self.sequences_seen * self.tokens / max(1, self.sequences))

    @property
    def epochs(self) -> float:
        return self.sequences_seen / max(1, self.sequences)

    @property
    def warning(self) -> str | None:
        if self.epochs <= MAX_EPOCHS:
            return None
        return (f"warning: {self.steps:,} steps make {self.epochs:.0f} passes over corpus {self.corpus} (more than "
                f"{MAX_EPOCHS}): the model will largely memorise it; use a larger corpus or fewer steps")

    def lines(self) -> list[str]:
        about = "" if self.exact else "~"
        out = [f"corpus {self.corpus}: {self.files:,} files, {self.bytes / 1e9:.2f} GB; {about}{self.words:,} words, "
               f"{about}{self.tokens:,} tokens, {about}{self.sequences:,} sequences of {self.seq_len} "
               f"({'from the built shards' if self.exact else 'estimated: ' + self.note})",
               f"training: {self.steps:,} steps x {self.sequences_per_step:,} sequences = {self.sequences_seen:,} "
               f"sequences, {about}{self.tokens_seen:,} tokens seen, {about}{self.epochs:.2f} passes over the corpus"]
        return out + ([self.warning] if self.warning else [])


def _sample(corpus: Corpus, stage: int, index: int, sample_words: int, tokenizer) -> tuple[float, float, int]:
    """(kept words per file byte, tokens per word, files read) of one corpus of one stage."""
    spec = corpus.specs[stage][index]
    min_words = max(corpus.min_words, spec.filters.min_words, 1)
    words = read_bytes = files = 0
    texts: list[str] = []
    for path, part in corpus.files[stage][index]:
        for doc in read_documents(path, part.format, part.text, part.pmid):
            n = len(doc.text.split())
            if n >= min_words and not (corpus.exclude_pmids and doc.pmid in corpus.exclude_pmids):
                words += n
                if sum(len(t) for t in texts) < 8 * sample_words:
                    texts.append(doc.text)
        read_bytes += path.stat().st_size
        files += 1
        if words >= sample_words:
            break
    tokens_per_word = ASSUMED_TOKENS_PER_WORD
    if tokenizer is not None and texts:
        sample_tokens = sum(len(e) for e in tokenizer.encode_batch(texts, add_special_tokens=False))
        tokens_per_word = sample_tokens / max(1, sum(len(t.split()) for t in texts))
    return words / max(1, read_bytes), tokens_per_word, files


def corpus_summary(corpus: Corpus, *, seq_len: int, batch_size: int, accumulate: int, max_steps: int,
                   world_size: int = 1, pairs: str = "none", vocab_path: Path | None = None, lowercase: bool = True,
                   shards_meta: dict | None = None, sample_words: int = 200_000) -> CorpusSummary:
    """The corpus's size and what `max_steps` steps of `batch_size x accumulate x world_size` sequences make
    of it at `seq_len` with `pairs`; exact from `shards_meta` (a built set's meta.json), else estimated."""
    paths = [p for stage in corpus.files for spec_files in stage for p, _ in spec_files]
    files, size = len(paths), sum(p.stat().st_size for p in paths)
    per_step = batch_size * accumulate * world_size
    if shards_meta is not None:
        return CorpusSummary(corpus.name, True, files, size, shards_meta["words"], shards_meta["tokens"],
                             shards_meta["sequences"], seq_len, max_steps, per_step)
    tokenizer = None
    if vocab_path is not None:
        from datamodules.pretrain.vocab import fast_tokenizer

        tokenizer = fast_tokenizer(vocab_path, lowercase)
    cap = None if corpus.max_words is None else max(1, corpus.max_words // len(corpus.specs))
    words = tokens = sampled = 0.0
    for s, stage in enumerate(corpus.specs):
        stage_words = stage_tokens = 0.0
        for i, spec in enumerate(stage):
            per_byte, per_word, read = _sample(corpus, s, i, sample_words, tokenizer)
            sampled += read
            estimate = per_byte * sum(p.stat().st_size for p, _ in corpus.files[s][i])
            if spec.filters.max_words is not None:
                estimate = min(estimate, spec.filters.max_words)
            stage_words += estimate
            stage_tokens += estimate * per_word
        if cap is not None and stage_words > cap:
            stage_tokens, stage_words = stage_tokens * cap / stage_words, cap
        words, tokens = words + stage_words, tokens + stage_tokens
    body = seq_len - (2 if pairs == "none" else 3)
    sequences = max(1, round(tokens / body))
    note = (f"{int(sampled)} of {files} files sampled, "
            f"""{'tokens per word from the vocabulary' if tokenizer
                 else f'{ASSUMED_TOKENS_PER_WORD} tokens a word assumed'}"""
            ", de-duplication not counted")
    return CorpusSummary(corpus.name, False, files, size, round(words), round(tokens + sequences * (seq_len - body)),
                         sequences, seq_len, max_steps, per_step, note)

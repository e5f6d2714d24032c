"""BIOSSES: 100 sentence pairs from biomedical papers, each scored 0-4 by five annotators (regression).

Files (MANIFEST section 6):

- `BIOSSES/annotation_pairs_scores.tsv`: header, then `sentence_id, sentence_1, sentence_2,
  annotator_a .. annotator_e`.
- `BIOSSES/blurb_split.tsv`: `sentence_id<TAB>split`, BLURB's 64/16/20 split transcribed from the
  BLUE/BLURB index lists.

The gold score is the mean of the five annotators, as in BLUE and BLURB. Some sentences end in stray
spaces in the source spreadsheet; they are stripped so that the tokenizer never sees them.
"""

from __future__ import annotations

from pathlib import Path

from bioablate_core.errors import DataFormatError
from datamodules.instances import PairInstance
from datamodules.spec import SPLITS, Splits
from datamodules.textfiles import read_text_lines

# Bumped whenever the instances this module's readers return change: it enters their datasets'
# fingerprints in place of the code's bytes (DatasetSpec.fingerprint).
READER_VERSION = 1

PAIRS_FILE = "BIOSSES/annotation_pairs_scores.tsv"
SPLIT_FILE = "BIOSSES/blurb_split.tsv"

ANNOTATORS = ("annotator_a", "annotator_b", "annotator_c", "annotator_d", "annotator_e")
PAIRS_HEADER = ("sentence_id", "sentence_1", "sentence_2", *ANNOTATORS)
SPLIT_HEADER = ("sentence_id", "split")
MIN_SCORE, MAX_SCORE = 0.0, 4.0


def read_biosses(data_dir: Path) -> Splits:
    """Read the 100 pairs and assign them to BLURB's train/dev/test (64/16/20).

    Instances keep the order of the pairs file within each split. Both files must list exactly the
    same ids: a pair without a split (or a split row without a pair) would silently change the split
    sizes, so either is an error.
    """
    pairs_path = Path(data_dir) / PAIRS_FILE
    split_path = Path(data_dir) / SPLIT_FILE
    pairs = _read_pairs(pairs_path)
    split_of = _read_split(split_path)

    without_split = [pid for pid in pairs if pid not in split_of]
    if without_split:
        raise DataFormatError(
            split_path, None, f"no split given for sentence_id(s) {', '.join(without_split)} of {PAIRS_FILE}"
        )
    without_pair = [pid for pid in split_of if pid not in pairs]
    if without_pair:
        raise DataFormatError(
            pairs_path, None, f"no sentence pair for sentence_id(s) {', '.join(without_pair)} of {SPLIT_FILE}"
        )

    splits: Splits = {name: [] for name in SPLITS}
    for pid, pair in pairs.items():
        splits[split_of[pid]].append(pair)
    return splits


def _read_rows(path: Path, header: tuple[str, ...]) -> list[tuple[int, list[str]]]:
    """Tab-separated rows after the expected header, as (1-based line number, fields)."""
    lines = read_text_lines(path)
    if not lines or tuple(lines[0].split("\t")) != header:
        raise DataFormatError(path, 1, f"expected the header {'<TAB>'.join(header)}")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != len(header):
            raise DataFormatError(
                path, number, f"expected {len(header)} tab-separated fields ({', '.join(header)}), found {len(fields)}"
            )
        rows.append((number, fields))
    return rows


def _read_pairs(path: Path) -> dict[str, PairInstance]:
    pairs: dict[str, PairInstance] = {}
    for number, (pid, sentence_1, sentence_2, *scores) in _read_rows(path, PAIRS_HEADER):
        if pid in pairs:
            raise DataFormatError(path, number, f"sentence_id {pid} occurs twice")
        values = []
        for annotator, score in zip(ANNOTATORS, scores):
            try:
                value = float(score)
            except ValueError:
                raise DataFormatError(
                    path, number, f"{annotator} score {score!r} is not a number (expected {MIN_SCORE:g}-{MAX_SCORE:g})"
                ) from None
            if not MIN_SCORE <= value <= MAX_SCORE:
                raise DataFormatError(
                    path, number, f"{annotator} score {value:g} is outside {MIN_SCORE:g}-{MAX_SCORE:g}"
                )
            values.append(value)
        pairs[pid] = PairInstance(
            id=pid, text_a=sentence_1.strip(), text_b=sentence_2.strip(), label=sum(values) / len(values)
        )
    return pairs


def _read_split(path: Path) -> dict[str, str]:
    split_of: dict[str, str] = {}
    for number, (pid, split) in _read_rows(path, SPLIT_HEADER):
        if split not in SPLITS:
            raise DataFormatError(path, number, f"split {split!r} is not one of {', '.join(SPLITS)}")
        if pid in split_of:
            raise DataFormatError(path, number, f"sentence_id {pid} occurs twice")
        split_of[pid] = split
    return split_of

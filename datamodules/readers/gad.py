"""GAD (Genetic Association Database) gene–disease association sentences, BioBERT's fold 1.

The files come with entities already dummified: every sentence holds exactly one `@GENE$` and one
`@DISEASE$`, which become the head and tail mentions, so the fine-tuning input transform treats GAD like
the other relation datasets (for GAD, "dummify" reproduces the text as distributed). `train.tsv` has no
header (`sentence<TAB>label`); `test.tsv` has one (`index<TAB>sentence<TAB>label`). Labels stay the
strings "1" (association) and "0".

Dev: BLURB's 535-sentence dev subset of the fold-1 training file was not published, so we carve one
with `random.Random(DEV_SEED)`. The training file repeats 169 sentences verbatim (177 extra rows, always
with the same label); identical sentences are kept in one split so that dev never scores a sentence
seen in training.
(8 test sentences also occur in the training file, as distributed.)
"""

from __future__ import annotations

import random
from pathlib import Path

from bioablate_core.errors import DataFormatError
from datamodules.instances import Mention, RelationInstance
from datamodules.spec import Splits
from datamodules.textfiles import decode_utf8, read_bytes

# Bumped whenever the instances this module's readers return change: it enters their datasets'
# fingerprints in place of the code's bytes (DatasetSpec.fingerprint).
READER_VERSION = 1

TRAIN_FILE = "GAD/train.tsv"
TEST_FILE = "GAD/test.tsv"
TEST_HEADER = ("index", "sentence", "label")

DEV_SIZE = 535  # the paper's train / dev / test: 4,261 / 535 / 534
DEV_SEED = 2015  # the year of the GAD corpus paper (Bravo et al.)

GENE_PLACEHOLDER = "@GENE$"
DISEASE_PLACEHOLDER = "@DISEASE$"
LABELS = ("0", "1")


def _mention(path: Path, line: int, sentence: str, placeholder: str, typ: str) -> Mention:
    count = sentence.count(placeholder)
    if count != 1:
        raise DataFormatError(
            path, line, f"expected exactly one {placeholder} in the sentence, found {count}"
        )
    start = sentence.index(placeholder)
    return Mention(start, start + len(placeholder), typ)


def _instance(path: Path, line: int, row_id: str, sentence: str, label: str) -> RelationInstance:
    if label not in LABELS:
        raise DataFormatError(path, line, f"expected label 0 or 1 in the last column, got {label!r}")
    return RelationInstance(
        id=row_id,
        text=sentence,
        head=_mention(path, line, sentence, GENE_PLACEHOLDER, "GENE"),
        tail=_mention(path, line, sentence, DISEASE_PLACEHOLDER, "DISEASE"),
        label=label,
    )


def _lines(path: Path) -> list[tuple[int, str]]:
    """(1-based line number, line) of the non-empty lines."""
    # split on "\n" only: a stray "\r" or U+2028 inside a sentence is text, not a line break
    text = decode_utf8(path, read_bytes(path))
    return [(n, line.rstrip("\r")) for n, line in enumerate(text.split("\n"), start=1) if line.strip()]


def read_gad_train_file(path: Path) -> list[RelationInstance]:
    """`sentence<TAB>label` rows, no header; ids `train-<row>` (0-based row)."""
    instances = []
    for row, (line, text) in enumerate(_lines(path)):
        fields = text.split("\t")
        if len(fields) != 2:
            raise DataFormatError(
                path, line, f"expected 2 TAB-separated columns (sentence, label), got {len(fields)}"
            )
        instances.append(_instance(path, line, f"train-{row}", *fields))
    return instances


def read_gad_test_file(path: Path) -> list[RelationInstance]:
    """A header `index<TAB>sentence<TAB>label`, then rows; ids `test-<index>`."""
    lines = _lines(path)
    expected_header = "expected the header 'index<TAB>sentence<TAB>label'"
    if not lines:
        raise DataFormatError(path, None, f"{expected_header}, got an empty file")
    if tuple(lines[0][1].split("\t")) != TEST_HEADER:
        raise DataFormatError(path, lines[0][0], f"{expected_header}, got {lines[0][1][:60]!r}")
    instances, seen = [], set()
    for line, text in lines[1:]:
        fields = text.split("\t")
        if len(fields) != 3:
            columns = "3 TAB-separated columns (index, sentence, label)"
            raise DataFormatError(path, line, f"expected {columns}, got {len(fields)}")
        index, sentence, label = fields
        if index in seen:
            raise DataFormatError(path, line, f"duplicate index {index!r}")
        seen.add(index)
        instances.append(_instance(path, line, f"test-{index}", sentence, label))
    return instances


def split_dev(
    instances: list[RelationInstance], size: int, seed: int
) -> tuple[list[RelationInstance], list[RelationInstance]]:
    """(train, dev): `size` instances for dev, drawn as whole groups of identical sentences.

    Groups are shuffled with `random.Random(seed)` and added to dev while they fit, so dev has exactly
    `size` instances (as long as enough singletons exist, which on GAD they do by far). Both parts keep
    the file order.
    """
    groups: dict[str, list[int]] = {}
    for position, instance in enumerate(instances):
        groups.setdefault(instance.text, []).append(position)
    order = list(groups.values())
    random.Random(seed).shuffle(order)
    dev: set[int] = set()
    for group in order:
        if len(dev) + len(group) <= size:
            dev.update(group)
        if len(dev) == size:
            break
    return (
        [x for i, x in enumerate(instances) if i not in dev],
        [x for i, x in enumerate(instances) if i in dev],
    )


def read_gad(data_dir: Path) -> Splits:
    """GAD fold 1: train and a seeded dev carved from `train.tsv`; test from `test.tsv`."""
    train, dev = split_dev(read_gad_train_file(Path(data_dir) / TRAIN_FILE), DEV_SIZE, DEV_SEED)
    return {"train": train, "dev": dev, "test": read_gad_test_file(Path(data_dir) / TEST_FILE)}

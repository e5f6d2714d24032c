"""BioBERT's species NER files (LINNAEUS, Species-800; MANIFEST.md section 12).

`token<TAB>tag` lines, a blank line after each sentence, and *untyped* tags `B`, `I`, `O` (the
Crichton files of the BLURB readers in `ner.py` carry typed tags such as `B-Chemical`, which that
reader's tag check requires). Every mention here is a species, so each tag gets the one type the
dataset declares (`SPECIES`) before spans are built, as `ner.py` collapses BLURB's types.
"""

from __future__ import annotations

from pathlib import Path

from bioablate_core.errors import DataFormatError
from datamodules.instances import TaggingInstance, iob_to_spans
from datamodules.readers import bound
from datamodules.spec import Reader, Splits, shown
from datamodules.textfiles import conll_blocks

# Bumped whenever the instances this module's readers return change: it enters their datasets'
# fingerprints in place of the code's bytes (DatasetSpec.fingerprint).
READER_VERSION = 1

# BioBERT's file name per split ("devel" is its name for the development set)
BIOBERT_NER_FILES = {"train": "train.tsv", "dev": "devel.tsv", "test": "test.tsv"}
UNTYPED_TAGS = ("B", "I", "O")


def read_untyped_iob_file(path: Path, entity_type: str) -> list[TaggingInstance]:
    """Sentences of one file; ids `<file stem>-<sentence index>`. A `B`/`I` becomes `B-<type>`/`I-<type>`,
    so an `I` after `O` starts a mention (conlleval's reading, as `iob_to_spans` does)."""
    path = Path(path)
    typed = {"B": f"B-{entity_type}", "I": f"I-{entity_type}", "O": "O"}
    instances: list[TaggingInstance] = []
    for sentence in conll_blocks(path):
        tokens, tags = [], []
        for line_number, line in sentence:
            fields = line.split("\t")
            if len(fields) != 2 or not fields[0].strip() or fields[1].strip() not in typed:
                raise DataFormatError(
                    path, line_number,
                    f"expected 'token<TAB>tag' with a non-empty token and an untyped tag B, I or O, got {shown(line)}",
                )
            tokens.append(fields[0].strip())
            tags.append(typed[fields[1].strip()])
        instances.append(TaggingInstance(f"{path.stem}-{len(instances)}", tuple(tokens), iob_to_spans(tags)))
    return instances


def read_biobert_ner(folder: str, entity_type: str) -> Reader:
    """A reader for `<data_dir>/<folder>/{train,devel,test}.tsv` (picklable, for DDP's spawn start method)."""
    return bound(_read_biobert_ner, folder, entity_type)


def _read_biobert_ner(folder: str, entity_type: str, data_dir: Path) -> Splits:
    base = Path(data_dir) / folder
    return {split: read_untyped_iob_file(base / name, entity_type) for split, name in BIOBERT_NER_FILES.items()}

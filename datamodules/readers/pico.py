"""Reader for EBM-PICO as distributed with SciBERT (`EBM-PICO/{dev,test}.txt`, MANIFEST section 2).

Only SciBERT's dev and test files could be staged; its train file could not. Following the MANIFEST,
the staged dev abstracts are the pool for both training and development, split by document so no
abstract contributes sentences to two splits, and the staged test file (191 expert-annotated
abstracts) is the test set. Scores are therefore not comparable to the paper's.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from bioablate_core.errors import DataFormatError
from datamodules.instances import TaggingInstance, iob_to_spans
from datamodules.spec import Splits, shown
from datamodules.textfiles import conll_blocks

# Bumped whenever the instances this module's readers return change: it enters their datasets'
# fingerprints in place of the code's bytes (DatasetSpec.fingerprint).
READER_VERSION = 1

PICO_DIR = "EBM-PICO"
PICO_TYPES = ("PAR", "INT", "OUT")
SPLIT_SEED = 13
DEV_FRACTION = 0.1

_DOCSTART = re.compile(r"-DOCSTART- \((\S+)\)")
_LABEL = re.compile(rf"O|[BI]-(?:{'|'.join(PICO_TYPES)})")

Document = tuple[str, list[TaggingInstance]]


def read_pico_file(path: Path) -> list[Document]:
    """The abstracts of a SciBERT EBM-PICO file, in file order, as `(pmid, segments)`.

    Each abstract starts with `-DOCSTART- (<PMID>)`; blank lines split it into segments (roughly
    sentences), each one instance with id `<pmid>-<segment index>`. Token lines are
    `token NN O <label>` (the middle columns are placeholders). Labels are IO (`I-PAR`, `I-INT`,
    `I-OUT`, `O`), so a span is a maximal run of one type, labelled `PAR`, `INT` or `OUT`.
    """
    path = Path(path)
    documents: list[Document] = []
    for block in conll_blocks(path):
        tokens: list[str] = []
        labels: list[str] = []
        for line_number, line in block:
            line = line.lstrip()
            if line.startswith("-DOCSTART-"):
                match = _DOCSTART.fullmatch(line)
                if match is None:
                    raise DataFormatError(
                        path, line_number, f"expected '-DOCSTART- (<PMID>)', got {shown(line)}; fix the header"
                    )
                _add_segment(documents, tokens, labels)  # the lines above the header end the previous abstract
                tokens, labels = [], []
                documents.append((match.group(1), []))
                continue
            columns = line.split()
            if len(columns) != 4 or not _LABEL.fullmatch(columns[3]):
                raise DataFormatError(
                    path,
                    line_number,
                    "expected 'token NN O <label>' (4 space-separated columns, label O or "
                    f"I-PAR/I-INT/I-OUT), got {shown(line)}; fix or remove this line",
                )
            if not documents:
                raise DataFormatError(
                    path, line_number, "token line before the first '-DOCSTART- (<PMID>)' header; add one"
                )
            tokens.append(columns[0])
            labels.append(columns[3])
        _add_segment(documents, tokens, labels)
    return documents


def _add_segment(documents: list[Document], tokens: list[str], labels: list[str]) -> None:
    """The tokens as the next segment of the last document (none where there are no tokens)."""
    if tokens:
        pmid, segments = documents[-1]
        segments.append(TaggingInstance(f"{pmid}-{len(segments)}", tuple(tokens), iob_to_spans(labels)))


def split_pool(pmids: list[str]) -> dict[str, list[str]]:
    """Document-level train/dev split of the staged dev pool, fixed forever.

    Rule: sort the PMIDs (as strings), shuffle them with `random.Random(13)`; the first 10% (rounded)
    are dev, the rest train. Both lists are returned sorted. Sorting first makes the split independent
    of the file's order; for the staged 960 abstracts it gives 864 train and 96 dev.
    """
    shuffled = sorted(pmids)
    random.Random(SPLIT_SEED).shuffle(shuffled)
    n_dev = round(len(shuffled) * DEV_FRACTION)
    return {"train": sorted(shuffled[n_dev:]), "dev": sorted(shuffled[:n_dev])}


def _read_documents(data_dir: Path) -> dict[str, list[Document]]:
    folder = Path(data_dir) / PICO_DIR
    pool = read_pico_file(folder / "dev.txt")
    split = split_pool([pmid for pmid, _ in pool])
    dev_pmids = set(split["dev"])
    return {
        "train": [doc for doc in pool if doc[0] not in dev_pmids],
        "dev": [doc for doc in pool if doc[0] in dev_pmids],
        "test": read_pico_file(folder / "test.txt"),
    }


def read_ebm_pico(data_dir: Path) -> Splits:
    """EBM-PICO splits: train/dev from the staged dev file (`split_pool`), test from test.txt.

    Instances keep file order within each split.
    """
    return {
        name: [segment for _, segments in documents for segment in segments]
        for name, documents in _read_documents(data_dir).items()
    }


def pico_document_ids(data_dir: Path) -> dict[str, list[str]]:
    """The PMIDs of each split, in file order."""
    return {name: [pmid for pmid, _ in documents] for name, documents in _read_documents(data_dir).items()}

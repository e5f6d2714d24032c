"""HoC (Hallmarks of Cancer): 1 852 PubMed abstracts, multi-label document classification.

Files (MANIFEST section 7), one pair per abstract:

- `HoC/text/<PMID>.txt`: one tokenised sentence per line.
- `HoC/labels/<PMID>.txt`: a single line; splitting it on `<` gives one leading field plus one field per
  sentence. A sentence's field holds its labels joined by `AND` (written without a following space, as
  in `...--ReceptorsANDSustaining ...`), each label a path in the 37-class taxonomy joined by `--`;
  `NULL` means "no label".

BLURB classifies whole abstracts into the 10 top-level hallmarks, so an abstract's labels are the union
of its sentences' top-level classes. 272 abstracts end up with no hallmark: 270 whose label fields are
all empty and 2 whose only annotation is `NULL`.

BLURB's split lists were never published in an obtainable form, so the split comes from the frozen file
`datamodules/splits/hoc.tsv` (see `datamodules/splits/README.md`). Reading it instead of re-drawing it
keeps the split identical across versions of this code and of Python's `random`.
"""

from __future__ import annotations

from pathlib import Path

from bioablate_core.errors import DataFormatError
from datamodules.instances import TextInstance
from datamodules.spec import SPLITS, Splits, shown
from datamodules.textfiles import read_text

# Bumped whenever the instances this module's readers return change: it enters their datasets'
# fingerprints in place of the code's bytes (DatasetSpec.fingerprint).
READER_VERSION = 1

TEXT_DIR = "HoC/text"
LABELS_DIR = "HoC/labels"

# The 10 top-level hallmarks, spelled as in the corpus, in alphabetical order (a fixed order, so that
# label indices never depend on which labels a split happens to contain).
HOC_LABELS = (
    "Activating invasion and metastasis",
    "Avoiding immune destruction",
    "Cellular energetics",
    "Enabling replicative immortality",
    "Evading growth suppressors",
    "Genomic instability and mutation",
    "Inducing angiogenesis",
    "Resisting cell death",
    "Sustaining proliferative signaling",
    "Tumor promoting inflammation",
)

HOC_SPLIT_FILE = Path(__file__).resolve().parent.parent / "splits" / "hoc.tsv"
SPLIT_HEADER = ("pmid", "split")

_LABEL_SEPARATOR = "AND"
_LEVEL_SEPARATOR = "--"
_NO_LABEL = "NULL"


def _normalise(label: str) -> str:
    """Case- and whitespace-insensitive key, so spacing variants in the corpus map to one hallmark."""
    return " ".join(label.lower().split())


_CANONICAL = {_normalise(label): label for label in HOC_LABELS}


def read_hoc(data_dir: Path, split_file: Path = HOC_SPLIT_FILE) -> Splits:
    """Read every abstract and place it in the split the frozen split file gives it.

    Within a split, abstracts follow the split file's order (ascending PMID). Every abstract must have
    exactly one split row and every split row an abstract: a mismatch means the data or the split file
    is not the one the published sizes (1295 / 186 / 371) were made from.
    """
    text_dir = Path(data_dir) / TEXT_DIR
    labels_dir = Path(data_dir) / LABELS_DIR
    split_rows = read_split_file(split_file)

    pmids = {path.stem for path in text_dir.glob("*.txt")}
    for pmid in sorted(pmids):
        if not (labels_dir / f"{pmid}.txt").is_file():
            raise DataFormatError(
                labels_dir / f"{pmid}.txt", None, f"missing: PMID {pmid} has a text file but no labels"
            )
        if pmid not in split_rows:
            raise DataFormatError(split_file, None, f"PMID {pmid} (from {TEXT_DIR}) has no row in the split file")
    for pmid, (number, _) in split_rows.items():
        if pmid not in pmids:
            raise DataFormatError(split_file, number, f"PMID {pmid} has no abstract in {TEXT_DIR}")

    splits: Splits = {name: [] for name in SPLITS}
    for pmid, (_, split) in split_rows.items():
        splits[split].append(_read_abstract(text_dir / f"{pmid}.txt", labels_dir / f"{pmid}.txt"))
    return splits


def read_split_file(path: Path = HOC_SPLIT_FILE) -> dict[str, tuple[int, str]]:
    """PMID -> (1-based line number, split) from a `pmid<TAB>split` file with a header."""
    lines = read_text(path).splitlines()
    if not lines or tuple(lines[0].split("\t")) != SPLIT_HEADER:
        raise DataFormatError(path, 1, f"expected the header {'<TAB>'.join(SPLIT_HEADER)}")
    rows: dict[str, tuple[int, str]] = {}
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split("\t")
        if len(fields) != 2 or not fields[0].isdigit():
            raise DataFormatError(path, number, f"expected <PMID><TAB><split>, found {shown(line)}")
        pmid, split = fields
        if split not in SPLITS:
            raise DataFormatError(path, number, f"split {split!r} is not one of {', '.join(SPLITS)}")
        if pmid in rows:
            raise DataFormatError(path, number, f"PMID {pmid} occurs twice")
        rows[pmid] = (number, split)
    return rows


def _read_abstract(text_path: Path, labels_path: Path) -> TextInstance:
    sentences = [line.strip() for line in read_text(text_path).splitlines()]
    fields = read_text(labels_path).rstrip("\n").split("<")
    if len(fields) != len(sentences) + 1:
        raise DataFormatError(
            labels_path,
            1,
            f"expected {len(sentences) + 1} '<'-separated fields (a leading one plus one per sentence of "
            f"{text_path.name}, which has {len(sentences)}), found {len(fields)}",
        )
    labels = set()
    for sentence_number, field in enumerate(fields[1:], start=1):
        for label in field.split(_LABEL_SEPARATOR):
            label = label.strip()
            if not label or label == _NO_LABEL:
                continue
            top = label.split(_LEVEL_SEPARATOR, 1)[0]
            if _normalise(top) not in _CANONICAL:
                raise DataFormatError(
                    labels_path,
                    1,
                    f"sentence {sentence_number}: unknown top-level hallmark {top.strip()!r}; expected one of "
                    f"{', '.join(HOC_LABELS)}",
                )
            labels.add(_CANONICAL[_normalise(top)])
    return TextInstance(id=text_path.stem, text=" ".join(sentences), labels=tuple(sorted(labels)))

"""DDI 2013 (DDIExtraction shared task) drug–drug interaction pairs.

Every `<pair>` of the XML corpus is one instance: BLURB's counts (train 25,296 + dev 2,496 = 27,792 and
test 5,716) are exactly the pairs of `Train/` and of the DDI-extraction part of `Test/`. `head` is the
pair's `e1`, `tail` its `e2` (e1 always comes first in the sentence). The sentence text is the `text`
attribute as the XML parser decodes it, unchanged: `&#xd;&#xa;` becomes a real CR LF (kept, so that the
entity offsets, which index into the decoded text, stay valid).

Decisions (see docs/data.md, "Relation extraction"):

- Label: the pair's `type` (mechanism / effect / advise / int) when `ddi="true"`, else `false`. One
  training pair (DDI-DrugBank.d236.s29.p0) is `ddi="true"` without a type; the DDIExtraction evaluation
  only scores typed pairs, so it is `false`.
- `charOffset` ends are inclusive; a discontinuous entity ("loop diuretics" = "loop, potassium-sparing
  and thiazide diuretics" at "150-153;187-195") becomes the span from its first start to its last end.
- Every entity is a DRUG mention; the fine types (drug, brand, group, drug_n) are not kept.
- BLURB carved dev out of `Train/` by document (624 / 90 files) but did not publish which 90; we
  shuffle the sorted training file names with `random.Random(DEV_SEED)` and take the first `DEV_FILES`
  as dev. Document sizes vary a lot (a random 90 files hold 3,472 +- 950 pairs), so the seed is the
  smallest one whose dev set has the paper's 2,496 pairs: our train / dev sizes equal Table 3's even
  though the documents are not BLURB's.
"""

from __future__ import annotations

import random
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from bioablate_core.errors import DataFormatError
from datamodules.instances import Mention, RelationInstance
from datamodules.spec import Splits

# Bumped whenever the instances this module's readers return change: it enters their datasets'
# fingerprints in place of the code's bytes (DatasetSpec.fingerprint).
READER_VERSION = 1

TRAIN_DIR = "DDI/Train"
TEST_DIR = "DDI/Test/Test for DDI Extraction task"
SOURCES = ("DrugBank", "MedLine")

DEV_FILES = 90  # the paper's train/dev/test split is 624/90/191 documents
DEV_SEED = 1282  # smallest seed giving the paper's 25,296 / 2,496 pairs (module docstring)

INTERACTION_TYPES = ("mechanism", "effect", "advise", "int")
NEGATIVE_LABEL = "false"

_OFFSETS = re.compile(r"\d+-\d+(?:;\d+-\d+)*")


def _xml_files(folder: Path) -> list[str]:
    """Sorted `<source>/<file>.xml` names under a corpus folder (both sources)."""
    return sorted(f"{source}/{p.name}" for source in SOURCES for p in (folder / source).glob("*.xml"))


def ddi_document_split(data_dir: Path) -> dict[str, list[Path]]:
    """The XML files of each split: dev is a seeded random `DEV_FILES` of the training files."""
    train_dir, test_dir = Path(data_dir) / TRAIN_DIR, Path(data_dir) / TEST_DIR
    names = _xml_files(train_dir)
    shuffled = list(names)
    random.Random(DEV_SEED).shuffle(shuffled)
    dev = set(shuffled[:DEV_FILES])
    return {
        "train": [train_dir / n for n in names if n not in dev],
        "dev": [train_dir / n for n in names if n in dev],
        "test": [test_dir / n for n in _xml_files(test_dir)],
    }


def _attribute(path: Path, element: ET.Element, name: str) -> str:
    value = element.get(name)
    if value is None:
        where = element.get("id", f"a <{element.tag}> element")
        raise DataFormatError(path, None, f"{where}: expected a {name!r} attribute")
    return value


def _mention(path: Path, entity: ET.Element, text: str) -> Mention:
    """The entity's span in the sentence: inclusive XML offsets made end-exclusive, fragments joined."""
    offsets = _attribute(path, entity, "charOffset")
    if not _OFFSETS.fullmatch(offsets):
        expected = "expected charOffset 'start-end' or 'start-end;start-end'"
        raise DataFormatError(path, None, f"{entity.get('id')}: {expected}, got {offsets!r}")
    fragments = [[int(x) for x in part.split("-")] for part in offsets.split(";")]
    start, end = min(f[0] for f in fragments), max(f[1] for f in fragments) + 1
    if not start < end <= len(text):
        raise DataFormatError(
            path, None, f"{entity.get('id')}: charOffset {offsets} is not a span inside its sentence"
        )
    # Continuous mentions must reproduce their text; this is what checks the inclusive-end convention.
    if len(fragments) == 1 and text[start:end] != entity.get("text"):
        covered = f"charOffset {offsets} covers {text[start:end]!r}, not {entity.get('text')!r}"
        raise DataFormatError(path, None, f"{entity.get('id')}: {covered}")
    return Mention(start, end, "DRUG")


def _label(path: Path, pair: ET.Element) -> str:
    ddi = _attribute(path, pair, "ddi")
    if ddi not in ("true", "false"):
        raise DataFormatError(
            path, None, f"{pair.get('id')}: expected ddi='true' or 'false', got {ddi!r}"
        )
    kind = pair.get("type")
    if kind is not None and kind not in INTERACTION_TYPES:
        raise DataFormatError(
            path, None, f"{pair.get('id')}: expected type {'/'.join(INTERACTION_TYPES)}, got {kind!r}"
        )
    return kind if ddi == "true" and kind is not None else NEGATIVE_LABEL


def read_ddi_file(path: Path) -> list[RelationInstance]:
    """The pairs of one DDI XML document, in document order; ids are the corpus pair ids."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as err:
        raise DataFormatError(path, err.position[0], f"not well-formed XML ({err})") from err
    instances = []
    for sentence in root.iter("sentence"):
        text = _attribute(path, sentence, "text")
        mentions = {_attribute(path, e, "id"): _mention(path, e, text) for e in sentence.iter("entity")}
        for pair in sentence.iter("pair"):
            e1, e2 = _attribute(path, pair, "e1"), _attribute(path, pair, "e2")
            if e1 not in mentions or e2 not in mentions:
                raise DataFormatError(
                    path, None, f"{pair.get('id')}: entities {e1}, {e2} are not in its sentence"
                )
            instances.append(
                RelationInstance(
                    id=_attribute(path, pair, "id"),
                    text=text,
                    head=mentions[e1],
                    tail=mentions[e2],
                    label=_label(path, pair),
                )
            )
    return instances


def read_ddi(data_dir: Path) -> Splits:
    """DDI train / dev / test: every annotated drug pair, files in sorted order."""
    return {
        split: [instance for path in files for instance in read_ddi_file(path)]
        for split, files in ddi_document_split(data_dir).items()
    }

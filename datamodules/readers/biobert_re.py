"""BioBERT's 10-fold relation-extraction sets, GAD and EU-ADR (MANIFEST.md section 12).

Each fold is a folder `<dataset>/<k>/` with `train.tsv` (no header; `sentence<TAB>label`) and `test.tsv`
(header `index<TAB>sentence<TAB>label`), entities already replaced by `@GENE$` and `@DISEASE$`: the format
of BLURB's GAD (which is BioBERT's GAD fold 1), so the rows are parsed by that reader's file functions
(`readers/gad.py`) and come out as the same `RelationInstance`s, the placeholders as head and tail, and
the existing relation encoder takes them unchanged. There is no dev split: the dataset's protocol
carves one from each fold's train (`DatasetSpec.carve_dev`).

A change to that parsing that changes these datasets' instances bumps `READER_VERSION` here as well
as in `readers/gad.py`: a reader's version covers everything it calls.
"""

from __future__ import annotations

from pathlib import Path

from datamodules.readers import bound, gad
from datamodules.spec import Splits

# Bumped whenever the instances this module's readers return change: it enters their datasets'
# fingerprints in place of the code's bytes (DatasetSpec.fingerprint).
READER_VERSION = 1

FOLD_COUNT = 10


def fold_templates(folder: str) -> tuple[str, str]:
    """The files of fold `{fold}` below the data directory (see `FileFolds`)."""
    return (f"{folder}/{{fold}}/train.tsv", f"{folder}/{{fold}}/test.tsv")


def read_biobert_re_fold(folder: str):
    """A fold reader, reader(data_dir, k), for `<data_dir>/<folder>/<k>/{train,test}.tsv` (picklable, for
    DDP's spawn start method)."""
    return bound(_read_biobert_re_fold, folder)


def _read_biobert_re_fold(folder: str, data_dir: Path, fold: int) -> Splits:
    train_file, test_file = (Path(data_dir) / t.format(fold=fold) for t in fold_templates(folder))
    return {"train": gad.read_gad_train_file(train_file), "test": gad.read_gad_test_file(test_file)}

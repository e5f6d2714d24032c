"""The 13 BLURB datasets (paper Table 3), under the names users write in configs.

Each entry holds its staged files, reader, task, metric, the paper's maximum sequence length (Sec. 2.4)
and Table 3 counts, and the data's licences for model cards; `docs/data.md` explains every difference.
"""

from __future__ import annotations

from datamodules.readers.bioasq import DEV_IDS_FILE, TEST_FILE, TRAIN_FILES, read_bioasq
from datamodules.readers.biosses import read_biosses
from datamodules.readers.chemprot import chemprot_files, read_chemprot
from datamodules.readers.ddi import read_ddi
from datamodules.readers.gad import read_gad
from datamodules.readers.hoc import HOC_LABELS, HOC_SPLIT_FILE, read_hoc
from datamodules.readers.ner import read_crichton, read_jnlpba
from datamodules.readers.pico import read_ebm_pico
from datamodules.readers.pubmedqa import read_pubmedqa
from datamodules.spec import DatasetSpec

CHEMPROT_LABELS = ("CPR:3", "CPR:4", "CPR:5", "CPR:6", "CPR:9", "false")
DDI_LABELS = ("mechanism", "effect", "advise", "int", "false")


def _counts(train: int, dev: int, test: int) -> dict[str, int]:
    return {"train": train, "dev": dev, "test": test}


def _crichton(name: str, folder: str, entity: str, counts: dict[str, int], notes: str = "") -> DatasetSpec:
    return DatasetSpec(
        name=name, task_type="ner", reader=read_crichton(folder, entity),
        files=tuple(f"{folder}/{split}.tsv" for split in ("train", "devel", "test")),
        labels=(entity,), metric="entity_f1", max_length=512, count_unit="mentions",
        paper_counts=counts, notes=notes, licenses=("cc-by-4.0",),  # Crichton et al.'s README
    )


BLURB_DATASETS: tuple[DatasetSpec, ...] = (
    _crichton("bc5-chem", "BC5CDR-chem-IOB", "Chemical", _counts(5203, 5347, 5385)),
    _crichton("bc5-disease", "BC5CDR-disease-IOB", "Disease", _counts(4182, 4244, 4424),
              notes="staged Crichton devel.tsv has 2 more mentions than the paper reports"),
    _crichton("ncbi-disease", "NCBI-disease-IOB", "Disease", _counts(5134, 787, 960)),
    _crichton("bc2gm", "BC2GM-IOB", "Gene", _counts(15197, 3061, 6325)),

    DatasetSpec(
        name="jnlpba", task_type="ner", reader=read_jnlpba,
        files=("JNLPBA/devel.tsv", "JNLPBA/test.tsv", "JNLPBA/standoff-train",
               "JNLPBA/crichton_devel_standoff_ids.txt"),
        labels=("Entity",), metric="entity_f1", max_length=512, count_unit="mentions",
        paper_counts=_counts(46750, 4551, 8662), licenses=("genia-project-license",),  # JNLPBA/LICENSE-GENIA
        notes="train rebuilt from the brat standoff files minus the 200 Crichton devel documents",
    ),

    DatasetSpec(
        name="ebm-pico", task_type="pico", reader=read_ebm_pico,
        files=("EBM-PICO/dev.txt", "EBM-PICO/test.txt"),
        labels=("PAR", "INT", "OUT"), metric="pico_word_macro_f1", max_length=512,
        metric_args={"labels": ("PAR", "INT", "OUT")}, count_unit="PICO words",
        paper_counts=_counts(339167, 85321, 16364), licenses=(),  # EBM-NLP states none
        notes="no training split is staged: train/dev are a seeded 90/10 document split of the staged "
              "SciBERT dev set; scores are not comparable to the paper's",
    ),

    DatasetSpec(
        name="chemprot", task_type="re", reader=read_chemprot,
        files=tuple(f"ChemProt/{d}" for d in ("chemprot_training", "chemprot_development", "chemprot_test_gs")),
        inner_files=tuple(path for split in ("train", "dev", "test") for path in chemprot_files(split).values()),
        labels=CHEMPROT_LABELS, metric="relation_micro_f1",
        metric_args={"negative": "false", "labels": CHEMPROT_LABELS}, max_length=256, count_unit="pairs",
        paper_counts=_counts(18035, 11268, 15745), licenses=(),  # BioCreative's corpus: no licence stated
        notes="sentence-level pairs generated from the raw corpus; sentence splitting differs from BLURB's",
    ),

    DatasetSpec(
        name="ddi", task_type="re", reader=read_ddi,
        files=("DDI/Train/DrugBank", "DDI/Train/MedLine", "DDI/Test/Test for DDI Extraction task"),
        labels=DDI_LABELS, metric="relation_micro_f1",
        metric_args={"negative": "false", "labels": DDI_LABELS}, max_length=256, count_unit="pairs",
        paper_counts=_counts(25296, 2496, 5716), licenses=("cc-by-nc-4.0",),  # the DDI corpus' README
        notes="BLURB's 624/90 train/dev file split is not published: ours is seeded (the first seed whose "
              "dev set has the paper's 2,496 pairs), so the dev files may differ from BLURB's",
    ),

    DatasetSpec(
        name="gad", task_type="re", reader=read_gad, files=("GAD/train.tsv", "GAD/test.tsv"),
        labels=("0", "1"), metric="positive_class_f1", metric_args={"positive": "1"}, max_length=128,
        count_unit="pairs", paper_counts=_counts(4261, 535, 534), licenses=("cc-by-4.0",),  # as bigbio lists it
        notes="BLURB's dev subset is not published: 535 dev examples carved from fold-1 train, seeded",
    ),

    DatasetSpec(
        name="biosses", task_type="similarity", reader=read_biosses,
        files=("BIOSSES/annotation_pairs_scores.tsv", "BIOSSES/blurb_split.tsv"),
        labels=(), metric="pearson", max_length=512, count_unit="pairs",
        paper_counts=_counts(64, 16, 20), licenses=("gpl-3.0",),  # bigbio's card
    ),

    DatasetSpec(
        name="hoc", task_type="classification", reader=read_hoc, files=("HoC/text", "HoC/labels"),
        labels=tuple(HOC_LABELS), metric="multilabel_micro_f1", metric_args={"labels": tuple(HOC_LABELS)},
        multi_label=True, max_length=512, count_unit="abstracts", paper_counts=_counts(1295, 186, 371),
        package_files=(HOC_SPLIT_FILE,), licenses=("gpl-3.0",),  # the corpus repository's LICENSE
        notes="BLURB's split ids are not published: a seeded document split with BLURB's sizes, frozen "
              "in datamodules/splits/hoc.tsv",
    ),

    DatasetSpec(
        name="pubmedqa", task_type="qa", reader=read_pubmedqa,
        files=("PubMedQA/ori_pqal.json", "PubMedQA/test_ground_truth.json"),
        labels=("yes", "no", "maybe"), metric="accuracy", max_length=512, count_unit="questions",
        paper_counts=_counts(450, 50, 500), licenses=("mit",),
    ),

    DatasetSpec(
        name="bioasq", task_type="qa", reader=read_bioasq,
        files=(TEST_FILE, DEV_IDS_FILE, *TRAIN_FILES),
        labels=("yes", "no"), metric="accuracy", max_length=512, count_unit="questions",
        paper_counts=_counts(670, 75, 140), licenses=("bioasq-nlm-terms",),  # registration, NLM's terms
        notes="test = the 140 yes/no questions of the 7B golden batches (as BLURB); the 7b training set "
              "is not staged, so train/dev come from the 4b-6b golden batches",
    ),
)

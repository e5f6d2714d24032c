"""The other benchmarks of the papers the project builds on: BioBERT's species NER, 10-fold relation
extraction and BioASQ factoid QA (Lee et al., Tables 4-6), and Bio-ELECTRA's factoid / list QA, yes/no and
answer ranking (Ozyurt, Tables 2, 3 and 5). Where the staged files lack a split, the spec declares how it is
made (datamodules/protocols.py).
"""

from __future__ import annotations

from datamodules.protocols import CarvedDev, FileFolds, KFolds
from datamodules.readers.bioasq_golden import GOLDEN_7B, golden_reader
from datamodules.readers.biobert_ner import BIOBERT_NER_FILES, read_biobert_ner
from datamodules.readers.biobert_re import FOLD_COUNT, fold_templates, read_biobert_re_fold
from datamodules.readers.bioelectra import (
    RERANK_FILE,
    YESNO_FILES,
    read_bioelectra_rerank,
    read_bioelectra_yesno,
)
from datamodules.readers.squad import BIOELECTRA_BIOASQ_FILE, read_bioelectra_bioasq
from datamodules.spec import DatasetSpec

SPECIES = "SPECIES"
# One seed for every carved dev split and fold deal here: the year of BioBERT's paper.
PROTOCOL_SEED = 2019
DEV_FRACTION = 0.1  # BioBERT and Bio-ELECTRA have no dev set for these; a tenth of train, as BLURB's GAD
YESNO_LABELS = ("yes", "no")
RE_LABELS = ("0", "1")


def _biobert_species(name: str, folder: str, counts: dict[str, int], count_unit: str, licenses: tuple[str, ...],
                     notes: str) -> DatasetSpec:
    return DatasetSpec(
        name=name, task_type="ner", reader=read_biobert_ner(folder, SPECIES),
        files=tuple(f"{folder}/{f}" for f in BIOBERT_NER_FILES.values()),
        labels=(SPECIES,), metric="entity_f1", max_length=512, count_unit=count_unit,
        paper_counts=counts, licenses=licenses, notes=notes,
    )


def _biobert_re(name: str, folder: str, licenses: tuple[str, ...], notes: str, paper_counts: dict[str, int]
                ) -> DatasetSpec:
    folds = FileFolds(FOLD_COUNT, fold_templates(folder))
    return DatasetSpec(
        name=name, task_type="re", reader=read_biobert_re_fold(folder), files=folds.all_files(),
        labels=RE_LABELS, metric="positive_class_f1", metric_args={"positive": "1"}, max_length=128,
        count_unit="pairs", paper_counts=paper_counts, licenses=licenses, notes=notes,
        folds=folds,
        # identical sentences (GAD repeats some) stay on one side, as BLURB's GAD dev carving does
        carve_dev=CarvedDev(DEV_FRACTION, PROTOCOL_SEED, group_by="text"),
    )


def _folds_over_test_questions(group_by: str) -> dict:
    """A Bio-ELECTRA set with only its test file staged: 10 seeded folds over the questions that `group_by`
    names, dev a tenth of each fold's training questions."""
    return {"folds": KFolds(10, PROTOCOL_SEED, pool="test", group_by=group_by),
            "carve_dev": CarvedDev(DEV_FRACTION, PROTOCOL_SEED, group_by=group_by)}


def _test_folds_note(rows: str) -> str:
    return (f"10 seeded folds over the test file's questions (all {rows} of a question in one fold), dev a tenth "
            "of each fold's training questions")


# Answer-candidate re-ranking (Bio-ELECTRA Table 5): the relevant label's probability per pair, scored by MRR
BIOELECTRA_RERANK = DatasetSpec(
    name="bioelectra-rerank", task_type="qa", reader=read_bioelectra_rerank, files=(RERANK_FILE,),
    labels=RE_LABELS, metric="mean_reciprocal_rank", metric_args={"positive": "1"},
    max_length=64,  # Bio-ELECTRA's max_seq_length for it (SciCrunch/bio_electra, train_*reranker*.sh)
    count_unit="pairs", paper_counts={"train": 44933, "test": 9064},
    licenses=("bioasq-nlm-terms",),  # BioASQ 5b questions
    **_folds_over_test_questions("text_a"),
    notes="only Bio-ELECTRA's test file (9,064 pairs, 100 questions) is staged, its 44,933-pair training "
          f"file is not: {_test_folds_note('candidates')}; scores are not comparable to the "
          "paper's, which trains on the separate training file",
)


# Factoid / list QA (Bio-ELECTRA Table 2): each question x snippet pair scored by SQuAD's script, as the
# paper did; a question's snippets stay in one fold, since they share its answer
BIOELECTRA_FACTOID = DatasetSpec(
    name="bioelectra-factoid", task_type="qa-extractive", reader=read_bioelectra_bioasq,
    files=(BIOELECTRA_BIOASQ_FILE,), labels=(), metric="squad_v1",
    max_length=192,  # Bio-ELECTRA's max_seq_length for it (SciCrunch/bio_electra, train_bioasq_qa_*.sh)
    count_unit="pairs", paper_counts={"train": 9557, "test": 1809},
    licenses=("bioasq-nlm-terms",),  # BioASQ 8b questions
    **_folds_over_test_questions("question_id"),
    notes="BioASQ 8b factoid + list question x snippet pairs (SQuAD v1.1 format, one answer each); only "
          "Bio-ELECTRA's test file (1,809 pairs, 214 questions) is staged, its 9,557-pair training file is "
          f"not: {_test_folds_note('snippets')}; scored per pair with SQuAD's exact match and token F1; "
          "no SQuAD pre-training as the paper's; scores are not comparable to the paper's, which trains on "
          "the separate training file (`data stats` counts fold 1)",
)


def _golden_batches(year: int) -> tuple[str, ...]:
    return tuple(f"BioASQ/golden/{year}B{batch}_golden.json" for batch in range(1, 6))


# BioBERT's Table 6: test = a year's five golden batches; train = the other staged years' factoid questions
FACTOID_TRAIN_YEARS = {4: (5, 6, 7), 5: (4,), 6: (4, 5)}


def _bioasq_factoid(year: int, paper_counts: dict[str, int]) -> DatasetSpec:
    train = tuple(f for y in FACTOID_TRAIN_YEARS[year] for f in (_golden_batches(y) if y < 7 else (GOLDEN_7B,)))
    test = _golden_batches(year)
    earlier = [y for y in FACTOID_TRAIN_YEARS[year] if y < year]
    where = (f"the earlier years' golden batches ({', '.join(f'{y}B1-5' for y in earlier)})" if earlier else
             "the later years' golden batches (5B1-5, 6B1-5, 7B: no earlier year is staged)")
    return DatasetSpec(
        name=f"bioasq-{year}b-factoid", task_type="qa-extractive", reader=golden_reader(train, test),
        files=(*train, *test), labels=(), metric="bioasq_factoid", max_length=384,  # BioBERT's max_seq_length
        count_unit="questions", paper_counts=paper_counts,
        licenses=("bioasq-nlm-terms",),  # registration, NLM's terms (MANIFEST.md section 9)
        carve_dev=CarvedDev(DEV_FRACTION, PROTOCOL_SEED, group_by="question_id"),
        notes=f"test = the factoid questions of {year}B1-5 golden, every snippet a context (a question whose "
              f"answer is in no snippet counts as wrong); train = factoid questions of {where}, answer located in "
              "the snippets (unanswerable questions and answerless snippets dropped, test question ids removed); "
              "dev = a seeded tenth of train's questions; no SQuAD pre-training as BioBERT's; scored per question: "
              "strict / lenient accuracy and MRR over the top 5 answers merged over its snippets",
    )


SEED_PAPER_DATASETS: tuple[DatasetSpec, ...] = (
    _biobert_species(
        "linnaeus", "BioBERT/NER/linnaeus", {"train": 2119, "dev": 711, "test": 1433}, "mentions",
        ("public-research-use",),  # MANIFEST.md section 12
        notes="BioBERT's preprocessed files with untyped B/I/O tags, read as one type SPECIES; mention counts "
              "are Bio-ELECTRA's Table 1 (identical); BioBERT's Table 1 gives 11,934 / 7,141 / 4,077 sentences, "
              "dev and test swapped against the staged files (11,935 / 4,078 / 7,142)",
    ),
    _biobert_species(
        "s800", "BioBERT/NER/s800", {"train": 5733, "dev": 830, "test": 1630}, "sentences",
        ("cc-by-sa",),  # MANIFEST.md section 12: S800 CC BY-SA (no version stated)
        notes="BioBERT's preprocessed files with untyped B/I/O tags, read as one type SPECIES; counted in "
              "sentences, the unit of BioBERT's Table 1 (2,557 / 384 / 767 mentions)",
    ),
    _biobert_re(
        "biobert-gad", "BioBERT/RE/GAD", ("cc-by-4.0",), paper_counts={"test": 534},
        notes="BioBERT's 10 cross-validation folds (report the mean over folds); no dev split: a seeded tenth "
              "of each fold's train; fold 1 (the default) = BLURB's GAD files; test 534 = Bio-ELECTRA's Table 1 "
              "(BioBERT gives 5,339 sentences in all)",
    ),
    _biobert_re(
        "euadr", "BioBERT/RE/euadr", ("public-research-use",), paper_counts={},
        notes="BioBERT's 10 cross-validation folds (report the mean over folds) of 355 sentences in all "
              "(BioBERT's Table 1: 355); no dev split: a seeded tenth of each fold's train",
    ),
    BIOELECTRA_FACTOID,
    BIOELECTRA_RERANK,
    DatasetSpec(
        name="bioelectra-yesno", task_type="qa", reader=read_bioelectra_yesno, files=tuple(YESNO_FILES.values()),
        labels=YESNO_LABELS, metric="per_class_f1", metric_args={"labels": YESNO_LABELS},
        max_length=192,  # Bio-ELECTRA's max_seq_length for it (SciCrunch/bio_electra, train_yesno*.sh)
        count_unit="questions", paper_counts={"train": 728, "test": 128},
        licenses=("bioasq-nlm-terms",),  # BioASQ 8b questions: registration, NLM's terms
        carve_dev=CarvedDev(DEV_FRACTION, PROTOCOL_SEED),
        notes="BioASQ 8b yes/no (question, ideal answer) pairs, 80% yes; Bio-ELECTRA has no dev set and trains "
              "on all 728: ours is a seeded, label-stratified tenth of train; scored per class (Table 3)",
    ),
    # BioBERT's Table 3 (train, test questions)
    _bioasq_factoid(4, {"train": 327, "test": 161}),
    _bioasq_factoid(5, {"train": 486, "test": 150}),
    _bioasq_factoid(6, {"train": 618, "test": 161}),
)

"""The rows of the paper's Table 1 (how vocabularies split biomedical terms) and Table 8 (average input
length in word pieces per BLURB dataset, general vs in-domain vocabulary), computed from the staged
vocabularies and datasets. ablations/tables/render.py lays them out (`table1_grid`, `table8_grid`) for
`bioablate vocab compare` and `bioablate table`.

Table 1's splits are written as the paper does: word pieces joined by '-', without '##'; a term that is
one vocabulary entry is a check mark. Table 8 counts the model input the fine-tuning encoder builds for
every instance of every split (special tokens included, relation entities dummified, no truncation), and
for HoC also its single sentences, which is what the paper's HoC numbers measure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from datamodules.pretrain.vocab import hf_tokenizer, resolve_vocab_file

CHECK = "✓"

# Table 1: term -> (category, BERT, SciBERT, PubMedBERT). The paper's "lid-oca-ine]" is a typo.
TABLE1 = {
    "diabetes": ("disease", CHECK, CHECK, CHECK),
    "leukemia": ("disease", CHECK, CHECK, CHECK),
    "lithium": ("drug", CHECK, CHECK, CHECK),
    "insulin": ("drug", CHECK, CHECK, CHECK),
    "DNA": ("gene", CHECK, CHECK, CHECK),
    "promoter": ("gene", CHECK, CHECK, CHECK),
    "hypertension": ("disease", "hyper-tension", CHECK, CHECK),
    "nephropathy": ("disease", "ne-ph-rop-athy", CHECK, CHECK),
    "lymphoma": ("disease", "l-ym-ph-oma", CHECK, CHECK),
    "lidocaine": ("drug", "lid-oca-ine", CHECK, CHECK),
    "oropharyngeal": ("organ", "oro-pha-ryn-ge-al", "or-opharyngeal", CHECK),
    "cardiomyocyte": ("cell", "card-iom-yo-cy-te", "cardiomy-ocyte", CHECK),
    "chloramphenicol": ("drug", "ch-lor-amp-hen-ico-l", "chlor-amp-hen-icol", CHECK),
    "RecA": ("gene", "Rec-A", "Rec-A", CHECK),
    "acetyltransferase": ("gene", "ace-ty-lt-ran-sf-eras-e", "acetyl-transferase", CHECK),
    "clonidine": ("drug", "cl-oni-dine", "clon-idine", CHECK),
    "naloxone": ("drug", "na-lo-xon-e", "nal-oxo-ne", CHECK),
}
TABLE1_COLUMNS = {"bert-base-uncased": 1, "scibert-scivocab-uncased": 2, "pubmedbert-uncased": 3}

# Table 8: dataset -> (Wiki + Books vocabulary, PubMed vocabulary). The paper's HoC numbers (40.6, 31.0) are
# those of single sentences, HoC's annotation unit, though its HoC task (and ours) classifies whole
# abstracts (~360 word pieces): `table8` compares them with a sentence-level row, HOC_SENTENCES.
HOC_SENTENCES = "hoc-sentences"
TABLE8 = {
    "bc5-chem": (35.9, 28.0), "bc5-disease": (35.9, 28.0), "ncbi-disease": (34.2, 27.4),
    "bc2gm": (38.5, 30.5), "jnlpba": (33.7, 26.0), "ebm-pico": (30.7, 25.1), "chemprot": (75.4, 55.5),
    "ddi": (106.0, 75.9), "gad": (47.0, 35.7), "biosses": (80.7, 61.6), HOC_SENTENCES: (40.6, 31.0),
    "pubmedqa": (343.1, 293.0), "bioasq": (702.4, 541.4),
}


def split_term(tokenizer, term: str) -> str:
    pieces = tokenizer.tokenize(term)
    return CHECK if len(pieces) == 1 else "-".join(p[2:] if p.startswith("##") else p for p in pieces)


def same_split(ours: str, paper: str) -> bool:
    """Whether our split of a term is the paper's: the paper prints original casing ("Rec-A"), an uncased
    vocabulary gives "rec-a"."""
    return ours.lower() == paper.lower()


@dataclass
class Table1Row:
    term: str
    category: str
    splits: dict[str, str]  # vocabulary -> our split
    paper: dict[str, str]  # vocabulary -> the paper's split (staged vocabularies of Table 1 only)

    def mismatches(self) -> list[str]:
        return [v for v in self.paper if not same_split(self.splits[v], self.paper[v])]


def table1(vocabs: list[str], data_dir: Path | None) -> list[Table1Row]:
    tokenizers = {v: hf_tokenizer(resolve_vocab_file(v, data_dir), lowercase=True) for v in vocabs}
    rows = []
    for term, (category, *paper) in TABLE1.items():
        rows.append(Table1Row(term, category, {v: split_term(t, term) for v, t in tokenizers.items()},
                              {v: paper[TABLE1_COLUMNS[v] - 1] for v in vocabs if v in TABLE1_COLUMNS}))
    return rows


def average_input_lengths(vocab: str, data_dir: Path, datasets: list[str]) -> dict[str, float]:
    """Mean number of word pieces of the fine-tuning input over all splits of each dataset."""
    from datamodules.registry import get_dataset
    from datamodules.task_kinds import make_encoder

    tokenizer = hf_tokenizer(resolve_vocab_file(vocab, data_dir), lowercase=True)
    out = {}
    for name in datasets:
        spec = get_dataset(name)
        instances = [x for split in spec.read(data_dir).values() for x in split]
        features = make_encoder(spec, tokenizer, max_length=1_000_000).encode(instances)
        out[name] = sum(len(f["input_ids"]) for f in features) / len(features)
    return out


def hoc_sentence_lengths(vocab: str, data_dir: Path) -> float:
    """Mean word pieces (with [CLS]/[SEP]) of the sentences of every HoC abstract (all splits)."""
    from datamodules.pretrain.corpora import split_sentences
    from datamodules.registry import get_dataset

    tokenizer = hf_tokenizer(resolve_vocab_file(vocab, data_dir), lowercase=True)
    sentences = [s for split in get_dataset("hoc").read(data_dir).values() for x in split
                 for s in split_sentences(x.text)]
    return sum(len(ids) for ids in tokenizer(sentences)["input_ids"]) / len(sentences)


@dataclass
class Table8Row:
    dataset: str
    general: float
    domain: float
    paper_general: float | None
    paper_domain: float | None

    @property
    def ratio(self) -> float:
        return self.domain / self.general

    @property
    def paper_ratio(self) -> float | None:
        return None if self.paper_general is None else self.paper_domain / self.paper_general


def table8(general_vocab: str, domain_vocab: str, data_dir: Path, datasets: list[str]) -> list[Table8Row]:
    general = average_input_lengths(general_vocab, data_dir, datasets)
    domain = average_input_lengths(domain_vocab, data_dir, datasets)
    rows = []
    for d in datasets:
        rows.append(Table8Row(d, general[d], domain[d], *TABLE8.get(d, (None, None))))
        if d == "hoc":
            rows.append(Table8Row(HOC_SENTENCES, hoc_sentence_lengths(general_vocab, data_dir),
                                  hoc_sentence_lengths(domain_vocab, data_dir), *TABLE8[HOC_SENTENCES]))
    return rows

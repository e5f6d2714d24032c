"""Dataset and corpus fingerprints recorded before their code had versions, kept so that stores made then
are reused.

Until commit ba72c96 a dataset's fingerprint hashed its reader's source file byte for byte; since then
it hashes the reader's declared `READER_VERSION` (`DatasetSpec.fingerprint`). For each built-in dataset
and fold, `BEFORE_VERSIONS` maps the digest the versioned rule gives on the data bioablate stages (the
files `bioablate data fetch` checks against its manifest) to the fingerprint the old rule gave on the
same files, so every run stored under the old rule is still found. A dataset whose files differ, or
whose reader's version has been bumped since, gets a digest not in the table and the versioned rule's
fingerprint. tests/datamodules/test_dataset_contents.py fails on an entry that no longer applies: after
a version bump, delete that dataset's entries (its runs are computed again, as the bump intends).
Deleted so far: bioelectra-yesno and bioelectra-rerank with its folds, whose max_length became the
paper's (192 and 64, from 512) on 2026-11-25.
"""

from __future__ import annotations

# dataset (or fold) name -> (digest under READER_VERSION 1, fingerprint under the byte-hash rule)
BEFORE_VERSIONS: dict[str, tuple[str, str]] = {
    "bc2gm": ("365da19c9b092841", "5c6756c78bc9b396"),
    "bc5-chem": ("d03284c3455df149", "b7bf6a201c013012"),
    "bc5-disease": ("6ffb9ec36dfc6457", "1a6d441010bb5aca"),
    "bioasq": ("059cfbc2d297e826", "5095aa8757a2f362"),
    "bioasq-4b-factoid": ("6debf5153b2cb637", "24f09fa30f6ea98a"),
    "bioasq-5b-factoid": ("c7fbf30e49f275a1", "6c21946d729ada6f"),
    "bioasq-6b-factoid": ("b092df739489cee6", "e036b736a58c7de3"),
    "biobert-gad": ("f4c68a9f0ea6141e", "e86a1248d84239b0"),
    "biobert-gad@fold1": ("e453793e9df87f4f", "af4292cf612348d2"),
    "biobert-gad@fold10": ("f2d93ec22dc19bc2", "3c5c74525c5d8ab9"),
    "biobert-gad@fold2": ("2170d146ac0f2159", "01a422a755f3c01a"),
    "biobert-gad@fold3": ("ce32aa24a0160d14", "3cce49dbecf9f06d"),
    "biobert-gad@fold4": ("4e25fabb2f352c4a", "f263b7c80e561bc8"),
    "biobert-gad@fold5": ("fce4484c9e54c1ab", "119a9708691c1147"),
    "biobert-gad@fold6": ("12eba4d58fa12718", "bfa01e0c83e5531c"),
    "biobert-gad@fold7": ("b3546ee3789f824f", "14529b931f34e7ff"),
    "biobert-gad@fold8": ("51f83d24114fd700", "1439a7bfcb0d2bb0"),
    "biobert-gad@fold9": ("3bb3707598a0f4ae", "2cc48f107b3362cf"),
    "bioelectra-factoid": ("a4971357be25badb", "b1cf1d60e47f7227"),
    "bioelectra-factoid@fold1": ("59b96ce0736c0eba", "9a957e9e7b48f746"),
    "bioelectra-factoid@fold10": ("18a123a7b879871f", "369cc5ef03927bb7"),
    "bioelectra-factoid@fold2": ("cf8512c45b16c265", "2b1abad465b164ec"),
    "bioelectra-factoid@fold3": ("8290b1441524d238", "9d39a8edcb0e7c6c"),
    "bioelectra-factoid@fold4": ("d9a7d74f332913c4", "1c1c1bc9c1a54689"),
    "bioelectra-factoid@fold5": ("a3dd90d3203a5c36", "922c09d98128eeb7"),
    "bioelectra-factoid@fold6": ("826ac933a13aa82e", "df51bf84bd516a46"),
    "bioelectra-factoid@fold7": ("34fb6583402316a3", "ea846034e123d053"),
    "bioelectra-factoid@fold8": ("457a40fa8a142e47", "5f5af2d4400b0c6e"),
    "bioelectra-factoid@fold9": ("9b793030cd78fcad", "854d93b045069d24"),
    "biosses": ("de2ccdeb906a5821", "5c0f531feb5aa188"),
    "chemprot": ("afbd6a4bbecc2b0f", "fdc42b40eb1411aa"),
    "ddi": ("d6b9e1d83c5c47ee", "6f460187697bc651"),
    "ebm-pico": ("a92bc97dcdb808c6", "7825acf068dc696d"),
    "euadr": ("58cccb151769cd28", "9bdfa56586348234"),
    "euadr@fold1": ("6d6a3cbea89e93d6", "b531cce91ced2337"),
    "euadr@fold10": ("a9ce4d71ca826cbd", "28adf48568212627"),
    "euadr@fold2": ("4ecbc0efbddcf08d", "6cc7d72250b7bd76"),
    "euadr@fold3": ("9d96686de3c84442", "7620d20c380a1934"),
    "euadr@fold4": ("51a13c6af253a4ea", "9d22daed33a92007"),
    "euadr@fold5": ("e0cd371b776f3c88", "3d94894b918bfb34"),
    "euadr@fold6": ("6c5bef9a11f7c29c", "914414a4ad9ab463"),
    "euadr@fold7": ("4c4de541d345253b", "c0d87bf1daaf41e0"),
    "euadr@fold8": ("2b08a5f2b44b7885", "b8c6e42fc228f401"),
    "euadr@fold9": ("80c5d4e1357d1e80", "3c1963d48f14749d"),
    "gad": ("2b9b6b3f8419e9af", "1b595a5c3aed48b3"),
    "hoc": ("b9473198ad29c9e0", "4d334a48773fa9ce"),
    "jnlpba": ("1cee7165c3fb430c", "50b63744ee0637a8"),
    "linnaeus": ("1e9795ecbaf09fb0", "eb617912b8c1ef9a"),
    "ncbi-disease": ("0a5e1733dfdb00dc", "898f873913c5c413"),
    "pubmedqa": ("685a8ed1fd144559", "bc2e36684d9be84e"),
    "s800": ("3963a12e612c8d32", "b433525586185532"),
}


def legacy_fingerprint(name: str, digest: str) -> str:
    """The fingerprint runs of `name` were stored under when `digest` is the versioned rule's digest of
    the data they were computed on; `digest` itself otherwise."""
    entry = BEFORE_VERSIONS.get(name)
    return entry[1] if entry is not None and entry[0] == digest else digest


# Corpus fingerprints, the same way. Until the commit that introduced `CORPUS_CODE_VERSION`
# (datamodules/pretrain/corpora.py) a corpus fingerprint hashed the bytes of corpora.py, formats.py and
# corpus_specs.py; since then it hashes that version. For each corpus expression the packaged experiments
# pretrain on (any profile), `CORPORA_BEFORE_VERSIONS` maps the digest the versioned rule gives on the staged
# corpus files to the fingerprint the byte rule gave on the same files. Every pretraining run's fingerprint
# hashes its corpus's, so this keeps every stored pretraining run (and the fine-tuning on its model) found.
# tests/datamodules/pretrain/test_corpus_contents.py fails on an entry that no longer applies: after a
# version bump, delete these entries (the runs are computed again, as the bump intends).
# expression -> (digest under CORPUS_CODE_VERSION 1, fingerprint under the byte-hash rule)
CORPORA_BEFORE_VERSIONS: dict[str, tuple[str, str]] = {
    "general": ("a3754c93fe04d20e", "4d01d242fa64dda7"),
    "pmc": ("0ad0c4b91fa1cc46", "ee090fbc75d61721"),
    "pubmed": ("5314caeb75d6d6b0", "f8b68060e2a0c670"),
    "pubmed+pmc": ("478846c9cc733f82", "8faf74a87393aed7"),
}


def legacy_corpus_fingerprint(expression: str, digest: str) -> str:
    """The fingerprint the runs on corpus `expression` were stored under when `digest` is the versioned
    rule's digest of the files they read; `digest` itself otherwise."""
    entry = CORPORA_BEFORE_VERSIONS.get(expression)
    return entry[1] if entry is not None and entry[0] == digest else digest

"""Dataset fingerprints recorded before reader versions existed, kept so that stores made then are reused.

Until commit ba72c96 a dataset's fingerprint hashed its reader's source file byte for byte; since then
it hashes the reader's declared `READER_VERSION` (`DatasetSpec.fingerprint`). For each built-in dataset
and fold, `BEFORE_VERSIONS` maps the digest the versioned rule gives on the data bioablate stages (the
files `bioablate data fetch` checks against its manifest) to the fingerprint the old rule gave on the
same files, so every run stored under the old rule is still found. A dataset whose files differ, or
whose reader's version has been bumped since, gets a digest not in the table and the versioned rule's
fingerprint. tests/datamodules/test_dataset_contents.py fails on an entry that no longer applies: after
a version bump, delete that dataset's entries (its runs are computed again, as the bump intends).
"""

from __future__ import annotations

# dataset (or fold) name -> (digest under READER_VERSION 1, fingerprint under the byte-hash rule)
BEFORE_VERSIONS: dict[str, tuple[str, str]] = {
    "bc2gm": ("2b494c101c282799", "5c6756c78bc9b396"),
    "bc5-chem": ("ea4a1727b1a28c80", "b7bf6a201c013012"),
    "bc5-disease": ("934df5e7982c3083", "1a6d441010bb5aca"),
    "bioasq": ("961cfc9feb6d302e", "5095aa8757a2f362"),
    "bioasq-4b-factoid": ("968dd63eeb4e4bc3", "24f09fa30f6ea98a"),
    "bioasq-5b-factoid": ("a536d8566a071eb5", "6c21946d729ada6f"),
    "bioasq-6b-factoid": ("1905727715a479fb", "e036b736a58c7de3"),
    "biobert-gad": ("f59f04198ee56d0f", "e86a1248d84239b0"),
    "biobert-gad@fold1": ("2370884e51a5fb5e", "af4292cf612348d2"),
    "biobert-gad@fold10": ("a52066b877806493", "3c5c74525c5d8ab9"),
    "biobert-gad@fold2": ("171cd0fd4f1dffe7", "01a422a755f3c01a"),
    "biobert-gad@fold3": ("d24978b955c5bfce", "3cce49dbecf9f06d"),
    "biobert-gad@fold4": ("dd7eb9154afa67cb", "f263b7c80e561bc8"),
    "biobert-gad@fold5": ("0fbe50d5e12b234e", "119a9708691c1147"),
    "biobert-gad@fold6": ("e6942f403d71cb70", "bfa01e0c83e5531c"),
    "biobert-gad@fold7": ("fdff18c80408418a", "14529b931f34e7ff"),
    "biobert-gad@fold8": ("9e1e710dea673e05", "1439a7bfcb0d2bb0"),
    "biobert-gad@fold9": ("86d3c52ea97994d6", "2cc48f107b3362cf"),
    "bioelectra-factoid": ("98464e89308db499", "b1cf1d60e47f7227"),
    "bioelectra-factoid@fold1": ("a6ce10df18e57537", "9a957e9e7b48f746"),
    "bioelectra-factoid@fold10": ("2591dd2762b93788", "369cc5ef03927bb7"),
    "bioelectra-factoid@fold2": ("890dceb628a375e8", "2b1abad465b164ec"),
    "bioelectra-factoid@fold3": ("e526e9917790c7e4", "9d39a8edcb0e7c6c"),
    "bioelectra-factoid@fold4": ("7de7e125673eb262", "1c1c1bc9c1a54689"),
    "bioelectra-factoid@fold5": ("2928db561f4aebbb", "922c09d98128eeb7"),
    "bioelectra-factoid@fold6": ("bf312e88bd12b3d5", "df51bf84bd516a46"),
    "bioelectra-factoid@fold7": ("d62b7080b809b68d", "ea846034e123d053"),
    "bioelectra-factoid@fold8": ("d24df4276ac2d62d", "5f5af2d4400b0c6e"),
    "bioelectra-factoid@fold9": ("54f3a425a91c34ed", "854d93b045069d24"),
    "bioelectra-rerank": ("04b761ec8f3fb939", "879bbe76a3765fa9"),
    "bioelectra-rerank@fold1": ("6c00267b2f5db7d3", "654daded6066078b"),
    "bioelectra-rerank@fold10": ("1067177b2608096b", "999a719e0a78a8fb"),
    "bioelectra-rerank@fold2": ("09ddd13c2adeb565", "e23122fb2d7b5e54"),
    "bioelectra-rerank@fold3": ("a466884286de359e", "2b54e34b87aa0bc4"),
    "bioelectra-rerank@fold4": ("e76e01a7f17cd2ff", "28ae160236adefdf"),
    "bioelectra-rerank@fold5": ("3ed229e72447458f", "0d1328cb7a0c13f8"),
    "bioelectra-rerank@fold6": ("9f59e59ed98ab0f7", "cb0cc9bf87a8b1e1"),
    "bioelectra-rerank@fold7": ("5419ee37bdc4551b", "df3179e8295ecd80"),
    "bioelectra-rerank@fold8": ("65532b6c1a4f3e8d", "2e58aec27eb5d0ac"),
    "bioelectra-rerank@fold9": ("af8224dc89cc8235", "332add76a486fc11"),
    "bioelectra-yesno": ("cafea1ffc8e31b07", "2557b24038bc9eb2"),
    "biosses": ("e495c58ce60372bf", "5c0f531feb5aa188"),
    "chemprot": ("71b409f9a17059f1", "fdc42b40eb1411aa"),
    "ddi": ("0cd4578117b2b735", "6f460187697bc651"),
    "ebm-pico": ("387d43895934d2bf", "7825acf068dc696d"),
    "euadr": ("5a2d39baac636f48", "9bdfa56586348234"),
    "euadr@fold1": ("120235586b870b98", "b531cce91ced2337"),
    "euadr@fold10": ("3e27d8ae2b9bb383", "28adf48568212627"),
    "euadr@fold2": ("2b4ce1a928851665", "6cc7d72250b7bd76"),
    "euadr@fold3": ("6410b33ec68a88a2", "7620d20c380a1934"),
    "euadr@fold4": ("7caf98ce829d7bef", "9d22daed33a92007"),
    "euadr@fold5": ("03fd41706e2532da", "3d94894b918bfb34"),
    "euadr@fold6": ("5fc2d855ca60f979", "914414a4ad9ab463"),
    "euadr@fold7": ("69b78a4befc068f1", "c0d87bf1daaf41e0"),
    "euadr@fold8": ("81a09f7dcf55edaf", "b8c6e42fc228f401"),
    "euadr@fold9": ("52868a5321356121", "3c1963d48f14749d"),
    "gad": ("055542439a3673c4", "1b595a5c3aed48b3"),
    "hoc": ("51fe045b37f0eeca", "4d334a48773fa9ce"),
    "jnlpba": ("3d5364ec4bb22512", "50b63744ee0637a8"),
    "linnaeus": ("1dbddb629cf10c7d", "eb617912b8c1ef9a"),
    "ncbi-disease": ("1f56a72f14ae6acc", "898f873913c5c413"),
    "pubmedqa": ("75ea33c79b346955", "bc2e36684d9be84e"),
    "s800": ("d7c74c45fe1c1b08", "b433525586185532"),
}


def legacy_fingerprint(name: str, digest: str) -> str:
    """The fingerprint runs of `name` were stored under when `digest` is the versioned rule's digest of
    the data they were computed on; `digest` itself otherwise."""
    entry = BEFORE_VERSIONS.get(name)
    return entry[1] if entry is not None and entry[0] == digest else digest

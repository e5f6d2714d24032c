"""Write `datamodules/fetch/manifest.json`: where each file of the staged data folder comes from.

    python scripts/make_fetch_manifest.py [--data-dir ../shared/data] [--check-origins CLONES]

The staged folder (`../shared/data`, described by its MANIFEST.md) holds the pinned origins' bytes, so
each file's size and sha256 are computed from it; the origin of each file is given by SOURCES below, one
rule per `owner/repo @ commit : path` line of MANIFEST.md (every pinned commit used here must occur in
MANIFEST.md, and every file of the dataset and vocabulary folders must be covered by exactly one rule,
or the script fails). Three kinds of source:

- raw: single files at `<base>/<owner>/<repo>/<commit>/<path>` (raw.githubusercontent.com or a mirror);
- archive: a zip in an origin repository, unpacked as the staged layout has it (the DDI corpus);
- packaged: the few files MANIFEST.md marks [derived] (id lists the stager transcribed; not in any
  origin repository): tiny, so they ship inside the package under `datamodules/fetch/derived/` and
  the fetch step copies them. This script copies them there from the staged folder.

The pretraining corpora (`pretrain/`) are not part of the manifest: no BLURB reader uses them.

`--check-origins CLONES` also checks the manifest against git clones of the origin repositories
(`CLONES/<owner>/<repo>`, holding the pinned commits): every raw file, and every member of every
archive, must have the manifest's size and sha256 at its pinned commit.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from datamodules.fetch.download import file_sha256  # noqa: E402
from datamodules.fetch.manifest import DERIVED_DIR, MANIFEST_FILE, VOCAB_GROUP  # noqa: E402
from datamodules.registry import dataset_names, get_dataset  # noqa: E402

NER = ("cambridgeltl/MTL-Bioinformatics-2016", "df0df02fae6dbb87d88ffcf323b9096528f06f84")
JNLPBA_STANDOFF = ("spyysalo/jnlpba", "4455122de861c6e448e2e8c7f19ef8f49dbc32b2")
SCIBERT_PICO = ("allenai/scibert", "06793f77d7278898159ed50da30d173cdc8fdea9")
SCIBERT_VOCAB = ("allenai/scibert", "266c17d6d3c11b76142ccb41572cf7733644df37")
CHEMPROT = ("Aitslab/nlp_2021_alexander_petter", "1784721ed0b1fa1252f2359486f84e9b3514a6b3")
DDI = ("isegura/DDICorpus", "819b0fa538ed83ab2a8b4f5417bba3c03249b7f3")
BIOMEDBERT = ("BioMedBERT/biomedbert", "9e5e1019d79d07c7aecc4eb49106203af1012663")
BIOMEDBERT_7B = ("BioMedBERT/biomedbert", "475800f4e1943bebdfd7bcc62cbd1340d8ab3d02")
BIGBIO = ("bigscience-workshop/biomedical", "913327733b08c9a30ed8d691e15988573e04f0e8")
HOC = ("sb895/Hallmarks-of-Cancer", "3bc6e6deb90cf5bc4f9988c493fe2c32e9b3cf2a")
PUBMEDQA = ("pubmedqa/pubmedqa", "1cbae8e92f72f20c8d3747cbb3bf5bc53554d997")
BIO_ELECTRA = ("SciCrunch/bio_electra", "7a53526773e047c02f03400f61a906a636b9054d")
PUBMEDBERT = ("anvu03/microsoft-BiomedNLP-BiomedBERT-base-uncased-abstract",
              "19781278455ddb0d4fd59edff83fd6bcf23105d6")


@dataclass(frozen=True)
class Rule:
    """Files of `dest_dir` (relative to the data folder) and where they come from.

    `names` maps origin name -> staged name (a rename, e.g. LICENSE -> LICENSE-GENIA); None takes every
    file below `dest_dir` that no other rule claims, under the same relative path in `origin_dir`."""

    kind: str  # raw | archive | packaged
    dest_dir: str
    origin: tuple[str, str] | None = None  # (owner/repo, commit)
    origin_dir: str = ""  # raw: folder in the repository; archive: folder inside the zip
    names: dict[str, str] | None = field(default=None)
    archive: str = ""  # archive: the zip's path in the repository


def _same(*names: str) -> dict[str, str]:
    return {name: name for name in names}


SOURCES = (
    *(Rule("raw", d, NER, f"data/{d}", _same("train.tsv", "devel.tsv", "test.tsv"))
      for d in ("BC5CDR-chem-IOB", "BC5CDR-disease-IOB", "NCBI-disease-IOB", "BC2GM-IOB")),
    Rule("raw", "JNLPBA", NER, "data/JNLPBA", _same("devel.tsv", "test.tsv")),
    Rule("raw", "JNLPBA/standoff-train", JNLPBA_STANDOFF, "standoff/train"),
    Rule("raw", "JNLPBA", JNLPBA_STANDOFF, "", {"LICENSE": "LICENSE-GENIA"}),
    Rule("packaged", "JNLPBA", names=_same("crichton_devel_standoff_ids.txt")),
    Rule("raw", "EBM-PICO", SCIBERT_PICO, "data/pico/ebmnlp", _same("dev.txt", "test.txt")),
    *(Rule("raw", f"ChemProt/{d}", CHEMPROT, f"utils/chemprot/chemprot/{d}")
      for d in ("chemprot_training", "chemprot_development", "chemprot_test_gs")),
    Rule("raw", "DDI", DDI, "", _same("README")),
    # MANIFEST.md: "DDICorpus-2013.zip (unzipped here, .DS_Store dropped)"; members sit under DDICorpus/
    Rule("archive", "DDI", DDI, "DDICorpus", archive="DDICorpus-2013.zip"),
    Rule("raw", "GAD", BIOMEDBERT, "datasets/RE/GAD/1", _same("train.tsv", "test.tsv")),
    Rule("raw", "BIOSSES", BIGBIO, "bigbio/hub/hub_repos/biosses", _same("annotation_pairs_scores.tsv")),
    Rule("packaged", "BIOSSES", names=_same("blurb_split.tsv")),
    Rule("raw", "HoC", HOC, "", _same("LICENSE", "README.md")),
    Rule("raw", "HoC/text", HOC, "text"),
    Rule("raw", "HoC/labels", HOC, "labels"),
    Rule("raw", "PubMedQA", PUBMEDQA, "data", _same("ori_pqal.json", "test_ground_truth.json")),
    Rule("raw", "PubMedQA", PUBMEDQA, "", _same("LICENSE")),
    Rule("raw", "BioASQ/golden", BIOMEDBERT, "datasets/QA/BioASQ",
         _same(*(f"{task}B{batch}_golden.json" for task in (4, 5, 6) for batch in range(1, 6)))),
    Rule("raw", "BioASQ/golden", BIOMEDBERT_7B, "bioasq", _same("7B_golden.json")),
    Rule("packaged", "BioASQ", names=_same("blurb_dev_question_ids.txt")),
    # BioBERT's and Bio-ELECTRA's other benchmarks (datamodules/seed_papers.py; MANIFEST.md sections 12-13)
    *(Rule("raw", f"BioBERT/NER/{d}", BIOMEDBERT, f"datasets/NER/{d}", _same("train.tsv", "devel.tsv", "test.tsv"))
      for d in ("linnaeus", "s800")),
    *(Rule("raw", f"BioBERT/RE/{d}/{k}", BIOMEDBERT, f"datasets/RE/{d}/{k}", _same("train.tsv", "test.tsv"))
      for d in ("GAD", "euadr") for k in range(1, 11)),
    Rule("raw", "BioELECTRA/yesno", BIO_ELECTRA, "electra/data/finetuning_data/yesno", _same("train.tsv", "test.tsv")),
    Rule("raw", "BioELECTRA/reranker", BIO_ELECTRA, "electra/data/finetuning_data/reranker", _same("test.tsv")),
    Rule("raw", "vocab/bert-base-uncased", SCIBERT_VOCAB, "vocab", {"basevocab_uncased.vocab": "vocab.txt"}),
    Rule("raw", "vocab/scibert-scivocab-uncased", SCIBERT_VOCAB, "vocab", {"s2vocab_uncased.vocab": "vocab.txt"}),
    Rule("raw", "vocab/pubmedbert-uncased", PUBMEDBERT, "", _same("vocab.txt", "LICENSE.md")),
)


# Staged folders that hold several datasets, and how deep a dataset's own folder lies in them
# (BioBERT/NER/linnaeus, BioELECTRA/yesno); every other dataset has a top-level folder of its own.
SHARED_FOLDER_DEPTH = {"BioBERT": 3, "BioELECTRA": 2}


def dataset_folder(rel: str) -> str:
    """The folder of the dataset that a staged path (or a rule's dest_dir) belongs to."""
    parts = rel.split("/")
    return "/".join(parts[:SHARED_FOLDER_DEPTH.get(parts[0], 1)])


def group_of_folder() -> dict[str, str]:
    """A dataset's staged folder -> the dataset that reads it."""
    groups = {VOCAB_GROUP: VOCAB_GROUP}
    for name in dataset_names():
        for rel in get_dataset(name).files:
            folder = dataset_folder(rel)
            if groups.setdefault(folder, name) != name:
                raise SystemExit(f"folder {folder} is read by both {groups[folder]} and {name}")
    return groups


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


def build(data_dir: Path) -> dict:
    pins = (data_dir / "MANIFEST.md").read_text(encoding="utf-8")
    groups = group_of_folder()
    wanted = {p.relative_to(data_dir).as_posix() for folder in groups for p in (data_dir / folder).rglob("*")
              if p.is_file()}
    claimed: dict[str, Rule] = {}
    sources = []
    # explicit names first, so that a catch-all rule over the same folder takes only what is left
    for rule in sorted(SOURCES, key=lambda r: r.names is None):
        if rule.origin is not None and f"{rule.origin[0]} @ {rule.origin[1]}" not in pins:
            raise SystemExit(f"{rule.origin[0]} @ {rule.origin[1]} does not occur in {data_dir}/MANIFEST.md")
        if rule.names is not None:
            pairs = sorted(rule.names.items())
        else:
            prefix = rule.dest_dir + "/"
            pairs = sorted((rel[len(prefix):], rel[len(prefix):]) for rel in wanted
                           if rel.startswith(prefix) and rel not in claimed)
        files = []
        for origin_name, dest_name in pairs:
            dest = _join(rule.dest_dir, dest_name)
            if dest not in wanted:
                raise SystemExit(f"{dest}: named by a rule but not in {data_dir}")
            if dest in claimed:
                raise SystemExit(f"{dest}: claimed by two rules")
            claimed[dest] = rule
            path = data_dir / dest
            files.append({"origin": origin_name, "dest": dest_name, "size": path.stat().st_size,
                          "sha256": file_sha256(path)})
            if rule.kind == "packaged":
                (DERIVED_DIR / rule.dest_dir).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, DERIVED_DIR / rule.dest_dir / dest_name)
        source = {"kind": rule.kind, "group": groups[dataset_folder(rule.dest_dir)], "dest_dir": rule.dest_dir}
        if rule.origin is not None:
            source.update(repo=rule.origin[0], commit=rule.origin[1], origin_dir=rule.origin_dir)
        if rule.archive:
            source["archive"] = rule.archive
        sources.append(source | {"files": files})
    unclaimed = sorted(wanted - set(claimed))
    if unclaimed:
        raise SystemExit(f"{len(unclaimed)} staged files have no rule, e.g. {unclaimed[:5]}")
    order = list(groups.values())
    sources.sort(key=lambda s: (order.index(s["group"]), s["dest_dir"], s["kind"]))
    return {"format": 1, "sources": sources}


def dumps(manifest: dict) -> str:
    """JSON with one line per file (9 000+ files: readable diffs, a small package file)."""
    lines = ['{"format": %d, "sources": [' % manifest["format"]]
    for i, source in enumerate(manifest["sources"]):
        head = {k: v for k, v in source.items() if k != "files"}
        lines.append(" " + json.dumps(head)[:-1] + ', "files": [')
        lines += [f"  {json.dumps(f)}," for f in source["files"]]
        lines[-1] = lines[-1].rstrip(",")
        lines.append(" ]}" + ("," if i < len(manifest["sources"]) - 1 else ""))
    lines.append("]}")
    return "\n".join(lines) + "\n"


def git_blobs(clone: Path, specs: list[str]) -> list[bytes | None]:
    """The contents of `<commit>:<path>` specs from one clone (None where missing), in one git call."""
    out = subprocess.run(["git", "-C", str(clone), "cat-file", "--batch"], input="\n".join(specs).encode() + b"\n",
                         capture_output=True, check=True).stdout
    blobs, pos = [], 0
    for _ in specs:
        end = out.index(b"\n", pos)
        header, pos = out[pos:end].split(), end + 1
        if header[-1] == b"missing":
            blobs.append(None)
            continue
        size = int(header[2])
        blobs.append(out[pos:pos + size])
        pos += size + 1
    return blobs


def check_origins(manifest: dict, clones: Path) -> list[str]:
    """Problems found comparing the manifest with the pinned origin commits (empty: all match)."""
    problems, checked = [], 0
    for source in manifest["sources"]:
        if source["kind"] == "packaged":
            continue
        clone = clones / source["repo"]
        join = lambda *parts: "/".join(p for p in parts if p)  # noqa: E731
        if source["kind"] == "raw":
            specs = [f"{source['commit']}:{join(source['origin_dir'], f['origin'])}" for f in source["files"]]
            blobs = git_blobs(clone, specs)
        else:
            [archive] = git_blobs(clone, [f"{source['commit']}:{source['archive']}"])
            members = zipfile.ZipFile(io.BytesIO(archive or b"")) if archive else None
            names = set(members.namelist()) if members else set()
            specs = [f"{source['archive']}!{join(source['origin_dir'], f['origin'])}" for f in source["files"]]
            blobs = [members.read(spec.split("!")[1]) if spec.split("!")[1] in names else None for spec in specs]
        for spec, blob, f in zip(specs, blobs, source["files"]):
            checked += 1
            if blob is None:
                problems.append(f"{source['repo']} {spec}: missing")
            elif (len(blob), hashlib.sha256(blob).hexdigest()) != (f["size"], f["sha256"]):
                problems.append(f"{source['repo']} {spec}: differs from {source['dest_dir']}/{f['dest']}")
    print(f"checked {checked} files against their pinned origins: {len(problems)} problems")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=REPO_ROOT.parent / "shared" / "data")
    parser.add_argument("--check-origins", type=Path, metavar="CLONES",
                        help="also compare with git clones of the origins, CLONES/<owner>/<repo>")
    args = parser.parse_args()
    manifest = build(args.data_dir)
    if args.check_origins:
        problems = check_origins(manifest, args.check_origins)
        if problems:
            raise SystemExit("\n".join(problems))
    MANIFEST_FILE.write_text(dumps(manifest), encoding="utf-8")
    count = sum(len(s["files"]) for s in manifest["sources"])
    print(f"{MANIFEST_FILE}: {len(manifest['sources'])} sources, {count} files")


if __name__ == "__main__":
    main()

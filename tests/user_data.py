"""Small user datasets written from the staged data, for the dataset YAML's `dev:`, `folds:` and omitted
`labels` (tests/datamodules/test_custom_protocols.py, tests/e2e/test_custom_protocols.py).

- `two_type_conll`: BC5CDR's sentences with both its Chemical and its Disease tags (the chem and disease
  files hold the same tokens; no token is tagged in both), as `token<TAB>tag` CoNLL.
- `gad_lines`: GAD's training pairs as BLURB writes them (`sentence<TAB>label`, entities as @GENE$ and
  @DISEASE$), for TSV relation datasets.
"""

from __future__ import annotations

from pathlib import Path

from datamodules.textfiles import conll_blocks

GAD_RE = ("format: tsv\ntask_type: re\nlabels: ['0', '1']\npositive_label: '1'\nentity_types: [GENE, DISEASE]\n"
          "max_length: 128\n")


def _sentences(path: Path) -> list[list[list[str]]]:
    return [[line.split("\t") for _, line in block] for block in conll_blocks(path)]


def two_type_conll(data_dir: Path, split: str, start: int, stop: int) -> str:
    """Sentences start..stop of BC5CDR's `split` file (train, devel, test) with both entity types."""
    chem = _sentences(data_dir / "BC5CDR-chem-IOB" / f"{split}.tsv")[start:stop]
    disease = _sentences(data_dir / "BC5CDR-disease-IOB" / f"{split}.tsv")[start:stop]
    blocks = []
    for c, d in zip(chem, disease):
        assert [t for t, _ in c] == [t for t, _ in d]
        blocks.append("".join(f"{t}\t{ct if ct != 'O' else dt}\n" for (t, ct), (_, dt) in zip(c, d)))
    return "\n".join(blocks)


def gad_lines(data_dir: Path, start: int, stop: int) -> list[str]:
    """GAD training pairs start..stop, each `sentence<TAB>label`."""
    return (data_dir / "GAD" / "train.tsv").read_text().splitlines()[start:stop]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path

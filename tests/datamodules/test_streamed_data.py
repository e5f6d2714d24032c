"""Issue 69 item 11: reading a dataset costs memory in proportion to what a run uses. A CoNLL file over
`STREAMED_ABOVE` bytes is read on demand (`ConllSentences`): the same instances in the same order, the same
subsample, the same split checks, from offsets and hashes; and an error line quotes at most 200 characters."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bioablate_core.errors import DataFormatError
from datamodules.custom import register_from_yaml
from datamodules.custom.lines import text_lines
from datamodules.custom.schema import load_definition
from datamodules.custom.tagged import ConllSentences, read_conll
from datamodules.finetune_data import subsample
from datamodules.split_checks import check_splits, overlap_warning, summary_of
from datamodules.textfiles import read_text

REPO_ROOT = Path(__file__).resolve().parents[2]
BC5 = "BC5CDR-chem-IOB"


def _yaml(tmp_path: Path, name: str, files: dict[str, str], extra: str = "") -> Path:
    path = tmp_path / f"{name}.yaml"
    listed = ", ".join(f"{split}: {file}" for split, file in files.items())
    path.write_text(f"name: {name}\nformat: conll\npath: {tmp_path}\nfiles: {{{listed}}}\n{extra}")
    return path


def _both(definition, path: Path):
    """The file read whole and read on demand."""
    whole, streamed = read_conll(definition, path, streamed_above=1 << 40), read_conll(definition, path, 0)
    assert isinstance(whole, list) and isinstance(streamed, ConllSentences)
    return whole, streamed


def test_a_streamed_file_gives_the_instances_subsample_and_checks_of_the_whole_read(tmp_path, data_dir):
    for split, name in (("train", "train.tsv"), ("dev", "devel.tsv"), ("test", "test.tsv")):
        (tmp_path / f"{split}.tsv").write_bytes((data_dir / BC5 / name).read_bytes())
    definition = load_definition(_yaml(tmp_path, "bc5-copy", {s: f"{s}.tsv" for s in ("train", "dev", "test")},
                                       "entity_type: Chemical\n"))
    whole, streamed = _both(definition, tmp_path / "train.tsv")
    assert len(streamed) == len(whole) > 4000
    assert list(streamed) == whole
    assert streamed[17] == whole[17] and streamed[-1] == whole[-1] and streamed[5:9] == whole[5:9]
    for limit in (1, 32, 1000):  # the draw is subsample's, whichever way the split is held
        assert subsample(streamed, limit) == subsample(whole, limit)
    assert subsample(streamed, None) == whole
    summary, counted = streamed.summary, summary_of(whole)
    assert (summary.count, summary.any_spans, summary.span_types) == (counted.count, True, {"Chemical"})
    assert list(summary.ids) == list(counted.ids) and list(summary.inputs) == list(counted.inputs)
    dev, test = (read_conll(definition, tmp_path / f"{s}.tsv") for s in ("dev", "test"))
    lists = {"train": whole, "dev": dev, "test": test}
    assert overlap_warning("bc5-copy", {**lists, "train": streamed}) == overlap_warning("bc5-copy", lists)
    assert "dev repeats train" in overlap_warning("bc5-copy", lists)


def test_a_refused_copy_is_refused_from_the_summary_too(tmp_path, data_dir):
    """`files: {test: train.tsv}`: every test example repeats a training one, counted by input hash."""
    (tmp_path / "train.tsv").write_bytes((data_dir / BC5 / "devel.tsv").read_bytes())
    spec = register_from_yaml(_yaml(tmp_path, "copied", {"train": "train.tsv", "dev": "train.tsv",
                                                        "test": "train.tsv"}, "entity_type: Chemical\n"))
    definition = load_definition(tmp_path / "copied.yaml")
    streamed = read_conll(definition, tmp_path / "train.tsv", 0)
    with pytest.raises(Exception, match="every dev example repeats a training example"):
        check_splits(spec, {"train": streamed, "dev": streamed, "test": streamed}, None)


def test_documents_line_ends_and_a_changed_file(tmp_path):
    """-DOCSTART- (<id>) ids, CRLF and lone CR line ends, a last line without one: offsets find each
    sentence again; a file changed after it was indexed is refused, not read wrong."""
    path = tmp_path / "train.txt"
    path.write_bytes(b"-DOCSTART- (123)\r\n\r\nAspirin\tB-Chem\r\nhelps\tO\r\n\r\nNaCl\tB-Chem\rworks\tO\r\r"
                     b"-DOCSTART-\n\ncaf\xc3\xa9ine\tB-Chem\n\n-DOCSTART- (9)\nx\tO\ny\tI-Chem")
    definition = load_definition(_yaml(tmp_path, "docs", {"train": "train.txt", "test": "train.txt"}))
    whole, streamed = _both(definition, path)
    assert [x.id for x in whole] == ["123-0", "123-1", "123-2", "9-0"]
    assert [x.tokens for x in whole][2:] == [("caféine",), ("x", "y")]
    assert list(streamed) == whole and streamed.take([3, 0, 2]) == [whole[3], whole[0], whole[2]]
    assert [line for _, _, line in text_lines(path)] == read_text(path).splitlines()
    path.write_bytes(path.read_bytes() + b"\n\nmore\tO\n")
    with pytest.raises(DataFormatError, match="changed since it was read"):
        streamed[0]


def test_a_long_one_line_file_gives_a_short_error_line(tmp_path):
    """A one-line file of a million characters quotes 200 of them, with an ellipsis and the length."""
    (tmp_path / "one.txt").write_text("x" * 1_000_000 + "\n")
    definition = load_definition(_yaml(tmp_path, "one-line", {"train": "one.txt", "test": "one.txt"}))
    for above in (0, 1 << 40):
        with pytest.raises(DataFormatError) as caught:
            read_conll(definition, tmp_path / "one.txt", above)
        message = str(caught.value)
        assert len(message) < 600 and "…" in message and "(1,000,000 characters)" in message, message[:600]
    (tmp_path / "one.jsonl").write_text('{"text": "a b", "label": "' + "y" * 1_000_000 + '"}\n')
    (tmp_path / "labels.yaml").write_text(f"name: labels\nformat: jsonl\ntask_type: classification\npath: {tmp_path}"
                                          "\nfiles: {train: one.jsonl, test: one.jsonl}\nlabels: [a, b]\n")
    with pytest.raises(DataFormatError) as caught:
        register_from_yaml(tmp_path / "labels.yaml").read(None)
    assert len(str(caught.value)) < 600 and "(1,000,000 characters)" in str(caught.value)


@pytest.mark.slow  # about 60 s on 2 cores: a micro fine-tuning run on a 200 MB training file
def test_a_200_mb_training_file_under_micro_peaks_below_1_gb(tmp_path, data_dir):
    train = (data_dir / BC5 / "train.tsv").read_bytes()
    with open(tmp_path / "train.tsv", "wb") as out:
        for _ in range(-(-200_000_000 // len(train))):
            out.write(train)
    for split, name in (("dev", "devel.tsv"), ("test", "test.tsv")):
        (tmp_path / f"{split}.tsv").write_bytes((data_dir / BC5 / name).read_bytes())
    yaml = _yaml(tmp_path, "big-ner", {s: f"{s}.tsv" for s in ("train", "dev", "test")}, "entity_type: Chemical\n")
    command = [sys.executable, "-m", "ablations.cli", "finetune", "--task", "big-ner", "--datasets", str(yaml),
               "--profile", "micro", "--work-dir", str(tmp_path / "work"), "--data-dir", str(data_dir)]
    done = subprocess.run([sys.executable, "-c", PEAK_OF_CHILD, *command], capture_output=True, text=True,
                          timeout=900, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    peak = int(done.stdout.split()[-1])  # KiB
    assert peak < 1 << 20, f"peak RSS {peak / (1 << 20):.2f} GiB"


# Runs the command in a child of its own and prints that child's peak RSS (KiB): this test process's own
# RUSAGE_CHILDREN would hold the largest of every child the session has run.
PEAK_OF_CHILD = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(code)
"""

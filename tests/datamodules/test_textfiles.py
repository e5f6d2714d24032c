"""Environment faults in data files (datamodules/textfiles.py and the readers and checks built on it): each
one error naming the file (and for a decode error, the line), on real data files copied to a temp folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bioablate_core.errors import DataFormatError
from datamodules.readers.gad import read_gad_train_file
from datamodules.readers.ner import read_conll_file
from datamodules.registry import get_dataset
from datamodules.textfiles import open_text, read_text, read_text_lines
from datamodules.vocabs import resolve_vocab


def with_latin1_byte(source: Path, target: Path, line: int) -> Path:
    """`source` copied to `target` with a latin-1 'é' (0xe9, not UTF-8) put at the start of `line`."""
    lines = source.read_bytes().split(b"\n")
    lines[line - 1] = b"\xe9" + lines[line - 1]
    target.write_bytes(b"\n".join(lines))
    return target


def test_a_non_utf8_byte_names_the_file_and_its_line(tmp_path, data_dir):
    path = with_latin1_byte(data_dir / "GAD" / "train.tsv", tmp_path / "train.tsv", line=7)
    with pytest.raises(DataFormatError, match=rf"^{path}:7: not UTF-8 text \(byte 0xe9"):
        read_gad_train_file(path)
    with pytest.raises(DataFormatError, match=rf"^{path}:7: "):
        read_text_lines(path)


def test_a_binary_file_is_a_decode_error_not_a_traceback(tmp_path, data_dir):
    path = tmp_path / "train.tsv"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(DataFormatError, match=rf"^{path}:2: not UTF-8 text \(byte 0x80"):  # 0x0a before it
        read_conll_file(path)


def test_a_vocabulary_that_is_not_utf8_names_its_line(tmp_path, data_dir):
    vocab = with_latin1_byte(data_dir / "vocab" / "bert-base-uncased" / "vocab.txt", tmp_path / "vocab.txt", 2000)
    with pytest.raises(DataFormatError, match=rf"^{vocab}:2000: not UTF-8 text"):
        resolve_vocab(str(vocab), data_dir)


def test_a_directory_where_a_file_belongs(tmp_path):
    (tmp_path / "train.tsv").mkdir()
    with pytest.raises(DataFormatError, match=rf"^{tmp_path / 'train.tsv'}: is a directory, expected a file"):
        read_text(tmp_path / "train.tsv")
    with pytest.raises(DataFormatError, match="file not found"):
        read_text(tmp_path / "absent.tsv")


def test_open_text_reads_lines_like_a_text_file(tmp_path):
    path = tmp_path / "x.txt"
    path.write_bytes(b"a\r\nb\rc\n\nd")
    assert list(open_text(path)) == ["a\n", "b\n", "c\n", "\n", "d"]
    assert list(open_text(path)) == list(path.open(encoding="utf-8"))


def test_the_missing_file_check_names_a_missing_chemprot_split_file(tmp_path, data_dir):
    """The folders exist, one file inside is gone: named before anything is read."""
    source = data_dir / "ChemProt"
    for folder in source.iterdir():
        (tmp_path / "ChemProt" / folder.name).mkdir(parents=True)
        for file in folder.iterdir():
            (tmp_path / "ChemProt" / folder.name / file.name).symlink_to(file)
    spec = get_dataset("chemprot")
    assert spec.missing_files(tmp_path) == []
    (tmp_path / "ChemProt" / "chemprot_development" / "chemprot_development_entities.tsv").unlink()
    assert spec.missing_files(tmp_path) == ["ChemProt/chemprot_development/chemprot_development_entities.tsv"]


def test_the_missing_file_check_names_a_folder_where_a_data_file_belongs(tmp_path, data_dir):
    (tmp_path / "GAD").mkdir()
    shutil.copy(data_dir / "GAD" / "test.tsv", tmp_path / "GAD" / "test.tsv")
    (tmp_path / "GAD" / "train.tsv").mkdir()
    assert get_dataset("gad").missing_files(tmp_path) == ["GAD/train.tsv (a folder, expected a regular file)"]


def test_a_device_or_a_pipe_where_a_data_file_belongs_is_named_so(tmp_path):
    """/dev/zero would be read for ever and a FIFO blocks until someone writes: both are refused by kind."""
    import os

    fifo = tmp_path / "train.tsv"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        with pytest.raises(DataFormatError, match="is a device, pipe or socket, expected a regular file"):
            read_text(path)
    (tmp_path / "GAD").mkdir()
    os.symlink("/dev/zero", tmp_path / "GAD" / "train.tsv")
    assert "GAD/train.tsv (a device, pipe or socket, expected a regular file)" in get_dataset("gad").missing_files(
        tmp_path)


def test_a_utf16_file_is_advised_iconv_from_utf16(data_dir, tmp_path):
    """UTF-16 files were advised `iconv -f latin1`; with a byte order mark they fail to decode, without one
    every ASCII character carries a NUL byte."""
    text = (data_dir / "GAD" / "train.tsv").read_text()[:2000]
    for name, data in (("bom.tsv", text.encode("utf-16")), ("plain.tsv", text.encode("utf-16-le"))):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(DataFormatError) as error:
            read_text(tmp_path / name)
        assert "convert the file to UTF-8 (e.g. iconv -f utf-16 -t utf-8)" in str(error.value), str(error.value)


def test_a_nul_byte_in_a_token_names_its_line(data_dir, tmp_path):
    """A NUL inside a CoNLL token was read as part of the word."""
    lines = (data_dir / "NCBI-disease-IOB" / "train.tsv").read_text().splitlines()[:50]
    lines[9] = "mis\x00sense\tO"
    (tmp_path / "train.tsv").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFormatError) as error:
        read_conll_file(tmp_path / "train.tsv")
    assert str(error.value) == (f"{tmp_path / 'train.tsv'}:10: holds a NUL byte, which no text has; is it a binary "
                                "file? remove the NUL bytes")

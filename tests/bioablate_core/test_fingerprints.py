"""bioablate_core.fingerprints: the file listing behind dataset and model fingerprints, and the content hash."""

from __future__ import annotations

import ast
import os
from pathlib import Path

from bioablate_core.fingerprints import digest, files_under, hash_files


def test_files_under_lists_what_sorted_rglob_lists_in_the_same_order(tmp_path, data_dir):
    # names that order differently as strings and as path parts ("a-b/x" < "a/x" as strings only)
    for rel in ("a/x", "a-b/x", "a/b/c.txt", "a.txt", ".hidden", "z/.cache/blob"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    (tmp_path / "link-to-a.txt").symlink_to(tmp_path / "a.txt")  # a Hub snapshot's files are links
    (tmp_path / "dangling").symlink_to(tmp_path / "missing")
    (tmp_path / "empty-dir").mkdir()
    expected = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert files_under(tmp_path) == expected and len(expected) == 7
    hoc = data_dir / "HoC"  # thousands of files
    assert files_under(hoc) == sorted(p for p in hoc.rglob("*") if p.is_file())


def test_hash_files_follows_content_and_names_not_timestamps(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("one")
    b.write_text("two")
    before = hash_files([a, b])
    os.utime(a, ns=(1, 1))  # touched, same content: the memo is bypassed, the hash is not changed
    assert hash_files([a, b]) == before
    a.write_text("One")
    assert hash_files([a, b]) != before
    assert hash_files([b, a]) != hash_files([a, b])
    assert hash_files([a], seed=b"x") != hash_files([a])


def test_digest_is_canonical_json_hashed_and_pinned():
    """Run, split and cache fingerprints are this digest: its value for a value may never change (stored
    runs would not be found again), and key order and values JSON cannot write do not break it."""
    value = {"config": {"finetune.lr": 3e-05, "seed": 42}, "data": "0123456789abcdef", "path": Path("/x")}
    assert digest(value) == "513b58d31a3ffcd7"
    assert digest(dict(reversed(value.items()))) == digest(value)


# their source bytes are hashed into pinned corpus and shard fingerprints: left as they are
FROZEN = {"datamodules/pretrain/corpora.py", "datamodules/pretrain/formats.py",
          "datamodules/pretrain/corpus_specs.py", "datamodules/pretrain/shards.py"}


def _is_call(node: ast.AST, module: str, name: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == name
            and isinstance(node.func.value, ast.Name) and node.func.value.id == module)


def _hashes_json(function: ast.AST) -> bool:
    """`function` hashes JSON with SHA-256: `sha256(json.dumps(...))`, or of a name it set to `json.dumps(...)`."""
    written = {target.id for node in ast.walk(function) if isinstance(node, ast.Assign)
               and any(_is_call(n, "json", "dumps") for n in ast.walk(node.value))
               for target in node.targets if isinstance(target, ast.Name)}
    return any(_is_call(n, "json", "dumps") or isinstance(n, ast.Name) and n.id in written
               for call in ast.walk(function) if _is_call(call, "hashlib", "sha256")
               for argument in call.args for n in ast.walk(argument))


def test_the_digest_of_a_value_is_written_once():
    """No function hashes JSON by hand beside `bioablate_core.fingerprints.digest` (a copy drifts: a missing
    `sort_keys` or `default=str` changes fingerprints or fails on a Path)."""
    root = Path(__file__).resolve().parents[2]
    copies = [f"{rel}:{function.name}" for layer in ("bioablate_core", "datamodules", "lightning_modules", "ablations")
              for path in (root / layer).rglob("*.py") for rel in [str(path.relative_to(root))] if rel not in FROZEN
              for function in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
              if isinstance(function, ast.FunctionDef) and _hashes_json(function)]
    assert copies == ["bioablate_core/fingerprints.py:digest"]


def test_a_symbolic_link_loop_is_one_error_naming_the_folder(tmp_path):
    """A link back to a folder it is inside (a dataset or model folder) made the walk raise OSError 40
    (ELOOP) after thousands of levels: one line naming where the loop starts instead."""
    import pytest

    from bioablate_core.errors import ConfigError

    (tmp_path / "data" / "sub").mkdir(parents=True)
    (tmp_path / "data" / "sub" / "train.txt").write_text("x\n")
    (tmp_path / "data" / "sub" / "back").symlink_to(tmp_path / "data")
    with pytest.raises(ConfigError) as error:
        files_under(tmp_path / "data")
    assert str(error.value) == (f"{tmp_path / 'data' / 'sub' / 'back'}: cannot be listed (a symbolic link loop (a "
                                "link to a folder it is inside)); remove or fix the link, or move the folder")
    (tmp_path / "data" / "sub" / "back").unlink()
    (tmp_path / "data" / "same").symlink_to(tmp_path / "data" / "sub")  # a link elsewhere is followed
    assert files_under(tmp_path / "data") == [tmp_path / "data" / "same" / "train.txt",
                                              tmp_path / "data" / "sub" / "train.txt"]


def test_a_listing_kept_between_calls_still_sees_a_file_added_removed_or_renamed(tmp_path):
    """files_under keeps a listing while its folders' modification times hold: a change to the entries of any
    folder in it is seen; a folder changed within RACY_SECONDS (the kernel's timestamps are coarser than
    the changes a script makes) is listed again every time."""
    import os

    from bioablate_core import fingerprints

    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "sub" / "b.txt").write_text("b")
    key = (os.getcwd(), str(tmp_path))
    assert files_under(tmp_path) == [tmp_path / "a.txt", tmp_path / "sub" / "b.txt"]
    assert key not in fingerprints._LISTINGS  # just written: racy, not kept

    def aged(step: int) -> None:  # the folders' times far in the past, as a staged dataset's are
        for folder in (tmp_path, tmp_path / "sub"):
            os.utime(folder, ns=(1_000_000_000 + step, 1_000_000_000 + step))

    aged(0)
    first = files_under(tmp_path)
    assert fingerprints._LISTINGS[key][1] == first  # kept
    (tmp_path / "sub" / "c.txt").write_text("c")  # inside a subfolder
    aged(1)
    assert files_under(tmp_path)[-1] == tmp_path / "sub" / "c.txt"
    (tmp_path / "a.txt").rename(tmp_path / "z.txt")
    aged(2)
    assert tmp_path / "z.txt" in files_under(tmp_path) and tmp_path / "a.txt" not in files_under(tmp_path)
    (tmp_path / "sub" / "b.txt").unlink()
    aged(3)
    assert files_under(tmp_path) == [tmp_path / "sub" / "c.txt", tmp_path / "z.txt"]

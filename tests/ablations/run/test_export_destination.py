"""Issue 69 item 3: `bioablate export` never loses a user's files. Exporting into a folder that is not an
earlier export of the same run is one line and changes nothing; re-exporting a run replaces its own files and
keeps everything else in the folder. The store is stood in for (a run with its kept model folder), so each
case takes milliseconds."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from ablations.run import export
from ablations.run.export import META_FILE, export_run
from bioablate_core.errors import ConfigError

RUN_A, RUN_B = "a" * 32, "b" * 32


def kept_model(work: Path, run_id: str, weights: str) -> None:
    folder = work / "runs" / run_id / "model"
    folder.mkdir(parents=True)
    (folder / META_FILE).write_text(json.dumps({"run_id": run_id, "task": "gad"}))
    (folder / "model.safetensors").write_text(weights)
    (folder / "README.md").write_text(f"card of {run_id}")


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    work = tmp_path / "work"
    kept_model(work, RUN_A, "weights of a")
    kept_model(work, RUN_B, "weights of b")
    monkeypatch.setattr(export, "find_finished_run", lambda ref, uri: SimpleNamespace(
        info=SimpleNamespace(run_id=ref), data=SimpleNamespace(tags={"model_dir": f"runs/{ref}/model"})))
    return work


def test_a_folder_of_the_users_files_is_refused_and_left_as_it_was(work, tmp_path):
    to = tmp_path / "mine"
    to.mkdir()
    (to / "notes.txt").write_text("my notes")
    with pytest.raises(ConfigError, match=r"is a folder of other files, not an earlier export; pick a new or empty"):
        export_run(RUN_A, to, "sqlite://", work)
    assert [p.name for p in to.iterdir()] == ["notes.txt"] and (to / "notes.txt").read_text() == "my notes"


def test_another_runs_export_is_not_replaced(work, tmp_path):
    to = tmp_path / "model"
    export_run(RUN_A, to, "sqlite://", work)
    (to / "notes.txt").write_text("my notes")
    with pytest.raises(ConfigError) as error:
        export_run(RUN_B, to, "sqlite://", work)
    assert str(error.value) == (f"--to {to} holds the export of another run ({RUN_A}), not of run {RUN_B}; pick a "
                                "new folder, or remove that export first")
    assert (to / "model.safetensors").read_text() == "weights of a" and (to / "notes.txt").read_text() == "my notes"


def test_exporting_a_run_again_keeps_the_users_files_in_its_folder(work, tmp_path):
    to = tmp_path / "model"
    export_run(RUN_A, to, "sqlite://", work)
    (to / "notes.txt").write_text("my notes")
    (to / "scripts").mkdir()
    (to / "scripts" / "score.sh").write_text("echo")
    (to / "model.safetensors").write_text("changed by hand")
    export_run(RUN_A, to, "sqlite://", work)
    assert (to / "model.safetensors").read_text() == "weights of a"  # the export's own file: the run's again
    assert (to / "notes.txt").read_text() == "my notes" and (to / "scripts" / "score.sh").read_text() == "echo"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "work"]  # nothing left beside it


def test_a_users_folder_named_like_the_old_scratch_folder_survives(work, tmp_path):
    """The export was written to `<to>.tmp` first, after deleting whatever had that name."""
    (tmp_path / "model.tmp").mkdir()
    (tmp_path / "model.tmp" / "keep.txt").write_text("mine")
    export_run(RUN_A, tmp_path / "model", "sqlite://", work)
    assert (tmp_path / "model.tmp" / "keep.txt").read_text() == "mine"
    assert json.loads((tmp_path / "model" / META_FILE).read_text())["run_id"] == RUN_A


def test_a_file_or_an_empty_folder(work, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        export_run(RUN_A, tmp_path / "file", "sqlite://", work)
    (tmp_path / "empty").mkdir()
    export_run(RUN_A, tmp_path / "empty", "sqlite://", work)
    assert (tmp_path / "empty" / "model.safetensors").read_text() == "weights of a"

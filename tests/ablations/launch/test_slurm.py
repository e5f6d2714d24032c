"""`--launcher slurm` against a real SLURM cluster: `.ci/run` starts a one-node cluster on 127.0.0.1
(scripts/start_slurm.sh) and PostgreSQL; each test here submits real jobs through sbatch.

The jobs log to a real `bioablate server` (MLflow over a fresh PostgreSQL database), as on a cluster.
Everything is micro-sized: the time goes into job start-up, not training. So one `bioablate run` is a
process of its own; the other commands run in the test's process (`in_process`), which spares each ~10 s
of imports and changes nothing the jobs see.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import optuna
import pytest
import sqlalchemy
from mlflow.tracking import MlflowClient

from tests.cli import bioablate_in_process

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

REPO = Path(__file__).resolve().parents[3]
TINY = """\
name: {name}
description: one pretraining stage, one task, two tagging schemes
models:
  pubmedbert: {{use: pubmedbert}}
tasks: [bc5-chem]
vary:
  tagging: {{key: finetune.tagging, values: [bio, io]}}
seeds: 1
overrides:  # finding the BLURB PMIDs to filter out parses every dataset: ~10 s of CPU the jobs need not spend
  pretrain: {{exclude_eval_pmids: false}}
table:
  title: "SLURM {name}"
  rows: task
  columns: tagging
  baseline: bio
"""
# jobs on a 2-core node: one CPU each, no GPU, a short limit
LAUNCHER = ["launcher.gpus_per_run=0", "launcher.cpus_per_run=1", "launcher.time=20"]


def _cluster_up() -> bool:
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return False
    out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    return out.returncode == 0 and any(s in out.stdout for s in ("idle", "mixed", "allocated"))


@pytest.fixture(scope="module")
def slurm() -> None:
    if not _cluster_up():
        pytest.skip("no SLURM cluster reachable (sinfo shows no usable node): .ci/run starts a one-node "
                    "cluster as root with scripts/start_slurm.sh")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tracking_server(slurm, postgres_url, tmp_path_factory):
    """`bioablate server` on loopback over a fresh PostgreSQL database (the CI database outlives a test
    session, and runs are found by fingerprint: a new database per module keeps tests independent)."""
    database = f"mlflow_{uuid.uuid4().hex[:10]}"
    admin = sqlalchemy.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(sqlalchemy.text(f'CREATE DATABASE "{database}"'))
    admin.dispose()
    backend = sqlalchemy.engine.make_url(postgres_url).set(database=database).render_as_string(hide_password=False)
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    with open(log, "w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "ablations.cli", "server", "--backend-store-uri", backend, "--artifacts",
             str(tmp_path_factory.mktemp("artifacts")), "--port", str(port), "--workers", "1"],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
    uri = f"http://127.0.0.1:{port}"
    deadline = time.time() + 600  # a loaded 2-core machine takes minutes to import MLflow twice
    while True:
        try:
            urllib.request.urlopen(f"{uri}/health", timeout=2)
            break
        except OSError:
            if server.poll() is not None or time.time() > deadline:
                server.kill()
                pytest.fail(f"bioablate server did not come up: {log.read_text()[-2000:]}")
            time.sleep(1)
    yield uri
    server.terminate()
    server.wait(30)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """One work directory for the module's tests, as a cluster's shared one: the pretraining stage they
    share is computed once (each test's runs differ by name, overrides or seed)."""
    return tmp_path_factory.mktemp("work")


def bioablate(*args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ablations.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.fixture
def in_process():
    """`bioablate ARGS` in this process (tests/cli.py), as `bioablate(...)` runs it in a process of its own:
    the jobs it submits are real sbatch jobs either way, with the same environment (PYTHONPATH included)."""
    return lambda *args, cwd: bioablate_in_process(*args, cwd=cwd, env={"PYTHONPATH": str(REPO)})


def finished_runs(uri: str, mlflow_experiment: str, /, **tags: str) -> list:
    client = MlflowClient(uri)
    found = client.get_experiment_by_name(mlflow_experiment)
    if found is None:
        return []
    where = " and ".join(f"tags.{k} = '{v}'" for k, v in tags.items()) or ""
    return [r for r in client.search_runs([found.experiment_id], where) if r.info.status == "FINISHED"]


def squeue_states(job_ids: list[str]) -> dict[str, str]:
    out = subprocess.run(["squeue", "-h", "-r", "-o", "%i %T"], capture_output=True, text=True).stdout
    states = dict(line.split() for line in out.splitlines() if line.strip())
    return {job: states[job] for job in job_ids if job in states}


def wait_until_gone(job_ids: list[str], timeout: float = 600) -> None:
    deadline = time.time() + timeout
    while squeue_states(job_ids) and time.time() < deadline:
        time.sleep(1)
    assert not squeue_states(job_ids), f"jobs still queued after {timeout} s: {squeue_states(job_ids)}"


def submitted_jobs(stdout: str) -> list[tuple[str, str, str]]:
    """(job id, kind, name) of each `  job ID KIND NAME` line `run --launcher slurm` prints."""
    return [tuple(line.split()[1:4]) for line in stdout.splitlines()
            if line.startswith("  job ") and len(line.split()) == 4]


def test_an_experiment_with_a_stage_runs_as_jobs_and_a_rerun_submits_nothing(tracking_server, data_dir, tmp_path,
                                                                              work, in_process):
    (tmp_path / "tiny.yaml").write_text(TINY.format(name="tiny"))
    common = ["--profile", "micro", "--launcher", "slurm", "--work-dir", str(work),
              "--tracking-uri", tracking_server]
    first = bioablate("run", "tiny.yaml", *LAUNCHER, *common, "--wait", cwd=tmp_path)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    jobs = submitted_jobs(first.stdout)
    assert sorted(kind for _, kind, _ in jobs) == ["finetune", "finetune", "pretrain"], first.stdout
    assert "| bc5-chem |" in first.stdout and "SLURM tiny" in first.stdout  # the table, rendered
    # exactly the planned runs in the store: one stage, two cells, each computed once
    assert len(finished_runs(tracking_server, "pretrain", seed="42")) == 1
    cells = finished_runs(tracking_server, "finetune", experiment="tiny")
    assert sorted(r.data.params["finetune.tagging"] for r in cells) == ["bio", "io"]
    assert all(r.data.tags.get("slurm_job_id") for r in cells)  # computed by the jobs, not here

    # the rerun, `status` and `table` in this process (the other tests submit from it too)
    again = in_process("run", "tiny.yaml", *LAUNCHER, *common, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "submitted 0 job(s)" in again.stdout and "3 planned run(s) finished before" in again.stdout

    status = in_process("status", "tiny.yaml", *LAUNCHER, "--profile", "micro", "--work-dir", str(work),
                        "--tracking-uri", tracking_server, cwd=tmp_path)
    assert status.returncode == 0 and status.stdout.count("FINISHED  ENDED") == 3, status.stdout

    # re-rendered from the server: the table's files are logged as artifacts through it, and stdout is
    # the CSV alone (MLflow's "View run" lines stay out of it)
    table = in_process("table", "tiny.yaml", "--profile", "micro", "--format", "csv", "--work-dir", str(work),
                       "--tracking-uri", tracking_server, cwd=tmp_path)
    assert table.returncode == 0, table.stderr[-3000:]
    lines = table.stdout.splitlines()
    assert lines[0].startswith("row,column,") and len(lines) == 3, table.stdout


def test_a_cancelled_job_is_the_only_one_a_rerun_submits(tracking_server, data_dir, tmp_path, work, in_process):
    (tmp_path / "tiny.yaml").write_text(TINY.format(name="cancel"))
    # another learning rate: new cells (the stage is shared with the other tests: reused or computed once);
    # the cancel lands while a job starts (RUNNING in squeue long before it trains): one epoch is enough
    common = ["--profile", "micro", "--launcher", "slurm", "--work-dir", str(work),
              "--tracking-uri", tracking_server]
    overrides = [*LAUNCHER, "finetune.lr=1e-3"]
    first = in_process("run", "tiny.yaml", *overrides, *common, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    cells = [job for job, kind, _ in submitted_jobs(first.stdout) if kind == "finetune"]
    assert len(cells) == 2, first.stdout
    deadline = time.time() + 300
    while time.time() < deadline and "RUNNING" not in squeue_states(cells).values():
        time.sleep(0.3)
    running = [job for job, state in squeue_states(cells).items() if state == "RUNNING"]
    assert running, f"no fine-tuning job seen running: {squeue_states(cells)}"
    subprocess.run(["scancel", running[0]], check=True)
    wait_until_gone([job for job, _, _ in submitted_jobs(first.stdout)])
    assert len(finished_runs(tracking_server, "finetune", experiment="cancel")) == 1

    rerun = in_process("run", "tiny.yaml", *overrides, *common, "--wait", cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-2000:]
    resubmitted = submitted_jobs(rerun.stdout)
    assert len(resubmitted) == 1 and resubmitted[0][1] == "finetune", rerun.stdout
    assert len(finished_runs(tracking_server, "finetune", experiment="cancel")) == 2


def _pretrain_args(work: Path, uri: str, *extra: str) -> list[str]:
    return ["pretrain", "--profile", "micro", "--launcher", "slurm", "--work-dir", str(work),
            "--tracking-uri", uri, "pretrain.exclude_eval_pmids=false", *extra]


def test_a_preempted_pretraining_job_requeues_and_ends_finished_as_one_run(tracking_server, data_dir, tmp_path,
                                                                          work, in_process):
    # signalled mid-training: at the first checkpoint (step 5), 55 steps (seconds) before the end; the
    # requeued job trains the rest
    args = _pretrain_args(work, tracking_server, "seed=21", "pretrain.max_steps=60",
                          "pretrain.checkpoint_every=5", *LAUNCHER)
    submitted = in_process(*args, cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr[-2000:]
    job = submitted.stdout.split("submitted pretraining job ")[1].split(":")[0]
    def checkpoints() -> list[Path]:  # this run's: the other tests' finished runs deleted theirs
        return list((work / "runs").glob("*/checkpoints/*.ckpt"))

    deadline = time.time() + 400
    while time.time() < deadline and not checkpoints():
        time.sleep(0.5)
    assert checkpoints(), "training never reached its first checkpoint"
    subprocess.run(["scancel", "--signal=USR2", job], check=True)  # what SLURM sends before preempting
    deadline = time.time() + 600
    while time.time() < deadline and not finished_runs(tracking_server, "pretrain", seed="21"):
        time.sleep(1)
    wait_until_gone([job])
    log = (work / "slurm" / "pretrain" / "logs" / f"{job}_0_log.err").read_text()
    assert "requeueing job" in log and "stopped at step" in log, log[-3000:]
    client = MlflowClient(tracking_server)
    experiment = client.get_experiment_by_name("pretrain")
    runs = client.search_runs([experiment.experiment_id], "tags.seed = '21'")
    assert [r.info.status for r in runs] == ["FINISHED"], "one MLflow run, taken over by the requeued job"
    assert (work / runs[0].data.tags["model_dir"] / "config.json").is_file()  # relative to the work directory


def test_a_two_task_srun_ddp_pretraining_is_one_run_written_by_rank_zero(tracking_server, data_dir, tmp_path, work,
                                                                           in_process):
    args = _pretrain_args(work, tracking_server, "--nodes", "1", "--gpus-per-node", "2", "--wait", "seed=22",
                          "pretrain.max_steps=4", "pretrain.checkpoint_every=2", *LAUNCHER)
    done = in_process(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    job = done.stdout.split("submitted pretraining job ")[1].split(":")[0]
    logs = work / "slurm" / "pretrain" / "logs"
    assert (logs / f"{job}_0_log.err").exists() and (logs / f"{job}_1_log.err").exists()  # srun ran 2 tasks
    runs = finished_runs(tracking_server, "pretrain", seed="22")
    assert len(runs) == 1, "rank 1 must not create a run of its own"
    assert runs[0].data.params["trainer.devices"] == "2" and runs[0].data.params["trainer.strategy"] == "ddp"
    model_dir = work / runs[0].data.tags["model_dir"]
    assert (model_dir / "config.json").is_file()
    # both ranks trained: a rank that never joined would have hung the gloo process group, not finished


def test_a_sweep_with_two_worker_jobs_finishes_exactly_n_trials(tracking_server, postgres_url, data_dir, tmp_path,
                                                                 work, in_process):
    study = f"slurm-{uuid.uuid4().hex[:8]}"
    done = in_process("sweep", str(REPO / "experiments" / "sweeps" / "micro.yaml"), *LAUNCHER, "--study", study,
                      "--storage", postgres_url, "--workers", "2", "--launcher", "slurm", "--wait",
                      "--work-dir", str(work), "--tracking-uri", tracking_server, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    trials = optuna.load_study(study_name=study, storage=postgres_url).get_trials(deepcopy=False)
    finished = [t for t in trials if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)]
    assert len(finished) == 4, [t.state for t in trials]  # micro.yaml: a 4-point grid (its pruner may prune)
    assert len({tuple(sorted(t.params.items())) for t in finished}) == 4, "a trial was run twice"

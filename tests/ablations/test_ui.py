"""ablations.ui: the environment the MLflow server runs in (the servers themselves are started in
tests/ablations/sweep/test_sweep.py and tests/ablations/launch/test_slurm.py)."""

from __future__ import annotations

from ablations.ui import server_environment


def test_the_server_runs_without_telemetry_or_mlflows_job_runner_unless_asked(monkeypatch):
    monkeypatch.delenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", raising=False)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "false")
    env = server_environment()
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"  # seven fewer processes importing MLflow
    assert env["MLFLOW_DISABLE_TELEMETRY"] == "true" and env["DO_NOT_TRACK"] == "true"
    monkeypatch.setenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "true")  # a user who wants MLflow's jobs
    assert server_environment()["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "true"

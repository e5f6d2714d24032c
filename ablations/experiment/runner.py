"""`bioablate run EXPERIMENT.yaml`: execute the planned runs of an experiment (ablations/experiment/, which
resolves each against the tracking store) that the store does not hold yet.

Pretraining stages run first (a continual stage after the stage it continues from), then the
fine-tuning runs of each model. Every run is looked up by its fingerprint first: FINISHED runs are
reused (so a model or cell shared by several tables is computed once per store), and an interrupted
experiment resumes where it stopped (run_pretrain / run_finetune take over a RUNNING or FAILED run and
its checkpoints). A run that fails is recorded (MLflow status FAILED, error tag) and the others go on;
runs that need a failed stage are reported as blocked.

Parallelism: `devices=N, runs_per_device=K` runs N x K runs at a time in worker processes, K per device
(CUDA: each worker sees its GPU through CUDA_VISIBLE_DEVICES; small profiles leave a GPU mostly idle, so
K > 1 fills it); every worker gets an equal share of the host's cores for its CPU threads. `ddp=True`
instead gives every single run N devices (trainer.devices=N, strategy ddp), one run at a time.

MLflow: one parent run per invocation (tags kind=experiment, experiment, experiment_file, profile,
cli_overrides as a JSON list, invocation) in the fine-tuning runs' MLflow experiment; runs *created* by the
invocation get `mlflow.parentRunId` and `experiment` tags (reused runs keep theirs: they are found by
fingerprint, not by parent).
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Optional

from omegaconf import OmegaConf

from ablations.checks import check_accelerator_present
from ablations.config import REPO_ROOT
from ablations.experiment import (
    FINETUNE,
    PARENT_KIND,
    PRETRAIN,
    Experiment,
    Plan,
    PlannedCell,
    PlannedRun,
    RunIdentity,
    Store,
    record_plan,
    resolve_cell,
    resolve_stage,
    run_status,
)
from ablations.experiment.summary import OUTCOMES, Outcome, RunSummary
from ablations.experiment.workers import (
    InProcess,
    RunOutcome,
    check_parallelism,
    execute,
    no_progress_bars,
    stop_workers,
    worker_pool,
)
from ablations.places import shown_place
from ablations.results import BLOCKED, COMPUTED, FAILED, FINISHED, HELD, REUSED
from ablations.run import lifecycle
from ablations.run.lifecycle import Heartbeat, claim_tags, live_holder
from bioablate_core import interrupts
from bioablate_core.claims import Holder
from bioablate_core.console import one_line
from bioablate_core.distributed import is_ddp_worker


def _named(planned: PlannedRun) -> str:
    """A run as its lines name it: its place in the plan, and the model it fine-tunes where that is a named
    model other than the experiment's name for it (quickstart's `minilm` is `random-bert` under micro)."""
    model = planned.config.model.name_or_path if planned.cell is not None and planned.config is not None else None
    if model and "/" not in model and model != planned.cell.model:
        return f"{planned.name} ({model})"
    return planned.name


def _uses_cuda(experiment: Experiment) -> bool:
    accelerator = experiment.shared_config().trainer.accelerator
    if accelerator not in ("auto", "gpu", "cuda"):
        return False
    import torch

    return torch.cuda.is_available()


# ---------------------------------------------------------------------------------------------------
# The experiment


class _Parent:
    """The invocation's parent MLflow run. It carries its process's claim tags and heartbeat
    (`ablations.run.lifecycle`), so that the next invocation of the experiment ends a parent whose process
    died (SIGKILL, a lost node) as KILLED instead of leaving it RUNNING for ever."""

    def __init__(self, experiment: Experiment, tracking_uri: str, work_dir: Path, devices: int, ddp: bool,
                 runs_per_device: int = 1):
        from ablations.run.tracking import Tracker, git_commit

        self.tracker = Tracker(tracking_uri, experiment.shared_config().experiment_name,
                               artifact_root=work_dir / "mlartifacts", kind="finetune")  # its runs' experiment
        self._end_dead_parents(experiment.name)
        holder = Holder.me()
        # profile + cli_overrides (a JSON list): the invocation `bioablate table` finds (experiment/invocations.py)
        tags = {"kind": PARENT_KIND, "experiment": experiment.name,
                "experiment_file": shown_place(experiment.path, REPO_ROOT),
                "profile": experiment.profile, "cli_overrides": json.dumps(list(experiment.cli_overrides)),
                "invocation": experiment.invocation(), "git_commit": git_commit(),
                "mlflow.note.content": experiment.description, **claim_tags(holder)}
        params = {"overrides": " ".join(f"{k}={v}" for k, v in experiment.overrides.items()),
                  "cli_overrides": " ".join(experiment.cli_overrides), "devices": devices, "ddp": ddp,
                  "runs_per_device": runs_per_device}
        self.run_id = self.tracker.create(f"experiment-{experiment.name}", tags, params)
        self.tracker.client.update_run(self.run_id, status="RUNNING")
        self.child_tags = {"mlflow.parentRunId": self.run_id, "experiment": experiment.name}
        self.heartbeat = Heartbeat(self.tracker, lambda: self.run_id, lifecycle.HEARTBEAT_S, lambda: holder).__enter__()

    def _end_dead_parents(self, name: str) -> None:
        running = self.tracker.client.search_runs(
            [self.tracker.experiment_id], f"tags.kind = '{PARENT_KIND}' and tags.experiment = '{name}' and "
                                          "attributes.status = 'RUNNING'")
        for run in running:
            if live_holder(run.data.tags) is None:
                self.tracker.client.set_tag(run.info.run_id, "stopped", "its process died")
                self.tracker.client.set_terminated(run.info.run_id, "KILLED")
                self.tracker.drop_tag_once_ended(run.info.run_id, lifecycle.CLAIM_TAG)  # its host and pid

    def adopt(self, run_id: str) -> None:
        self.tracker.set_tags(run_id, self.child_tags)

    def close(self, summary: RunSummary | None, status: str) -> None:
        if summary is not None:
            self.tracker.log_metrics(self.run_id, {
                "runs_planned": len(summary.outcomes), **{f"runs_{s.lower()}": summary.count(s) for s in OUTCOMES}})
        self.heartbeat.__exit__()
        self.tracker.client.set_terminated(self.run_id, status)
        self.tracker.drop_tag_once_ended(self.run_id, lifecycle.CLAIM_TAG)


def run_experiment(experiment: Experiment, devices: int = 1, ddp: bool = False,
                   echo: Callable[[str], None] = print, wait: bool = True, runs_per_device: int = 1) -> RunSummary:
    """Compute every planned run the store does not hold yet; return what happened to each. A run that
    another live process is computing is waited for and reused (`wait=False`: recorded as HELD, naming
    the holder). The first SIGINT / SIGTERM stops the whole experiment (parent run KILLED)."""
    check_parallelism(devices, ddp, runs_per_device)  # before a parent run exists
    work_dir, tracking_uri = experiment.store()
    no_progress_bars()
    for accelerator in experiment.accelerators:  # a device this machine lacks: refused before the parent run
        check_accelerator_present(OmegaConf.create({"trainer": {"accelerator": accelerator}}))
    child = is_ddp_worker()
    if child:
        echo = _silent
    parent = None if child else _Parent(experiment, tracking_uri, work_dir, devices, ddp, runs_per_device)
    summary = RunSummary(experiment.name, experiment.profile, tracking_uri, parent.run_id if parent else None,
                         experiment.kind)
    if experiment.kind != "finetune":
        if parent is not None:
            parent.close(summary, "FINISHED")
        return summary
    parallel = devices * runs_per_device > 1 and not ddp and not child
    executor = worker_pool(devices, runs_per_device, _uses_cuda(experiment)) if parallel else InProcess()
    try:
        _Run(experiment, Store(tracking_uri), executor, parent, summary, echo, child, wait).go()
    except BaseException:
        if parent is not None:
            parent.close(summary, "KILLED")
        if parallel:  # the workers stop too (their runs end KILLED), rather than being waited for
            stop_workers()
        raise
    finally:
        executor.shutdown(cancel_futures=True)
    if parent is not None:  # an invocation that left held runs to their holders did not fail
        parent.close(summary, "FINISHED" if summary.ok or summary.only_held else "FAILED")
    return summary


def _silent(_: str) -> None:
    pass


class _Run:
    """One invocation: executes the planned stages and cells as their dependencies finish. Each is
    resolved against the store (ablations.experiment.plan) only once the stages it needs are settled."""

    def __init__(self, experiment: Experiment, store: Store, executor: Any, parent: Optional[_Parent],
                 summary: RunSummary, echo: Callable[[str], None], ddp_worker: bool, wait: bool = True):
        self.experiment, self.store, self.executor, self.parent = experiment, store, executor, parent
        self.summary, self.echo, self.ddp_worker, self.wait = summary, echo, ddp_worker, wait
        self.stages: dict[str, PlannedRun] = {}  # settled stages: FINISHED, FAILED or BLOCKED
        self.started_ms = int(time.time() * 1000)
        # each planned run's place in the plan, for the lines that say it is running and how far it got
        self.places = {name: i for i, name in enumerate(
            [*experiment.stage_order(), *(cell.name for cell in experiment.cells())], 1)}
        self.total = len(self.places)
        self.running: dict[Future, PlannedRun] = {}
        # the runs resolved so far, recorded as the plan as they are (`bioablate table` after an interrupted
        # run finds the runs without the data: ablations/experiment/record.py)
        self.resolved: dict[tuple[str, str], PlannedRun] = {}

    def go(self) -> None:
        stages = list(self.experiment.stage_order())
        cells = list(self.experiment.cells())
        while stages or cells or self.running:
            interrupts.check()  # a signal whose exception a finalizer swallowed still stops the loop
            for name in list(stages):
                dependency = self.experiment.depends_on(name)
                if dependency is None or dependency in self.stages:
                    stages.remove(name)
                    self._stage(name)
            cells_before = len(self.resolved)
            ready = [cell for cell in cells
                     if not self.experiment.models[cell.model].is_planned or cell.model in self.stages]
            for cell in ready:  # resolved (and recorded) before any runs: an interrupt keeps the record
                interrupts.check()
                cells.remove(cell)
                self._resolve_cell(cell)
            if len(self.resolved) > cells_before:
                self._record_plan()
            for cell in ready:
                interrupts.check()
                self._cell(cell)
            if self.running:
                done, _ = wait(list(self.running), return_when=FIRST_COMPLETED)
                for future in done:
                    self._finished(future)

    # -- outcomes

    def _record(self, outcome: Outcome) -> None:
        self.summary.outcomes.append(outcome)
        where = f" ({outcome.seconds:.1f} s)" if outcome.status == COMPUTED else ""
        detail = f": {outcome.error}" if outcome.error else ""
        self.echo(f"[{len(self.summary.outcomes):>{len(str(self.total))}}/{self.total}] "
                  f"{outcome.status.lower():<8} {outcome.kind:<8} {outcome.name}{where}{detail}")

    def _tags(self) -> dict[str, str]:
        return dict(self.parent.child_tags) if self.parent is not None else {}

    # -- planned runs

    def _stage(self, name: str) -> None:
        """A pretraining stage, or a two-stage model's first fine-tuning run (kind FINETUNE, no cell)."""
        kind = PRETRAIN if self.experiment.models[name].is_stage else FINETUNE
        try:
            planned = resolve_stage(self.experiment, name, self.stages, self.store)
        except Exception as error:  # noqa: BLE001 -- e.g. its data is missing: recorded, the others go on
            self.stages[name] = PlannedRun(kind, name, FAILED, one_line(error))
            self._record(Outcome(kind, name, FAILED, error=one_line(error)))
            return
        kept_nothing = planned.status == FAILED and planned.run is not None and planned.run.info.status == FINISHED
        if planned.status in (FINISHED, BLOCKED) or kept_nothing:  # kept_nothing: a finished first stage
            self.stages[name] = planned  # without its model directory (resuming would only reuse it)
            status = {FINISHED: REUSED, BLOCKED: BLOCKED}.get(planned.status, FAILED)
            self._record(Outcome(kind, name, status, planned.run_id, planned.fingerprint, error=planned.reason))
            return
        self._submit(planned, {} if kind == PRETRAIN else self._tags())

    def _resolve_cell(self, cell: PlannedCell) -> None:
        try:
            self.resolved[(FINETUNE, cell.name)] = resolve_cell(self.experiment, cell, self.stages, self.store)
        except Exception as error:  # noqa: BLE001 -- recorded as FAILED by `_cell`
            self.resolved[(FINETUNE, cell.name)] = PlannedRun(FINETUNE, cell.name, FAILED, one_line(error))

    def _record_plan(self) -> None:
        """The identities resolved so far as the experiment's recorded plan (written again as stages
        finish and their cells resolve; the table rendered at the end records the whole plan)."""
        if self.ddp_worker:
            return
        cells = [p for (kind, _), p in self.resolved.items() if kind == FINETUNE and p.cell is not None]
        stages = {name: p for name, p in self.stages.items() if p.identity is not None}
        record_plan(self.experiment, Plan(stages, cells))

    def _cell(self, cell: PlannedCell) -> None:
        planned = self.resolved[(FINETUNE, cell.name)]
        if planned.cell is None:  # resolving it failed
            self._record(Outcome(FINETUNE, cell.name, FAILED, error=planned.reason))
            return
        if planned.status == BLOCKED:
            self._record(Outcome(FINETUNE, cell.name, BLOCKED, error=planned.reason))
        elif planned.status == FINISHED:
            if not self.ddp_worker:
                self._record(Outcome(FINETUNE, cell.name, REUSED, planned.run_id, planned.fingerprint))
        else:
            self._submit(planned, {**self._tags(), **self._cell_tags(planned.cell)})

    def _cell_tags(self, cell: PlannedCell) -> dict[str, str]:
        """What tells the cell's run from the others in its name (ablations.run.dashboard.run_name): the
        labels of its variant, and its model's name in the experiment where there are several."""
        from ablations.run.dashboard import MODEL_KEY_TAG, VARIANT_TAG  # (MLflow: loaded by the runs anyway)

        tags = {VARIANT_TAG: "-".join(label for _, label in cell.variant)} if cell.variant else {}
        if len(self.experiment.finetuned_models()) > 1:
            tags[MODEL_KEY_TAG] = cell.model
        return tags

    def _place(self, planned: PlannedRun) -> str:
        return f"[{self.places[planned.name]:>{len(str(self.total))}}/{self.total}]"

    def _submit(self, planned: PlannedRun, tags: dict[str, str]) -> None:
        cfg = planned.config
        payload = cfg if isinstance(self.executor, InProcess) else OmegaConf.to_container(cfg, resolve=True)
        self.echo(f"{self._place(planned)} running  {planned.kind} {_named(planned)}")
        progress = (f"{self._place(planned)} {planned.kind} {_named(planned)}", self.started_ms / 1000)
        identity = planned.identity  # a fine-tuning run's fingerprints, computed once, here, by the planner
        fingerprints = (identity.fingerprint, identity.data_fingerprint) if identity and identity.data_fingerprint \
            else None
        future = self.executor.submit(execute, planned.kind, payload, tags, self.wait,
                                      None if self.ddp_worker else progress, fingerprints)
        self.running[future] = planned
        if future.done() and isinstance(self.executor, InProcess):
            self._finished(future)

    def _finished(self, future: Future) -> None:
        planned = self.running.pop(future)
        try:
            out: RunOutcome = future.result()
        except Exception as error:  # noqa: BLE001 -- the worker process itself died
            out = RunOutcome(FAILED, error=f"worker process failed: {one_line(error)}")
        stage = planned.cell is None  # a pretraining stage or a first-stage fine-tune: others wait for it
        outcome = Outcome(planned.kind, planned.name, out.state, out.run_id, out.fingerprint, out.error, out.seconds,
                          out.worker)
        if out.state in (HELD, FAILED):
            if stage:  # held: its cells wait for the holder's run, blocked here, not failed
                self.stages[planned.name] = replace(planned, status=BLOCKED if out.state == HELD else FAILED,
                                                    reason=out.error)
            self._record(outcome)
            if out.disk_full is not None:
                self._stop_on_full_disk(planned, out.disk_full)
            return
        if stage:  # a first-stage fine-tune's model directory is where its planned identity says
            identity = planned.identity if planned.kind == FINETUNE else \
                RunIdentity(PRETRAIN, planned.config.experiment_name, out.fingerprint, Path(out.model_dir))
            if self.ddp_worker and not self._wait_for_rank_zero(identity):
                self.stages[planned.name] = replace(planned, status=FAILED, reason="rank 0 did not finish the stage")
                return
            self.stages[planned.name] = replace(planned, status=FINISHED, reason=None, identity=identity, run=None,
                                                run_id=out.run_id)
        if planned.kind == PRETRAIN and self.parent is not None and out.run_id and out.state == COMPUTED:
            run = self.store.client.get_run(out.run_id)
            if run.info.start_time >= self.started_ms:  # created by this invocation, not resumed
                self.parent.adopt(out.run_id)
        if not self.ddp_worker:
            self._record(outcome)

    def _stop_on_full_disk(self, planned: PlannedRun, full: tuple[int, str, str]) -> None:
        """A run failed for want of disk space (`full`: the errno, its text and the file, from
        `bioablate_core.files.disk_full`): every run after it would too, each leaving a FAILED run and a
        partial checkpoint. The invocation stops here, as one OSError line (the CLI's); the failed run
        keeps what it wrote, and the same command resumes once there is space."""
        number, reason, where = full
        left = self.total - len(self.summary.outcomes)
        raise OSError(number, f"{reason or os.strerror(number)}: {planned.kind} run {planned.name} failed, and "
                              f"the {left} run(s) after it were not started; free space there (or pass another "
                              "--work-dir) and rerun the same command: it resumes",
                      where or str(self.experiment.store()[0]))

    def _wait_for_rank_zero(self, identity: RunIdentity, timeout_s: float = 3600) -> bool:
        """A DDP worker leaves fit() while rank 0 still exports the model and marks the run FINISHED: wait
        for that before fine-tuning from the model directory (else the ranks would load different files)."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            self.store.forget(identity.experiment_name)
            status = run_status(self.store.find(identity.experiment_name, identity.fingerprint))[0]
            if status == FINISHED:
                return True
            if status == FAILED:
                return False
            time.sleep(1)
        return False

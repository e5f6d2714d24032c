"""The lifecycle of a tracked run, one implementation for fine-tuning and pretraining. A run is found by its
fingerprint (MLflow tag `fingerprint`); its checkpoints live in `<work_dir>/runs/<fingerprint>/checkpoints/`.

    run = TrackedRun.open(cfg, fingerprint, force)      # find the newest run with this fingerprint
    done = run.finished()                               # FINISHED already (and not force): reuse it
    with run.claimed(wait):                             # the only live process working on it (below)
        done = run.finished()                           # finished by the holder we waited for: reuse
        run.start(name, tags, params)                   # take an unfinished run over, or create one
        with run.tracked():                             # FINISHED, FAILED (tag `error`) or KILLED
            ... train from run.resume_from ...

- FINISHED (unless `force`): reused, nothing is recomputed.
- FAILED / KILLED / RUNNING with a dead holder: taken over. With a `last.ckpt`, training resumes from it in a
  *continued* MLflow run: a new run with the old one's params, tags (minus `error`, `stopped` and the claim) and
  metric points below the checkpoint's `global_step`, tagged `continues`; the old run is deleted (`mlflow gc`
  purges it). Without a checkpoint the old run is deleted and a new one starts.
- Otherwise (or with `force`): a new MLflow run, and any old checkpoints are removed first.

Claims (`claimed`): a lock on `<run dir>/claim.lock` (`bioablate_core.claims`) held until the run ends; a second
process waits for it ("waiting for <fp> held by host:pid since ...") and reuses the finished run, or with
`wait=False` raises `ClaimHeld`. For a store shared by machines that do not share the work directory, the
holder also keeps the tag `bioablate.claim` (JSON: host, pid, since, lock, heartbeat every HEARTBEAT_S seconds)
on the run until it ends: a RUNNING run is taken over only when its lock is free AND its holder is dead (this
host: its pid is gone; another host: its heartbeat is older than STALE_AFTER_S). MLflow has no compare-and-set:
two machines *and* work directories starting the same new run at one moment can both create it.

Signals: once the run exists, a SIGINT / SIGTERM ends it KILLED (tag `stopped`) wherever it arrives (`start`
defers it until the run's id and holder are recorded; `claimed` ends a RUNNING run a signal stopped outside
`tracked`). Under DDP the other ranks rerun the command after rank 0 decided reuse / resume / new: they never
claim or touch the store, resume from a `last.ckpt` if one exists, and every reporting method does nothing.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator

import pytorch_lightning as pl
from mlflow.entities import Metric, Run
from omegaconf import DictConfig
from pytorch_lightning.loggers import Logger

from ablations.places import resolve_tracking_uri, resolve_work_dir, store_absent
from ablations.run.lightning_logging import FlushPoints, RunOwnedMLFlowLogger
from ablations.run.tracking import METRICS_PER_BATCH, Tracker, git_commit
from bioablate_core import interrupts, threads
from bioablate_core.claims import ClaimHeld, Holder, claim
from bioablate_core.distributed import is_ddp_worker
from bioablate_core.interrupts import Interrupted, Preempted
from lightning_modules.checkpoints import checkpoint_step, usable_checkpoint
from lightning_modules.loss_guard import StopOnNonFiniteLoss
from lightning_modules.preemption import CheckpointOnSignal

log = logging.getLogger("bioablate")

HEARTBEAT_S = 30.0  # how often a claim's holder refreshes `claim.heartbeat`
STALE_AFTER_S = 4 * HEARTBEAT_S  # a heartbeat older than this: its holder is dead (on another host)
CLAIM_TAG = "bioablate.claim"  # who holds a run: JSON {host, pid, since, heartbeat[, lock]}
NOT_CARRIED_OVER = ("error", "stopped", "continues", CLAIM_TAG)  # a continued run has none
# Logged once, when training is over (best dev, test): a continued run computes them again, never starts with them.
SUMMARY_METRIC_PREFIXES = ("best_dev/", "test/")
NON_FINITE_HINT = ("Lower the learning rate (finetune.lr / pretrain.lr), check finetune.class_weights and the "
                   "data, then run again: a changed value is a new run")  # the same values diverge again


@dataclass
class TrackedRun:
    fingerprint: str
    run_dir: Path  # <work_dir>/runs/<fingerprint>
    tracking_uri: str
    open_tracker: Callable[[], Tracker] | None  # opens `tracker`; None in a DDP worker: rank 0 owns the store
    previous: Run | None  # the newest run with this fingerprint (re-read once claimed; None in a worker)
    force: bool
    keep_checkpoints: bool
    run_id: str | None = None  # set by `start` (rank 0 only)
    resuming: bool = False  # `start` took over an unfinished run and resumes from its checkpoint
    holder: Holder | None = None  # our claim, while `claimed`
    _tracker: Tracker | None = None

    @classmethod
    def open(cls, cfg: DictConfig, fingerprint: str, force: bool = False, kind: str | None = None) -> "TrackedRun":
        """`kind` ('finetune', 'pretrain'): describes the run's experiment where it has none (dashboard.py).
        A new local store holds no run: it is created when first needed, so a refusal before leaves none."""
        work_dir = resolve_work_dir(cfg)
        uri = resolve_tracking_uri(cfg, work_dir)
        opener = None if is_ddp_worker() else partial(Tracker, uri, cfg.experiment_name, work_dir / "mlartifacts", kind)
        run = cls(fingerprint, work_dir / "runs" / fingerprint, uri, opener, None, force, bool(cfg.keep_checkpoints))
        if opener is not None and not store_absent(uri):
            run.previous = run.tracker.find(fingerprint)
        return run

    @property
    def tracker(self) -> Tracker | None:
        """The tracking store (opened, and created if new, on first use); None in a DDP worker."""
        if self._tracker is None and self.open_tracker is not None:
            self._tracker = self.open_tracker()
        return self._tracker

    @property
    def checkpoint_dir(self) -> Path:
        return self.run_dir / "checkpoints"

    @property
    def last_checkpoint(self) -> Path:
        return self.checkpoint_dir / "last.ckpt"

    @property
    def claim_file(self) -> Path:
        return self.run_dir / "claim.lock"

    @property
    def is_worker(self) -> bool:
        return self.open_tracker is None

    def finished(self, usable: Callable[[Run], bool] = lambda run: True) -> Run | None:
        """The earlier FINISHED run to reuse instead of computing anything, or None: none, `force`, or
        not `usable` (e.g. its exported model is gone)."""
        previous = self.previous
        if previous is None or previous.info.status != "FINISHED" or self.force or not usable(previous):
            return None
        log.info("run %s already finished (MLflow run %s): reusing it", self.fingerprint, previous.info.run_id)
        return previous

    # ---- claims

    @contextmanager
    def claimed(self, wait: bool = True, echo: Callable[[str], None] | None = None) -> Iterator[None]:
        """Be the one live process working on this fingerprint for the block (see the module doc): wait
        for a live holder (`echo`: the one "waiting for ..." line, default the log) or, with `wait=False`,
        raise `ClaimHeld`. Inside, `previous` is re-read: the holder we waited for may have finished it.
        A DDP worker does not claim (rank 0 does)."""
        if self.is_worker:
            yield
            return
        echo = echo or log.warning
        waited = False

        def announce(holder: Holder) -> None:
            nonlocal waited
            if not waited:
                echo(f"waiting for {self.fingerprint} held by {holder}")
            waited = True

        stack = ExitStack()
        while True:
            self.holder = stack.enter_context(claim(self.claim_file, wait=wait, what=f"run {self.fingerprint}",
                                                    on_wait=announce))
            self.previous = self.tracker.find(self.fingerprint)
            elsewhere = self._live_holder_elsewhere(self.previous)
            if elsewhere is None:
                break
            stack.close()  # held through another work directory: poll its heartbeat
            if not wait:
                raise ClaimHeld(f"run {self.fingerprint}", elsewhere)
            announce(elsewhere)
            time.sleep(min(HEARTBEAT_S, 5.0))
        # after the heartbeat, before the lock: an ended run is shared without its holder (host, lock path)
        stack.callback(lambda: self.tracker.drop_tag_once_ended(self.run_id, CLAIM_TAG))
        try:
            with stack, Heartbeat(self.tracker, lambda: self.run_id, HEARTBEAT_S, lambda: self.holder, self.claim_file):
                try:
                    yield
                except BaseException as error:  # still holding the claim: nobody takes the run over first
                    self._end_if_interrupted(error)
                    raise
        finally:
            self.holder = None

    def _end_if_interrupted(self, error: BaseException) -> None:
        """A signal that stopped the body outside `tracked` (after `start` created the run, before the
        tracked block began) or cut a store write in two (then `error` is the store's, and `Interrupted`
        is raised from it): the run, if still RUNNING, ends KILLED, tagged `stopped`."""
        signum = interrupts.pending()
        if signum is None or self.run_id is None:
            return
        try:
            if self.tracker.client.get_run(self.run_id).info.status == "RUNNING":
                self.tracker.end_killed(self.run_id, str(Interrupted(signum)))
        except Exception as store_error:  # noqa: BLE001 -- the signal is what the caller must see
            log.warning("could not mark MLflow run %s KILLED (%s); the next run with its fingerprint takes it "
                        "over", self.run_id, " ".join(str(store_error).split())[:200])
        if not isinstance(error, Interrupted):
            raise Interrupted(signum) from error

    def _live_holder_elsewhere(self, run: Run | None) -> Holder | None:
        """The live holder of a RUNNING `run` claimed through another lock file (another work directory,
        another machine), or None: not running, not claimed, or its holder is dead. Called holding our
        lock: a holder through this same lock file on this host is dead."""
        if run is None or run.info.status != "RUNNING":
            return None
        claimed = claim_of(run.data.tags)
        if claimed.get("lock") == str(self.claim_file) and claimed.get("host") == self.holder.host:
            return None
        return live_holder(run.data.tags)

    def _claim_tags(self) -> None:
        self.tracker.set_tags(self.run_id, claim_tags(self.holder, self.claim_file))

    # ---- starting: take over, continue, or create

    def start(self, name: str, tags: dict[str, str], params: dict[str, Any]) -> None:
        """Take over the earlier unfinished run (continuing it from its checkpoint, see the module doc),
        or create a new one named `name` with `tags` (plus `fingerprint` and `git_commit`) and `params`.
        A worker process does nothing: rank 0 decided."""
        if self.is_worker:
            return
        previous = self.previous
        takeover = previous is not None and previous.info.status != "FINISHED" and not self.force
        # an unreadable checkpoint (truncated by a full disk, a kill mid-write) is set aside: start afresh
        self.resuming = takeover and usable_checkpoint(self.last_checkpoint) is not None
        recorded = previous.data.tags.get(threads.THREADS_TAG, "") if self.resuming else ""
        count = threads.for_run(int(recorded) if recorded.isdigit() else None)
        # a signal waits until the run exists, its id is recorded and it names its holder: `claimed` then
        # ends it KILLED (cut in two, the run could exist with nobody knowing its id, or half-continued)
        with interrupts.deferred():
            if self.resuming:
                self.run_id = self._continue(previous, checkpoint_step(self.last_checkpoint))
                log.info("resuming %s (%s) from its checkpoint as MLflow run %s", previous.info.run_id,
                         previous.info.status, self.run_id)
            else:
                self._remove_stale_checkpoints()
                if takeover:  # nothing it computed is kept
                    self.tracker.client.delete_run(previous.info.run_id)
                self.run_id = self.tracker.create(name, {"fingerprint": self.fingerprint, "git_commit": git_commit(),
                                                         threads.THREADS_TAG: str(count), **tags}, params)
            if self.holder is not None:
                self._claim_tags()

    def _remove_stale_checkpoints(self) -> None:
        """A new run never resumes stale weights; a checkpoint set aside as unreadable stays, for a look at
        what broke."""
        kept = list(self.checkpoint_dir.glob("*.unreadable"))
        if not kept:
            shutil.rmtree(self.checkpoint_dir, ignore_errors=True)
            return
        for stale in self.checkpoint_dir.iterdir():
            if stale not in kept:
                shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)

    def _continue(self, previous: Run, step: int) -> str:
        """A new run continuing `previous`: its params, tags and metric points below `step` (not its
        summary metrics); then `previous` is deleted."""
        client, old = self.tracker.client, previous.info.run_id
        tags = {k: v for k, v in previous.data.tags.items() if k not in NOT_CARRIED_OVER}
        run_id = self.tracker.create(previous.info.run_name, {**tags, "continues": old}, previous.data.params)
        points = [Metric(m.key, m.value, m.timestamp, m.step) for key in previous.data.metrics
                  if not key.startswith(SUMMARY_METRIC_PREFIXES)
                  for m in client.get_metric_history(old, key) if m.step < step]
        for start in range(0, len(points), METRICS_PER_BATCH):
            client.log_batch(run_id, metrics=points[start:start + METRICS_PER_BATCH])
        client.delete_run(old)
        return run_id

    @property
    def resume_from(self) -> Path | None:
        """The checkpoint to resume training from: `last.ckpt` when taking over an unfinished run (`start`
        checked it is readable, and set an unreadable one aside), in a worker whenever it exists (rank 0
        removed it otherwise)."""
        if (self.resuming or self.is_worker) and self.last_checkpoint.exists():
            return self.last_checkpoint
        return None

    def callbacks(self) -> list[pl.Callback]:
        """Every tracked run's: on SLURM's warning signal, checkpoint to `last.ckpt` and stop; a non-finite
        loss ends it FAILED; (rank 0) store the logged points before every checkpoint (`FlushPoints`)."""
        return [CheckpointOnSignal(self.last_checkpoint), StopOnNonFiniteLoss(NON_FINITE_HINT),
                *([] if self.is_worker else [FlushPoints()])]

    @contextmanager
    def tracked(self, stop_exceptions: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
        """Run the body inside the MLflow run (see `Tracker.tracked_run`; `stop_exceptions` and
        `Preempted` end it as KILLED). On success the checkpoints go unless `keep_checkpoints`; on failure
        they stay for the resume."""
        if self.is_worker:
            yield
            return
        with self.tracker.tracked_run(self.run_id, (Preempted, *stop_exceptions)):
            yield
            interrupts.check()  # a signal whose exception something swallowed: KILLED, not FINISHED
        if not self.keep_checkpoints:
            shutil.rmtree(self.checkpoint_dir, ignore_errors=True)

    # ---- reporting into the run (nothing in a DDP worker)

    def lightning_logger(self, flush_every: int = 1) -> Logger | bool:
        """The Trainer's `logger`, bound to this run, storing points `flush_every` steps at a time; False in a
        worker."""
        return False if self.is_worker else RunOwnedMLFlowLogger(tracking_uri=self.tracker.tracking_uri,
                                                                 run_id=self.run_id, flush_every=flush_every)

    def set_tags(self, tags: dict[str, str]) -> None:
        if not self.is_worker:
            self.tracker.set_tags(self.run_id, tags)

    def log_metrics(self, metrics: dict[str, float]) -> None:
        if not self.is_worker:
            self.tracker.log_metrics(self.run_id, metrics)

    def log_artifacts(self, paths: list[Path], artifact_path: str | None = None) -> None:
        """The files, at the top of the run's artifacts or in its folder `artifact_path`."""
        if not self.is_worker:
            for path in paths:
                self.tracker.client.log_artifact(self.run_id, str(path), artifact_path)


class InterruptCheck(pl.Callback):
    """Stops training at the next batch on a SIGINT / SIGTERM whose exception was swallowed on the way
    (raised inside a finalizer, or caught by a library): `bioablate_core.interrupts.check`."""

    def on_train_batch_end(self, *args: Any) -> None:
        interrupts.check()

    def on_validation_batch_end(self, *args: Any) -> None:
        interrupts.check()


def claim_tags(holder: Holder, lock: Path | None = None) -> dict[str, str]:
    """The tag that says who holds a tracked run (see the module doc), heartbeat now."""
    claimed = {"host": holder.host, "pid": holder.pid, "since": round(holder.since, 3),
               "heartbeat": round(time.time(), 3)}
    if lock is not None:
        claimed["lock"] = str(lock)
    return {CLAIM_TAG: json.dumps(claimed)}


def claim_of(tags: dict[str, str]) -> dict[str, Any]:
    """A run's claim (host, pid, since, heartbeat, lock), from its `bioablate.claim` tag; {} for an unclaimed
    run or an unreadable claim."""
    try:
        claimed = json.loads(tags.get(CLAIM_TAG, "{}"))
    except ValueError:
        return {}
    return claimed if isinstance(claimed, dict) else {}


def live_holder(tags: dict[str, str]) -> Holder | None:
    """The holder named by a RUNNING run's claim (`claim_of`) if it is alive: on this host, its process
    exists; on another, its heartbeat is younger than STALE_AFTER_S. None: dead, or no claim."""
    claimed = claim_of(tags)
    try:
        holder = Holder(str(claimed["host"]), int(claimed["pid"]), float(claimed["since"]))
        beat = float(claimed["heartbeat"])
    except (KeyError, ValueError, TypeError):
        return None
    alive = holder.is_alive_here()
    if alive is not None:
        return holder if alive else None
    return holder if time.time() - beat < STALE_AFTER_S else None


class Heartbeat:
    """Refreshes the heartbeat in the run's claim tag (`claim_tags(holder, lock)`) every `interval` seconds
    from a daemon thread, once the run exists (`run_id()` is not None) and while `holder()` names its
    holder. A failed refresh (a busy store) is logged and retried."""

    def __init__(self, tracker: Tracker, run_id: Callable[[], str | None], interval: float,
                 holder: Callable[[], Holder | None], lock: Path | None = None):
        self.tracker, self.run_id, self.interval = tracker, run_id, interval
        self.holder, self.lock = holder, lock
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, name="claim-heartbeat", daemon=True)

    def _beat(self) -> None:
        while not self.stop.wait(self.interval):
            run_id, holder = self.run_id(), self.holder()
            if run_id is None or holder is None:
                continue
            try:
                self.tracker.set_tags(run_id, claim_tags(holder, self.lock))
            except Exception as error:  # noqa: BLE001 -- a missed beat is not worth stopping a run for
                log.debug("heartbeat of %s failed: %s", run_id, error)

    def __enter__(self) -> "Heartbeat":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)

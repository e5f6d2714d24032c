"""Executing one run of an experiment, in this process or in a pool worker process.

`execute` runs one pretraining or fine-tuning run and returns what happened (a failure is returned, not
raised, so the other runs go on); SLURM jobs (ablations/launch/jobs.py) call it too. `worker_pool` starts
`devices x runs_per_device` worker processes, each holding one device slot for its life; `InProcess` has
the same interface and runs each run at once, in this process.

A worker never outlives the invocation that started it: the parent-death signal (and a thread backing it
up) ends its run KILLED and the worker with it, so a SIGKILLed `bioablate run` leaves no process training
for nobody and no queued cell started by an orphan.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

from omegaconf import DictConfig, OmegaConf

from ablations.results import COMPUTED, FAILED, HELD, REUSED
from bioablate_core import interrupts
from bioablate_core.claims import ClaimHeld
from bioablate_core.console import configure_logging, one_line, quiet_libraries
from bioablate_core.errors import ConfigError
from bioablate_core.files import disk_full
from bioablate_core.threads import configured_threads


@dataclass(frozen=True)
class RunOutcome:
    """What `execute` made of one run (plain values: it crosses from a worker process)."""

    state: str  # results.COMPUTED | REUSED | FAILED | HELD
    run_id: Optional[str] = None
    fingerprint: Optional[str] = None
    model_dir: Optional[str] = None  # a pretraining run's exported model
    error: Optional[str] = None  # FAILED: the error, one line; HELD: who holds the run
    disk_full: Optional[tuple[int, str, str]] = None  # FAILED for want of space: errno, its text, the file
    seconds: float = 0.0
    worker: Optional[int] = None  # the pid of the process that ran it


def execute(kind: str, cfg: dict | DictConfig, tags: dict[str, str], wait: bool = True,
            progress: Optional[tuple[str, float]] = None,
            fingerprints: Optional[tuple[str, str]] = None) -> RunOutcome:
    """Run one pretraining or fine-tuning run; a failure is returned, not raised, so the others go on
    (an interrupt is raised: `bioablate_core.interrupts.Interrupted` is no Exception). `wait`: wait for a run that
    another live process holds (then reuse it), else return it as held. `progress`: the run's label (its
    place in the plan) and when the invocation started, for a progress line per epoch or checkpoint.
    `fingerprints`: a fine-tuning run's (run, data) fingerprints as the planner computed them."""
    from ablations.run.finetune import run_finetune
    from ablations.run.pretrain import run_pretrain
    from lightning_modules.progress import ProgressLines

    cfg = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
    start = time.perf_counter()
    callbacks = [ProgressLines(*progress)] if progress else []
    try:  # the outer handler also sees an interrupt raised by `interrupts.check()` in the inner one
        try:
            if kind == "pretrain":
                result = run_pretrain(cfg, wait=wait, callbacks=callbacks)
                model_dir = str(result.model_dir)
            else:
                result = run_finetune(cfg, tags=tags, wait=wait, callbacks=callbacks, fingerprints=fingerprints)
                model_dir = None
            out = RunOutcome(REUSED if result.reused else COMPUTED, result.run_id, result.fingerprint, model_dir)
        except ClaimHeld as held:  # wait=False: another live process computes it
            out = RunOutcome(HELD, error=str(held))
        except Exception as error:  # noqa: BLE001 -- recorded (the MLflow run is FAILED with the error tag)
            interrupts.check()  # unless a signal caused it (cut a store write in two): the signal stops all
            full = disk_full(error)  # the next runs would fail the same way: the invocation stops (runner.py)
            out = RunOutcome(FAILED, error=one_line(error), disk_full=None if full is None else
                             (full.errno, full.strerror or "", str(full.filename or "")))
    except interrupts.Interrupted as stop:
        if _orphaned():  # the run is ended KILLED; nobody is left to take a result or send more work
            os._exit(stop.exit_code)
        raise
    if _orphaned():  # however the parent's death surfaced here (an error while ending the run KILLED, say):
        # returning, the worker would take the next cell its dead parent had queued and start another run
        os._exit(128 + signal.SIGTERM)
    return replace(out, seconds=time.perf_counter() - start, worker=os.getpid())


_PARENT: Optional[int] = None  # in a pool worker: the pid of the invocation that started it
_PARENT_GONE = False  # in a pool worker: the parent-death signal came (`_parent_died`)


STARTING_SIGNALS = {signal.SIGINT, signal.SIGTERM}  # held back while a worker starts (`_WorkerPool`)


def _init_worker(devices: Any, cuda: bool, threads: int) -> None:
    global _PARENT
    # Until the worker is ready, the terminal's Ctrl-C (sent to the whole group) is the parent's to handle (it
    # terminates its workers), and SIGTERM or the parent-death SIGHUP end the worker at once, quietly. Raised
    # as `Interrupted` here, or as KeyboardInterrupt while the interpreter started, they came out as
    # "Exception in initializer" tracebacks. Ignoring SIGINT drops one held back since the worker was started.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STARTING_SIGNALS)
    device = devices.get()
    _PARENT = os.getppid()
    _die_with_parent()
    _watch_parent()
    if cuda:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(device)
    import torch

    torch.set_num_threads(threads)  # on a GPU too: tokenization, collation and the optimizer's host side
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    configure_logging()  # a spawned interpreter: the progress lines reach the invocation's stderr
    quiet_libraries()
    no_progress_bars()
    signal.signal(signal.SIGHUP, _parent_died)
    interrupts.install()  # SIGINT (the terminal's, to the whole group) / SIGTERM: the run ends KILLED
    if os.getppid() != _PARENT:  # the parent died while the worker started
        os.kill(os.getpid(), signal.SIGHUP)


def _die_with_parent() -> None:
    """SIGHUP to this worker when its parent dies (SIGKILL, a lost terminal), as Linux's parent-death
    signal, taken as one SIGTERM once the worker is ready (`_parent_died`): its run ends KILLED and the
    worker exits (`execute`) rather than blocking for ever sending a result to nobody."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGHUP)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the orphan check in `execute` still ends the worker
        return
    if os.getppid() != _PARENT:  # the parent died before the signal was armed
        os.kill(os.getpid(), signal.SIGHUP)


def _parent_died(_signum: int, _frame: Any) -> None:
    """The parent-death signal: a SIGHUP of its own, as the kernel sends it once per exiting thread of the
    parent (a second SIGTERM would raise inside the store write ending the run KILLED). Only the first
    counts, and it marks the worker orphaned even while the parent still has threads, so that the worker
    takes no further cell its dying parent had queued."""
    global _PARENT_GONE
    _PARENT_GONE = True
    interrupts.deliver_once(signal.SIGTERM)


SIGNAL_GRACE_S = 10.0  # how long an orphaned worker waits for the parent-death signal before sending one
EXIT_GRACE_S = 30.0  # how long it then has to end its run KILLED before it exits outright


def watch_for_orphaning(orphaned: Callable[[], bool], signalled: Callable[[], bool], send_signal: Callable[[], None],
                        exit_now: Callable[[], None], poll_s: float = 0.5, signal_grace_s: float = SIGNAL_GRACE_S,
                        exit_grace_s: float = EXIT_GRACE_S, sleep: Callable[[float], None] = time.sleep) -> None:
    """What a worker's watch thread does (`_watch_parent`): once the worker is orphaned, wait up to
    `signal_grace_s` for the parent-death signal to reach the main thread; only if none did, send the
    signal (it was lost); `exit_grace_s` later, exit outright whatever the main thread is doing.

    It waits before sending because the kernel's signal reaches Python's handler only when the main thread
    next runs Python code (after a training step in C): one sent meanwhile would be a second SIGTERM, which
    raises at once even inside the store write that ends the run KILLED (`bioablate_core.interrupts`)."""
    while not orphaned():
        sleep(poll_s)
    waited = 0.0
    while not signalled() and waited < signal_grace_s:
        sleep(poll_s)
        waited += poll_s
    if not signalled():
        send_signal()
    sleep(exit_grace_s)
    exit_now()


def _watch_parent() -> None:
    """Backs up the parent-death signal, which a worker can miss (its exception raised inside a finalizer
    and dropped while the worker waits in the pool for its next cell): a thread sends the SIGTERM itself
    if none arrived after the worker was orphaned, so a run in progress still ends KILLED through
    `execute`, and a worker still alive after that exits (`watch_for_orphaning`)."""
    watch = functools.partial(watch_for_orphaning, _orphaned, lambda: interrupts.pending() is not None,
                              lambda: os.kill(os.getpid(), signal.SIGTERM), lambda: os._exit(128 + signal.SIGTERM))
    threading.Thread(target=watch, name="bioablate-parent-watch", daemon=True).start()


def _orphaned() -> bool:
    return _PARENT is not None and (_PARENT_GONE or os.getppid() != _PARENT)


class InProcess:
    """The executor interface, running each run at once in this process."""

    def submit(self, fn: Callable, *args: Any) -> Future:
        future: Future = Future()
        future.set_result(fn(*args))
        return future

    def shutdown(self, cancel_futures: bool = False) -> None:
        pass


def check_parallelism(devices: int, ddp: bool, runs_per_device: int) -> None:
    """`--devices`, `--ddp` and `--runs-per-device` together, as one ConfigError each way they cannot be."""
    if devices < 1:
        raise ConfigError(f"--devices must be at least 1 (got {devices})")
    if runs_per_device < 1:
        raise ConfigError(f"--runs-per-device must be at least 1 (got {runs_per_device})")
    if ddp and runs_per_device > 1:
        raise ConfigError("--runs-per-device applies without --ddp (a DDP run takes its devices whole)")


def worker_pool(devices: int, runs_per_device: int, cuda: bool) -> ProcessPoolExecutor:
    """`devices x runs_per_device` worker processes; each takes one device slot for its lifetime."""
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: CUDA_VISIBLE_DEVICES applies
    queue = context.Queue()
    workers = devices * runs_per_device
    for slot in range(workers):
        queue.put(slot % devices)
    # the CPUs chosen for this invocation (bioablate_core.threads: those others leave free), shared out
    threads = max(1, configured_threads() // workers)
    return _WorkerPool(workers, mp_context=context, initializer=_init_worker, initargs=(queue, cuda, threads))


class _WorkerPool(ProcessPoolExecutor):
    """Starts each worker with SIGINT and SIGTERM blocked (the mask survives fork and exec), so neither
    interrupts the new interpreter before `_init_worker` decides what they do; the parent's own signals
    are only held back while it submits (a spawned pool starts its workers in `submit`, as they are needed)."""

    def submit(self, fn: Callable, /, *args: Any, **kwargs: Any) -> Future:
        held = signal.pthread_sigmask(signal.SIG_BLOCK, STARTING_SIGNALS)
        try:
            return super().submit(fn, *args, **kwargs)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)


def stop_workers() -> None:
    """SIGTERM to every worker process this invocation started (its only multiprocessing children): their
    runs end KILLED, rather than the invocation waiting for them."""
    for process in multiprocessing.active_children():
        process.terminate()


def no_progress_bars() -> None:
    """transformers' weight loading / saving bars, one pair per run, would bury the progress lines."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()

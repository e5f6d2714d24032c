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
from typing import Any, Callable, Optional

from omegaconf import DictConfig, OmegaConf

from bioablate_core import interrupts
from bioablate_core.claims import ClaimHeld
from bioablate_core.console import configure_logging, one_line, quiet_libraries
from bioablate_core.errors import ConfigError
from bioablate_core.files import disk_full
from bioablate_core.threads import configured_threads


def execute(kind: str, cfg: dict | DictConfig, tags: dict[str, str], wait: bool = True,
            progress: Optional[tuple[str, float]] = None) -> dict[str, Any]:
    """Run one pretraining or fine-tuning run; a failure is returned, not raised, so the others go on
    (an interrupt is raised: `bioablate_core.interrupts.Interrupted` is no Exception). `wait`: wait for a run that
    another live process holds (then reuse it), else return it as held. `progress`: the run's label (its
    place in the plan) and when the invocation started, for a progress line per epoch or checkpoint."""
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
                out = {"run_id": result.run_id, "fingerprint": result.fingerprint, "reused": result.reused,
                       "model_dir": str(result.model_dir)}
            else:
                result = run_finetune(cfg, tags=tags, wait=wait, callbacks=callbacks)
                out = {"run_id": result.run_id, "fingerprint": result.fingerprint, "reused": result.reused}
        except ClaimHeld as held:  # wait=False: another live process computes it
            out = {"held": str(held)}
        except Exception as error:  # noqa: BLE001 -- recorded (the MLflow run is FAILED with the error tag)
            interrupts.check()  # unless a signal caused it (cut a store write in two): the signal stops all
            out = {"error": one_line(error)}
            full = disk_full(error)
            if full is not None:  # the next runs would fail the same way: the invocation stops (runner.py)
                out["disk_full"] = (full.errno, full.strerror or "", str(full.filename or ""))
    except interrupts.Interrupted as stop:
        if _orphaned():  # the run is ended KILLED; nobody is left to take a result or send more work
            os._exit(stop.exit_code)
        raise
    if _orphaned():  # however the parent's death surfaced here (an error while ending the run KILLED, say):
        # returning, the worker would take the next cell its dead parent had queued and start another run
        os._exit(128 + signal.SIGTERM)
    out["seconds"] = time.perf_counter() - start
    out["worker"] = os.getpid()
    return out


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
    worker exits (`execute`). Without it, workers outlived a killed `bioablate run`, finished their runs,
    then blocked for ever sending results to nobody."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGHUP)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the orphan check in `execute` still ends the worker
        return
    if os.getppid() != _PARENT:  # the parent died before the signal was armed
        os.kill(os.getpid(), signal.SIGHUP)


def _parent_died(_signum: int, _frame: Any) -> None:
    """The parent-death signal, a SIGHUP of its own rather than a SIGTERM because the kernel sends it once
    per thread of the parent that exits while it is the worker's parent (the thread that started the
    worker, then the last one): as SIGTERMs, the second raised at once inside the store write that ended
    the run KILLED, cut it in two and left the run RUNNING (issue 27). Only the first one counts.

    The first can come while the parent process still has threads (and still is the worker's parent, for
    `getppid`): it marks the worker orphaned all the same, or the worker, its run ended, would take the
    next cell its dying parent had queued and start another run."""
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

    Why wait before sending: the kernel's signal reaches Python's handler only when the main thread next
    runs Python code, which can be tens of milliseconds away (a training step in C). A signal sent in that
    window is a *second* SIGTERM once the handler has run, and a second one raises at once even inside a
    store write (`bioablate_core.interrupts`): the write cut in two, the run's ending KILLED fails and the run
    stays RUNNING (issue 27)."""
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
    are only held back while it starts the process."""

    def _spawn_process(self) -> None:
        held = signal.pthread_sigmask(signal.SIG_BLOCK, STARTING_SIGNALS)
        try:
            super()._spawn_process()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)


def no_progress_bars() -> None:
    """transformers' weight loading / saving bars, one pair per run, would bury the progress lines."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()

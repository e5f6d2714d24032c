"""MLflow tracking: one MLflow run per bioablate run, found again by its fingerprint.

A run's final status is decided here, not by Lightning's logger: `tracked_run` marks a run FINISHED only
when the body completes, FAILED when it raises (with the error as a tag), KILLED on Ctrl-C. A run killed
outright (SIGKILL, power loss) stays RUNNING; the next invocation with the same fingerprint takes it over
and resumes from its checkpoint. The whole lifecycle (find, reuse, resume or create, clean up) is
`ablations.run.lifecycle.TrackedRun`, built on this.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import time
import urllib.error
import urllib.request
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlparse

from mlflow.entities import Metric, Param, RunStatus, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from ablations.config import REPO_ROOT
from ablations.run.dashboard import describe_experiment
from ablations.run.sqlite_store import start_sqlite_store
from bioablate_core import interrupts
from bioablate_core.claims import claim
from bioablate_core.databases import SERVER_DIALECTS, dialect, health_request, hide_passwords, unreachable
from bioablate_core.errors import ConfigError
from bioablate_core.interrupts import Interrupted
from lightning_modules.timing import section

PROBE_TIMEOUT_S = 3.0  # an MLflow server that does not answer /health within this is unreachable
log = logging.getLogger("bioablate")
MAX_PARAM_LENGTH = 6000  # MLflow 3 limit on a param value
PARAMS_PER_BATCH = 100  # MLflow's limit per log_batch call
METRICS_PER_BATCH = 1000  # MLflow's limit per log_batch call


@functools.lru_cache(maxsize=1)
def git_commit() -> str:
    """The checkout's commit, read once per process (a `git` subprocess each time was two per run; the
    code a process runs is what it imported when it started, whatever is committed meanwhile)."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=10)
        return out.stdout.strip() if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def store_creation_lock(tracking_uri: str):
    """Two processes starting on a new SQLite store would both create its tables (one fails): the first
    touch of one happens under a lock beside it, one process at a time. Other stores need none. Anything
    else that may open a store a bioablate run is creating (a test polling it) takes the same lock."""
    if tracking_uri.startswith("sqlite:///"):
        return claim(Path(tracking_uri.removeprefix("sqlite:///") + ".lock"))
    return nullcontext()


SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


class StoreDamaged(Exception):
    """A local store's file is there but is no database SQLite can read: the machine's state, not a
    mistake in the command (exit 1, as a failed run), and no folder permission fixes it."""


def damaged(path: Path, shown: str, detail: str) -> StoreDamaged:
    return StoreDamaged(f"tracking URI {shown}: the store file {path} is damaged ({detail}); restore it from a "
                        "backup, or move it aside and rerun to start an empty store (its runs are then recomputed)")


def _not_sqlite(path: Path) -> bool:
    """The file has bytes, and they do not open as SQLite's do. An empty file is a store SQLite starts, and
    one that cannot be read is left to MLflow's error below (a permission)."""
    try:
        with open(path, "rb") as file:
            head = file.read(len(SQLITE_HEADER))
    except OSError:
        return False
    return bool(head) and head != SQLITE_HEADER


def _read_as_damaged(error: BaseException) -> bool:
    """SQLite's 'file is not a database' and 'database disk image is malformed' (a DatabaseError that is not
    an OperationalError: a locked or full store is one of those), anywhere in the chain MLflow wraps."""
    import sqlalchemy

    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, sqlalchemy.exc.DatabaseError) and not isinstance(seen, sqlalchemy.exc.OperationalError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@functools.lru_cache(maxsize=None)
def check_tracking_uri(tracking_uri: str) -> None:
    """Fail in seconds, as one ConfigError naming the URI (its password masked), where MLflow would retry
    for minutes (an HTTP server that is not there) or raise a traceback (an unknown scheme, a store it
    cannot open). Checked once per URI and process."""
    shown = hide_passwords(tracking_uri)
    scheme = urlparse(tracking_uri).scheme.lower()
    if scheme in ("http", "https"):
        url = hide_passwords(tracking_uri.rstrip("/") + "/health")
        try:
            request, url = health_request(tracking_uri)  # ValueError: a port that is no number
            with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S):
                pass
        except urllib.error.HTTPError as e:  # something answers: an MLflow server behind a proxy may
            if e.code >= 500:  # not serve /health (404, 401), but a 5xx is a broken server
                raise ConfigError(f"tracking URI {shown}: the server answers {url} with HTTP {e.code}; "
                                  "check the MLflow server's log") from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = hide_passwords(str(getattr(e, "reason", e)))
            raise ConfigError(f"tracking URI {shown}: no MLflow server answers within "
                              f"{PROBE_TIMEOUT_S:g} s ({reason}); start it (mlflow server) or pass another "
                              "--tracking-uri (default: sqlite:///<work-dir>/mlruns.db)") from None
        return
    if dialect(tracking_uri) in SERVER_DIALECTS:  # MLflow would retry an unreachable server for minutes
        reason = unreachable(tracking_uri, PROBE_TIMEOUT_S)
        if reason is not None:
            raise ConfigError(f"tracking URI {shown}: cannot connect ({hide_passwords(reason)})")
    sqlite = Path(tracking_uri.split(":///", 1)[-1]) if scheme == "sqlite" and "?" not in tracking_uri else None
    if sqlite is not None and sqlite.is_dir():
        raise ConfigError(f"tracking URI {shown}: that path is a folder; name the database file, "
                          "e.g. sqlite:///<folder>/mlruns.db")
    if sqlite is not None and sqlite.is_file() and _not_sqlite(sqlite):
        raise damaged(sqlite, shown, "not an SQLite database")
    try:
        with store_creation_lock(tracking_uri):  # the first client of a new SQLite store creates its tables
            if sqlite is not None and not sqlite.exists() and sqlite.parent.is_dir():
                start_sqlite_store(sqlite)
            MlflowClient(tracking_uri).search_experiments(max_results=1)
    except Exception as e:  # MlflowException (unknown scheme), SQLAlchemy errors, OSError: all one line
        if sqlite is not None and sqlite.is_file() and _read_as_damaged(e):
            cause = getattr(e, "orig", None) or e
            raise damaged(sqlite, shown, str(cause).strip().splitlines()[0][:200]) from None
        detail = hide_passwords(" ".join(str(e).split())[:300])
        raise ConfigError(f"tracking URI {shown}: cannot open the store ({type(e).__name__}: {detail}); a local "
                          "store is sqlite:///<path>/mlruns.db in a writable folder") from None


def newest_run(client: Any, experiment_id: str, fingerprint: str) -> Any | None:
    """The newest run of MLflow experiment `experiment_id` tagged with `fingerprint`, or None (a rerun after
    a failure or `--force` leaves older runs of the same fingerprint behind)."""
    runs = client.search_runs([experiment_id], f"tags.fingerprint = '{fingerprint}'",
                              order_by=["attributes.start_time DESC"], max_results=1)
    return runs[0] if runs else None


class Tracker:
    """A thin wrapper over MlflowClient bound to one tracking URI and one experiment."""

    def __init__(self, tracking_uri: str, experiment_name: str, artifact_root: Path | None = None,
                 kind: str | None = None):
        """`kind` ('finetune', 'pretrain'): the experiment gets that kind's description and saved view of
        its runs list where it has none (`ablations.run.dashboard.describe_experiment`)."""
        check_tracking_uri(tracking_uri)
        self.tracking_uri = tracking_uri
        self.client = SignalSafeClient(MlflowClient(tracking_uri))
        self.unanswered = False  # a tracked run ended on a store that did not answer: write nothing more
        with store_creation_lock(tracking_uri):
            experiment = self._experiment(experiment_name, artifact_root)
        self.experiment_id = experiment.experiment_id
        describe_experiment(self.client, experiment, kind)

    def _experiment(self, name: str, artifact_root: Path | None) -> Any:
        """The MLflow experiment `name`, created if missing. Jobs on a cluster may create it at the same
        moment: whoever loses the race reads the winner's. A tracking server keeps the artifacts itself
        (its --artifacts-destination); a local store puts them under the work directory."""
        experiment = self.client.get_experiment_by_name(name)
        if experiment is not None:
            return experiment
        served = self.tracking_uri.startswith(("http://", "https://"))
        location = artifact_root.resolve().as_uri() if artifact_root is not None and not served else None
        try:
            return self.client.get_experiment(self.client.create_experiment(name, artifact_location=location))
        except MlflowException as error:
            if error.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            return self.client.get_experiment_by_name(name)

    def find(self, fingerprint: str) -> Any | None:
        """The newest run with this fingerprint, or None."""
        return newest_run(self.client, self.experiment_id, fingerprint)

    def create(self, run_name: str, tags: dict[str, str], params: dict[str, Any]) -> str:
        """A new RUNNING run with `tags` and `params`; its id. A signal meanwhile is raised once both are
        stored (`bioablate_core.interrupts.deferred`: inside MLflow's call the run may exist before its id is known,
        and nobody could end it), and ends the run KILLED: the caller's `tracked_run` has not begun."""
        run_id = None
        try:
            with interrupts.deferred():
                run_id = self.client.create_run(self.experiment_id, run_name=run_name, tags=tags).info.run_id
                items = [Param(k, str(v)[:MAX_PARAM_LENGTH]) for k, v in params.items()]
                for start in range(0, len(items), PARAMS_PER_BATCH):
                    self.client.log_batch(run_id, params=items[start:start + PARAMS_PER_BATCH])
        except Interrupted as stop:
            if run_id is not None:
                self.end_killed(run_id, str(stop))
            raise
        return run_id

    def end_killed(self, run_id: str, reason: str) -> None:
        """End the run KILLED, tagged `stopped` with `reason` (a signal's name, a stop exception's)."""
        self.client.set_tag(run_id, "stopped", reason)
        self.client.set_terminated(run_id, RunStatus.to_string(RunStatus.KILLED))

    def drop_tag_once_ended(self, run_id: str | None, key: str) -> None:
        """Remove tag `key` of a run no longer RUNNING (a claim: who works on it); a failing store loses nothing."""
        if self.unanswered:  # the run stayed RUNNING, and a rerun takes its claim over
            return
        try:
            if run_id is not None and self.client.get_run(run_id).info.status != "RUNNING":
                self.client.delete_tag(run_id, key)
        except Exception as error:  # noqa: BLE001 -- the run's own outcome is what the caller must see
            log.debug("could not remove tag %s of %s: %s", key, run_id, error)

    def log_metrics(self, run_id: str, metrics: dict[str, float], step: int | None = None) -> None:
        """All of them in one store write (one `log_metric` each was a SQLite transaction each, ~40 ms)."""
        now = int(time.time() * 1000)
        self.client.log_batch(run_id, metrics=[Metric(key, float(value), now, step or 0)
                                               for key, value in metrics.items()])

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        """All of them in one store write, as `log_metrics`."""
        self.client.log_batch(run_id, tags=[RunTag(key, str(value)) for key, value in tags.items()])

    @contextmanager
    def tracked_run(self, run_id: str, stop_exceptions: tuple[type[BaseException], ...] = ()
                    ) -> Iterator[str]:
        """FINISHED if the body completes; KILLED on Ctrl-C, SIGTERM (`bioablate_core.interrupts.Interrupted`) or one
        of `stop_exceptions` (a deliberate stop, e.g. an Optuna trial being pruned), tagged `stopped` (the
        exception's name, or the signal's); FAILED, tagged `error`, otherwise. An error raised while a signal
        is pending (a store write that the signal cut in two, in Lightning's MLflow logger) is the signal's:
        KILLED, and `Interrupted` is raised from it."""
        try:  # an interrupt while marking it RUNNING must end it KILLED as well
            self.client.update_run(run_id, status="RUNNING")
            with preserved_tracking_env():
                yield run_id
        except (KeyboardInterrupt, Interrupted, *stop_exceptions) as stop:
            self.end_killed(run_id, str(stop) if isinstance(stop, Interrupted) else type(stop).__name__)
            raise
        except BaseException as error:
            signum = interrupts.pending()
            if signum is not None:
                self.end_killed(run_id, str(Interrupted(signum)))
                raise Interrupted(signum) from error
            if store_failure(error) is not None:
                # the store did not answer: its message says the run stays RUNNING, and each further call
                # (marking it FAILED, dropping its claim) would wait out MLflow's busy timeout (20 s on
                # SQLite) before failing the same way
                self.unanswered = True
                raise
            try:
                self.client.set_tag(run_id, "error", hide_passwords(f"{type(error).__name__}: {error}")[:5000])
                self.client.set_terminated(run_id, RunStatus.to_string(RunStatus.FAILED))
            except Exception as store_error:  # e.g. the store's disk is full too: report the first error
                log.warning("could not mark MLflow run %s FAILED (%s); the next run with its fingerprint "
                            "takes it over", run_id, " ".join(str(store_error).split())[:200])
            raise
        else:
            self.client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))


def store_failure(error: BaseException) -> str | None:
    """One line for an error of the tracking store itself (locked past its timeout, its disk full, its
    server gone), or None for any other error. MLflow wraps SQLAlchemy's OperationalError in an
    MlflowException (TEMPORARILY_UNAVAILABLE) whose message carries the SQL and a 390-line traceback."""
    import sqlalchemy

    if isinstance(error, StoreDamaged):
        return str(error)
    seen: BaseException | None = error
    while seen is not None:
        store = isinstance(seen, sqlalchemy.exc.OperationalError) or (
            isinstance(seen, MlflowException) and seen.error_code == "TEMPORARILY_UNAVAILABLE")
        if store:
            cause = getattr(seen, "orig", None) or seen
            detail = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
            return (f"the tracking store did not answer ({hide_passwords(detail)[:200]}); a run in progress was left "
                    "RUNNING: rerun the same command once the store answers, and it takes the run over")
        seen = seen.__cause__ or seen.__context__
    return None


@contextmanager
def preserved_tracking_env() -> Iterator[None]:
    """Lightning's MLflow logger calls `mlflow.set_tracking_uri`, which in MLflow 3 also sets
    $MLFLOW_TRACKING_URI for the rest of the process (and its children): a later run with another work
    directory would then log to this run's store. Put the variable back as it was."""
    before = os.environ.get("MLFLOW_TRACKING_URI")
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = before


class SignalSafeClient:
    """An MlflowClient whose calls a SIGINT / SIGTERM does not cut in two: the signal is raised when the
    call returns (`bioablate_core.interrupts.deferred`; a second one at once). Cut inside SQLAlchemy's session
    handling, a call failed with another error ("This transaction is closed") and could leave its session
    unable to close, its connection holding the SQLite lock, so that nothing could end the run KILLED."""

    def __init__(self, client: MlflowClient):
        self._client = client

    def __getattr__(self, name: str) -> Any:
        if name == "_client":  # not set yet (e.g. while unpickling): no recursion through __getattr__
            raise AttributeError(name)
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        @functools.wraps(attribute)
        def whole(*args: Any, **kwargs: Any) -> Any:
            with interrupts.deferred(), section("mlflow_logging"):  # the run's timing profile
                return attribute(*args, **kwargs)

        return whole

"""Where a study lives: the RDB storage (heartbeats, retries of a dead worker's trials), the study-wide
claim lock, the SQLite single-process guard, and the storage URL without its password.

Sharing a study between worker processes (on one machine with `--workers K`, or on several machines that
run the same command against one server database) must neither duplicate nor lose trials: claiming a
trial happens under a lock held by the database (a PostgreSQL advisory lock, MySQL GET_LOCK), and SQLite,
which cannot be shared safely, serves one process only (a lock file enforces it).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import optuna
import sqlalchemy
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback

from bioablate_core.databases import SERVER_DIALECTS, dialect, redact, unreachable, with_driver
from bioablate_core.errors import ConfigError

if TYPE_CHECKING:  # `bioablate ui` imports this module: it needs no config machinery
    from ablations.sweep.spec import SweepSpec

PROBE_TIMEOUT_S = 5.0  # a database server that accepts no connection within this is unreachable
STORAGE_ENV = "BIOABLATE_SWEEP_STORAGE"  # the storage URL, kept out of shell history and `ps` listings


def default_storage(work_dir: Path) -> str:
    return f"sqlite:///{work_dir / 'optuna.db'}"


def study_storage(given: str | None, work_dir: Path) -> str:
    """The study storage URL: `given` (--storage), else $BIOABLATE_SWEEP_STORAGE, else SQLite in `work_dir`;
    a `postgresql://` URL names the installed driver, as a tracking URI does (bioablate_core.databases.with_driver)."""
    return with_driver(given or os.environ.get(STORAGE_ENV) or default_storage(work_dir))


@contextmanager
def quiet_experimental() -> Iterator[None]:
    """Heartbeats and trial retries have been "experimental" in Optuna since 2.8; the warning on every
    call is noise in a user's terminal."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        yield


@contextmanager
def open_storage(url: str, spec: SweepSpec | None = None) -> Iterator[RDBStorage]:
    """An RDB storage with heartbeats, for the length of a `with`: a trial whose worker died goes stale
    after the grace period, is marked FAIL and re-queued (same parameters) up to `max_retry` times. Its
    connection pool is closed at the end, so a process that opens several studies (a notebook, the
    tests) keeps no idle connections to the database server, which allows only so many."""
    url = with_driver(url)
    redact(url)
    if dialect(url) in SERVER_DIALECTS:  # Optuna would retry an unreachable server for minutes
        reason = unreachable(url, PROBE_TIMEOUT_S)
        if reason is not None:
            raise ConfigError(f"cannot open the study storage {redact(url)}: {reason}")
    with quiet_experimental():
        heartbeat: dict[str, Any] = {}
        if spec is not None:
            heartbeat = dict(heartbeat_interval=spec.heartbeat_interval, grace_period=spec.grace_period,
                             heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(spec.max_retry))
        try:
            storage = RDBStorage(url, **heartbeat)
        except (ImportError, sqlalchemy.exc.SQLAlchemyError) as error:
            raise ConfigError(f"cannot open the study storage {redact(url)}: "
                              f"{str(error).splitlines()[0]}") from None
    try:
        yield storage
    finally:
        storage.engine.dispose()


class ClaimLock:
    """A study-wide mutex held by the database, so it spans processes and machines and dies with its
    holder's connection. SQLite needs none: the process holds the database's lock file throughout."""

    def __init__(self, storage: RDBStorage, study_name: str):
        self.dialect = storage.engine.dialect.name
        if self.dialect not in ("postgresql", "mysql", "sqlite"):
            raise ConfigError(f"study storage dialect '{self.dialect}' is not supported; use postgresql, "
                              "mysql or sqlite")
        self.engine = storage.engine
        self.name = f"bioablate-sweep:{study_name}"
        self.key = int.from_bytes(hashlib.sha256(self.name.encode()).digest()[:8], "big", signed=True)
        self.connection: sqlalchemy.engine.Connection | None = None

    def acquire(self) -> None:
        if self.dialect == "sqlite" or self.connection is not None:
            return
        self.connection = self.engine.connect()
        if self.dialect == "postgresql":
            self.connection.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"), {"key": self.key})
        else:
            self.connection.execute(sqlalchemy.text("SELECT GET_LOCK(:name, -1)"), {"name": self.name})

    def release(self) -> None:
        """Idempotent: the objective releases the lock as soon as its parameters are sampled."""
        if self.connection is None:
            return
        if self.dialect == "postgresql":
            self.connection.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:key)"), {"key": self.key})
        else:
            self.connection.execute(sqlalchemy.text("SELECT RELEASE_LOCK(:name)"), {"name": self.name})
        self.connection.close()
        self.connection = None

    @contextmanager
    def held(self) -> Iterator[None]:
        self.acquire()
        try:
            yield
        finally:
            self.release()


@contextmanager
def sqlite_single_process(url: str) -> Iterator[None]:
    """SQLite cannot be shared safely between processes (a busy database fails writes at random); this
    turns a second process into a clear error instead."""
    database = sqlalchemy.engine.make_url(url).database
    if not url.startswith("sqlite") or not database or database == ":memory:":
        yield
        return
    lock_path = Path(database + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(
                f"the SQLite study storage {redact(url)} is in use by another process; SQLite serves one process: "
                "for several workers use a server database, e.g. --storage "
                "postgresql+psycopg2://user:password@host/db (see docs/sweeps.md)") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

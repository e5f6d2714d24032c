"""A new SQLite tracking store, copied from an empty one MLflow migrated once per version
(`ablations.run.tracking.check_tracking_uri` starts every new local store with it)."""

from __future__ import annotations

import logging
import os
import shutil
from contextlib import closing
from pathlib import Path

from bioablate_core.claims import claim

log = logging.getLogger("bioablate")


def start_sqlite_store(path: Path) -> bool:
    """Create the new SQLite store `path` as a copy of an empty one, migrated once per MLflow version into
    the user cache folder (`mlflow/empty-store-<version>.db`): MLflow's own creation runs its whole chain of
    schema migrations, about 2 s of CPU for every new store (every new work directory), the copy a few
    milliseconds. The copy has MLflow's tables at its current schema and nothing in them; MLflow adds the
    Default experiment when it first opens it, as it does after its own creation. A template not at this
    MLflow's schema revision (damaged, another build's) is made again. Where the cache cannot be written or
    the copy fails, nothing is left at `path` (False) and MLflow creates the store as usual. Call with the
    store's creation lock held."""
    import mlflow
    from mlflow.store.db.utils import _get_latest_schema_revision, _initialize_tables  # MLflow's own steps
    from sqlalchemy import create_engine

    from bioablate_core.files import user_cache_dir

    template = user_cache_dir() / "mlflow" / f"empty-store-{mlflow.__version__}.db"
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        head = _get_latest_schema_revision()
        if _schema_revision(template) != head:
            template.parent.mkdir(parents=True, exist_ok=True)
            with claim(template.with_name(template.name + ".lock")):  # one process migrates, others wait
                if _schema_revision(template) != head:
                    building = template.with_name(f".{template.name}.{os.getpid()}.part")
                    engine = create_engine(f"sqlite:///{building}")
                    try:
                        _initialize_tables(engine)
                    finally:
                        engine.dispose()
                    os.replace(building, template)  # a template is whole or absent, never half-migrated
        shutil.copyfile(template, part)
        os.replace(part, path)
        return True
    except Exception as error:  # an unwritable cache, a full disk, another MLflow's internals: MLflow's way
        log.debug("new store %s without the template %s: %s", path, template, error)
        part.unlink(missing_ok=True)
        return False


def _schema_revision(path: Path) -> str | None:
    """The alembic revision of the SQLite store at `path`; None where it has none or is no database."""
    import sqlite3

    if not path.is_file():
        return None
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            row = db.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None

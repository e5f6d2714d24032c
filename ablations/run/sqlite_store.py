"""A new SQLite tracking store, copied from an empty one MLflow made once per version
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
    """Create the new SQLite store `path` as a copy of an empty one that `mlflow db upgrade` made once per
    MLflow version in the user cache folder (`mlflow/empty-store-<version>.db`): MLflow's own creation runs
    its whole chain of schema migrations for every new store (every new work directory), the copy takes
    milliseconds. The copy has MLflow's tables at this version's schema and nothing in them; MLflow adds
    the Default experiment (its artifact location below the opening process's folder) when it first opens
    it, as after its own creation. A template that is no store (damaged, cut short) is made again. Where the
    cache cannot be written or the copy fails, nothing is left at `path` (False) and MLflow creates the
    store as usual. Call with the store's creation lock held."""
    import mlflow
    from mlflow.db import upgrade  # `mlflow db upgrade URL`: on an empty database, MLflow's schema alone

    from bioablate_core.files import user_cache_dir

    template = user_cache_dir() / "mlflow" / f"empty-store-{mlflow.__version__}.db"
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        if _schema_revision(template) is None:
            template.parent.mkdir(parents=True, exist_ok=True)
            with claim(template.with_name(template.name + ".lock")):  # one process migrates, others wait
                if _schema_revision(template) is None:
                    building = template.with_name(f".{template.name}.{os.getpid()}.part")
                    upgrade.main([f"sqlite:///{building}"], prog_name="mlflow db upgrade", standalone_mode=False)
                    os.replace(building, template)  # a template is whole or absent, never half-migrated
        shutil.copyfile(template, part)
        os.replace(part, path)
        return True
    except Exception as error:  # an unwritable cache, a full disk, a failed migration: MLflow's way
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

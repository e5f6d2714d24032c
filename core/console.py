"""What the terminal shows: library noise off by default, errors as one line."""

from __future__ import annotations

import logging
import os
import warnings


# the libraries whose logs below ERROR are noise for a user running experiments
NOISY_LIBRARIES = ("pytorch_lightning", "lightning", "lightning_fabric", "mlflow", "alembic", "transformers")
# loggers that print a full traceback (ERROR) for an exception their library raises right after: the
# command reports that exception itself, in one line (MLflow's SQL store logs each failed query so)
RERAISED_ERROR_LOGGERS = ("mlflow.store.db.utils",)


# what the libraries read from the environment, set unless the user set it (a later-imported library and
# every process we start see it)
QUIET_ENVIRONMENT = {
    "MLFLOW_LOGGING_LEVEL": "ERROR",
    "TRANSFORMERS_VERBOSITY": "error",
    "TOKENIZERS_PARALLELISM": "false",
    # MLflow writes "🏃 View run ... at: URL" to stdout when a run ends on an HTTP tracking server: it
    # would land in `bioablate table --format csv > t.csv`; our commands print where things are logged
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
}


class _LibraryNoise(logging.Filter):
    """Drops the noisy libraries' records below ERROR wherever they reach the root logger's handlers."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or record.name.split(".")[0] not in NOISY_LIBRARIES


def quiet_libraries() -> None:
    """Keep the terminal for our progress and results: Lightning's banner lines and library warnings
    are noise for a user running experiments (`-v` brings them back).

    Imports nothing: a command that never trains must not pay seconds for importing Lightning just to
    quiet it. So the quieting has to hold for a library imported later, which may set its own level
    then: Lightning sets INFO on import (and, the root logger having handlers, propagates to them: the
    root handlers' filter drops it), MLflow and transformers read their level from the environment."""
    for name in NOISY_LIBRARIES:
        logging.getLogger(name).setLevel(logging.ERROR)
    for name in RERAISED_ERROR_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _LibraryNoise) for f in handler.filters):
            handler.addFilter(_LibraryNoise())
    for name, value in QUIET_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    warnings.filterwarnings("ignore")


def one_line(text: BaseException | str, limit: int = 500) -> str:
    """An error or message as one line of at most `limit` characters (for tags, tables and summaries);
    an exception is prefixed with its type."""
    if isinstance(text, BaseException):
        text = f"{type(text).__name__}: {text}"
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"

"""What the terminal shows: library noise off by default, errors as one line."""

from __future__ import annotations

import logging
import os
import warnings
from contextlib import contextmanager
from typing import Iterator

# the libraries whose logs below ERROR are noise for a user running experiments
NOISY_LIBRARIES = ("pytorch_lightning", "lightning", "lightning_fabric", "mlflow", "alembic", "transformers",
                   "huggingface_hub")  # its retry lines: the error says what failed
# our own loggers (the first part of a record's name): their INFO lines are the commands' progress
OUR_LOGGERS = ("bioablate", "ablations", "bioablate_core", "datamodules", "lightning_modules")
# loggers that print a full traceback (ERROR) for an exception their library raises right after: the
# command reports that exception itself, in one line (MLflow's SQL store logs each failed query so)
RERAISED_ERROR_LOGGERS = ("mlflow.store.db.utils",)


# what the libraries read from the environment, set unless the user set it (a later-imported library and
# every process we start see it)
QUIET_ENVIRONMENT = {
    "MLFLOW_LOGGING_LEVEL": "ERROR",
    "TRANSFORMERS_VERBOSITY": "error",
    "TOKENIZERS_PARALLELISM": "false",
    # MLflow's "View run ... at: URL" on stdout would land in `bioablate table --format csv > t.csv`
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
}


_verbose = False  # `bioablate -v`: the libraries' logs and warnings are wanted (`libraries_quieted` leaves them)


class _LibraryNoise(logging.Filter):
    """What reaches the root logger's handlers: our records at every level, the noisy libraries' from ERROR,
    every other library's from WARNING, even where it sets its own logger to INFO."""

    def filter(self, record: logging.LogRecord) -> bool:
        root = record.name.split(".")[0]
        if root in OUR_LOGGERS:
            return True
        return record.levelno >= (logging.ERROR if root in NOISY_LIBRARIES else logging.WARNING)


def configure_logging(verbose: bool = False) -> None:
    """Our INFO lines on stderr as bare messages; other libraries' from WARNING (`verbose`: INFO too)."""
    global _verbose
    _verbose = verbose
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(message)s")
    for name in OUR_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)


def quiet_libraries() -> None:
    """Keep the terminal for our progress and results (`-v` brings library noise back). Imports nothing, so
    it must hold for libraries imported later, which set their own levels then."""
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


@contextmanager
def libraries_quieted() -> Iterator[None]:
    """The Python API's quieting for the duration of a call, put back afterwards: the caller's logging is
    the caller's. Enter it after the libraries are imported, which set their levels on import."""
    if _verbose:
        yield
        return
    from transformers.utils import logging as transformers_logging

    quiet = {**{name: logging.ERROR for name in NOISY_LIBRARIES},
             **{name: logging.CRITICAL for name in RERAISED_ERROR_LOGGERS}}  # their errors reach the caller
    levels = {name: logging.getLogger(name).level for name in quiet}
    bars = transformers_logging.is_progress_bar_enabled()
    for name, level in quiet.items():  # never louder than the caller (the CLI) made a logger
        logging.getLogger(name).setLevel(max(level, levels[name]))
    transformers_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        if bars:
            transformers_logging.enable_progress_bar()


def one_line(text: BaseException | str, limit: int = 500) -> str:
    """An error or message as one line of at most `limit` characters, an exception prefixed with its type."""
    if isinstance(text, BaseException):
        text = f"{type(text).__name__}: {text}"
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"

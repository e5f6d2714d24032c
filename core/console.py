"""What the terminal shows: library noise off by default, errors as one line."""

from __future__ import annotations

import logging
import os
import warnings


def quiet_libraries() -> None:
    """Keep the terminal for our progress and results: Lightning's banner lines and library warnings
    are noise for a user running experiments (`-v` brings them back). The libraries set their own
    levels when imported, so import them first."""
    import mlflow  # noqa: F401
    import pytorch_lightning  # noqa: F401

    for name in ("pytorch_lightning", "lightning", "lightning.pytorch", "lightning_fabric", "mlflow",
                 "alembic", "transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # MLflow writes "🏃 View run ... at: URL" to stdout when a run ends on an HTTP tracking server: it
    # would land in `bioablate table --format csv > t.csv`; our commands print where things are logged
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")


def one_line(text: BaseException | str, limit: int = 500) -> str:
    """An error or message as one line of at most `limit` characters (for tags, tables and summaries);
    an exception is prefixed with its type."""
    if isinstance(text, BaseException):
        text = f"{type(text).__name__}: {text}"
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"

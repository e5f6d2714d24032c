"""bioablate_core.console: library noise off without importing the libraries; errors as one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bioablate_core.console import one_line

REPO_ROOT = Path(__file__).resolve().parents[2]

# In a fresh interpreter (the test process has imported Lightning and set up logging long ago): quieting
# imports no library, and holds for a library that is imported afterwards and resets its logger to INFO
# then, as pytorch_lightning/__init__.py does (`_logger.setLevel(logging.INFO)`, propagating to root's
# handlers since root has some).
QUIET_THEN_IMPORT = """
import logging, os, sys
logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s", stream=sys.stdout)
from bioablate_core.console import quiet_libraries
quiet_libraries()
print("imported:", sorted(m for m in ("torch", "pytorch_lightning", "mlflow", "transformers") if m in sys.modules))
print("env:", os.environ["MLFLOW_LOGGING_LEVEL"], os.environ["TRANSFORMERS_VERBOSITY"])
logging.getLogger("pytorch_lightning").setLevel(logging.INFO)
logging.getLogger("lightning.pytorch").setLevel(logging.INFO)
logging.getLogger("pytorch_lightning.utilities.rank_zero").info("GPU available: False")
logging.getLogger("lightning.pytorch.utilities.rank_zero").warning("a banner")
logging.getLogger("lightning.pytorch.trainer").error("a real error")
logging.getLogger("ablations.experiment.runner").info("our progress")
"""


def test_quieting_imports_nothing_and_holds_for_a_library_imported_later():
    done = subprocess.run([sys.executable, "-c", QUIET_THEN_IMPORT], capture_output=True, text=True, cwd=REPO_ROOT,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["imported: []", "env: ERROR error",
                                        "lightning.pytorch.trainer a real error",
                                        "ablations.experiment.runner our progress"]


def test_one_line_flattens_and_caps():
    assert one_line(ValueError("a\n  b")) == "ValueError: a b"
    assert one_line("x" * 10, limit=5) == "xxxx…"


def test_the_apis_quieting_never_makes_a_logger_louder_than_the_command_line_made_it(monkeypatch):
    """`bioablate finetune` quiets MLflow's database logger to CRITICAL (its errors come back as one line);
    the API call inside the command must not lower it to ERROR for the call: a locked store printed a
    246-line SQLAlchemy traceback before the one line."""
    import logging

    from bioablate_core import console
    from bioablate_core.console import NOISY_LIBRARIES, RERAISED_ERROR_LOGGERS, libraries_quieted

    monkeypatch.setattr(console, "_verbose", False)  # an earlier `bioablate -v` in this process set it
    reraised, noisy = logging.getLogger(RERAISED_ERROR_LOGGERS[0]), logging.getLogger(NOISY_LIBRARIES[0])
    before = reraised.level, noisy.level
    try:
        reraised.setLevel(logging.CRITICAL)
        noisy.setLevel(logging.NOTSET)
        with libraries_quieted():
            assert reraised.level == logging.CRITICAL and noisy.level == logging.ERROR
        assert reraised.level == logging.CRITICAL and noisy.level == logging.NOTSET  # put back
        reraised.setLevel(logging.NOTSET)
        with libraries_quieted():
            assert reraised.level == logging.CRITICAL  # an API caller's process: its errors are re-raised too
    finally:
        reraised.setLevel(before[0])
        noisy.setLevel(before[1])

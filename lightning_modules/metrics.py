"""Forwarding only: the metrics moved to `datamodules/metrics.py` (they score instances and know nothing of
models). Kept while `ablations/table.py` and `tests/test_table.py` still import `blurb_score` from here;
delete this module once they import `datamodules.metrics`."""

from datamodules.metrics import blurb_score

__all__ = ["blurb_score"]

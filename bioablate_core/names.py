"""Names a user gives that end up in paths, MLflow tags and table notes (an experiment's, a dataset's):
letters, digits, '.', '_', '-', not starting with a '.' (no "..", no path separators, no hidden folders,
no '@', which names a fold: `biobert-gad@fold3`).

    problem = unsafe_name(name, "my_dataset")   # None, or what is wrong and a name that would do
"""

from __future__ import annotations

import re

SAFE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")


def unsafe_name(name: str, fallback: str) -> str | None:
    """Why `name` is not safe, with one that would do (else `fallback`), or None where it is safe."""
    if SAFE_NAME.fullmatch(name):
        return None
    suggestion = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:100] or fallback
    return f"{name!r} is not a safe name; use letters, digits, '.', '_' and '-', e.g. {suggestion}"

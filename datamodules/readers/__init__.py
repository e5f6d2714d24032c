"""The built-in datasets' readers, one module per source format."""

from __future__ import annotations

import functools
from typing import Any, Callable


def bound(function: Callable[..., Any], *args: Any) -> functools.partial:
    """`function` with its first `args` bound: a partial rather than a closure, so that DDP's spawn start
    method can pickle the dataset spec holding it. It keeps `function`'s module, whose READER_VERSION
    versions the reader's output (datamodules/spec.py `code_version`)."""
    reader = functools.partial(function, *args)
    reader.__module__ = function.__module__
    return reader

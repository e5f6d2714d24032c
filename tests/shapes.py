"""Wrong-shape cases generated from a schema dataclass: for every key at every depth, a list where it
takes a mapping or a single value, and a mapping where it takes a list or a single value. A field added to
a schema gets its cases by construction.

Read from the dataclasses' annotations here, independently of `bioablate_core.schema`, so a test built on these
cases checks the schema layer rather than repeating it.
"""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
from typing import Any, Iterator, NamedTuple

A_LIST = ["x", "y"]
A_MAPPING = {"x": 1}
ENTRY = "entry"  # the name given to an entry of a `Dict[str, ...]` key


class Case(NamedTuple):
    key: str  # as the message names it: `vary.entry.values`, `datasets[0]`
    path: tuple[Any, ...]  # where to put `value` in a YAML mapping (names and list indices)
    value: Any
    got: str  # "a list" | "a mapping"

    @property
    def id(self) -> str:
        return f"{self.key}={'list' if self.got == 'a list' else 'map'}"


def _plain(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else Any
    return annotation


def _kind(annotation: Any) -> str | None:
    annotation = _plain(annotation)
    if dataclasses.is_dataclass(annotation):
        return "mapping"
    origin = typing.get_origin(annotation) or annotation
    if origin is dict:
        return "mapping"
    if origin in (list, tuple):
        return "list"
    return "value" if annotation in (str, int, float, bool) else None


def cases(schema: type, key: str = "", path: tuple = ()) -> Iterator[Case]:
    """Every wrong-shape case under `schema`, with keys prefixed by `key` and paths by `path`."""
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        yield from _cases_at(hints[f.name], f"{key}{f.name}", (*path, f.name))


def _cases_at(annotation: Any, key: str, path: tuple) -> Iterator[Case]:
    kind = _kind(annotation)
    if kind in ("mapping", "value"):
        yield Case(key, path, list(A_LIST), "a list")
    if kind in ("list", "value"):
        yield Case(key, path, dict(A_MAPPING), "a mapping")
    annotation, args = _plain(annotation), typing.get_args(_plain(annotation))
    if dataclasses.is_dataclass(annotation):
        yield from cases(annotation, f"{key}.", path)
    elif kind == "mapping" and len(args) == 2:
        yield from _cases_at(args[1], f"{key}.{ENTRY}", (*path, ENTRY))
    elif kind == "list" and args:
        yield from _cases_at(args[0], f"{key}[0]", (*path, 0))


def put(document: dict, path: tuple, value: Any) -> dict:
    """A copy of `document` with `value` at `path` (mappings and lists made on the way as needed)."""
    out = copy.deepcopy(document)
    node: Any = out
    for step, following in zip(path, path[1:]):
        fresh: Any = [] if isinstance(following, int) else {}
        if isinstance(step, int):
            while len(node) <= step:
                node.append(fresh)
            if not isinstance(node[step], type(fresh)):
                node[step] = fresh
        elif not isinstance(node.get(step), type(fresh)):
            node[step] = fresh
        node = node[step]
    last = path[-1]
    if isinstance(last, int):
        while len(node) <= last:
            node.append(None)
    node[last] = value
    return out

"""The one registry shape: a named collection of things of one kind, as lm-evaluation-harness keeps its tasks.

    HEADS = Registry("head")
    HEADS.register("crf", CrfHead)            # or  @HEADS.register("crf")  on a class or function
    HEADS.get("crf")                          # UnknownNameError naming the nearest known name otherwise

Registering a name twice is an error unless `replace=True`: a user-defined entry never silently shadows a
built-in one.
"""

from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

from bioablate_core.errors import ConfigError, UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T | None = None, *, replace: bool = False):
        """`register(name, entry)`, or `@register(name)` as a decorator; `replace` allows a name taken."""
        if entry is None:
            def decorator(obj: T) -> T:
                self.register(name, obj, replace=replace)
                return obj
            return decorator
        if name in self._entries and not replace and self._entries[name] is not entry:
            raise ConfigError(f"{self.kind} '{name}' is already defined; choose another name")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._entries) from None

    def names(self, where: Callable[[T], bool] | None = None) -> list[str]:
        """Names in registration order, optionally only those whose entry satisfies `where`."""
        return [n for n, e in self._entries.items() if where is None or where(e)]

    def items(self) -> Iterator[tuple[str, T]]:
        return iter(list(self._entries.items()))

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

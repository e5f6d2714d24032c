"""A modelling choice: one config key (`finetune.head`, `pretrain.masking`, ...) and its options, each
registered with the task types it applies to and the other choices it needs (in the same config section).

    HEADS = Choice("finetune.head", "layer over the encoder (Table 12)")
    HEADS.register("linear", Layers(...))                                  # every task type
    HEADS.register("crf", Layers(crf=True), task_types=("ner", "pico"))
    RE_FEATURES.register("entity-start", ..., task_types=("re",), requires={"re_input": "markers"})

A Choice is a Registry, so adding an option is one `register` call that validation, `bioablate list
variants` and tests/test_conformance.py find. The first option is the default. Options are registered in
torch-free modules so a name is checked without importing torch; one whose entry needs torch is `declare`d
there and registered by `implemented_in`, which `get` imports.

A choice left at its default never fails; any other value that does not apply to the task, or lacks what it
requires, is a one-line ConfigError, so a run's params always describe the model it trained.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Iterator, Mapping, TypeVar

from bioablate_core.errors import ConfigError, UnknownNameError
from bioablate_core.registry import Registry

T = TypeVar("T")


class Choice(Registry[T]):
    def __init__(self, key: str, description: str, implemented_in: str | None = None):
        """`key`: the full config key (`finetune.head`); `self.key` is its name within its section (`head`)."""
        super().__init__(key)
        self.section, _, self.key = key.rpartition(".")
        self.description, self.implemented_in = description, implemented_in
        self._task_types: dict[str, tuple[str, ...] | None] = {}  # every option, declared or registered
        self._requires: dict[str, dict[str, str]] = {}
        self._declared: set[str] = set()  # options whose entry their implementing module registers

    def declare(self, name: str, *, task_types: tuple[str, ...] | None = None,
                requires: Mapping[str, str] | None = None) -> None:
        """Option `name`, its `task_types` and `requires` (as `register` takes them), without its entry."""
        self._task_types[name] = tuple(task_types) if task_types is not None else None
        self._requires[name] = dict(requires or {})
        self._declared.add(name)

    def register(self, name: str, entry: T | None = None, *, task_types: tuple[str, ...] | None = None,
                 requires: Mapping[str, str] | None = None, replace: bool = False):
        """`task_types`: where the option applies (None: every task type); `requires`: other choices' values
        it only works with, e.g. {"re_input": "markers"}; `replace` as a Registry's. A declared option takes
        its entry only."""
        if entry is None:
            def decorator(obj: T) -> T:
                self.register(name, obj, task_types=task_types, requires=requires, replace=replace)
                return obj
            return decorator
        super().register(name, entry, replace=replace)
        if name in self._declared:
            if task_types is not None or requires is not None:
                raise ValueError(f"{self.kind} '{name}' was declared with where it applies: register its entry only")
            return entry
        self._task_types[name] = tuple(task_types) if task_types is not None else None
        self._requires[name] = dict(requires or {})
        return entry

    def unregister(self, name: str) -> None:
        super().unregister(name)
        self._task_types.pop(name, None)
        self._requires.pop(name, None)
        self._declared.discard(name)

    def _implement(self) -> None:
        if self.implemented_in is not None and any(n not in self._entries for n in self._declared):
            importlib.import_module(self.implemented_in)

    def get(self, name: str) -> T:
        if name in self._declared:
            self._implement()
        return super().get(name)

    def names(self, where=None) -> list[str]:
        if where is None:
            return list(self._task_types)
        self._implement()
        return super().names(where)

    def items(self):
        self._implement()
        return super().items()

    def __contains__(self, name: object) -> bool:
        return name in self._task_types

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._task_types))

    def __len__(self) -> int:
        return len(self._task_types)

    @property
    def default(self) -> str:
        return next(iter(self))

    def applies(self, name: str, task_type: str) -> bool:
        where = self._task_types[name]
        return where is None or task_type in where

    def task_types(self, name: str | None = None) -> tuple[str, ...] | None:
        """Where option `name` applies, or (no name) where any non-default option does; None: everywhere."""
        names = [name] if name is not None else [n for n in self if n != self.default]
        found: list[str] = []
        for n in names:
            if self._task_types[n] is None:
                return None
            found += [t for t in self._task_types[n] if t not in found]
        return tuple(found)

    def requires(self, name: str) -> dict[str, str]:
        return dict(self._requires[name])

    def options_for(self, task_type: str) -> list[str]:
        return [n for n in self if self.applies(n, task_type)]

    def check_name(self, name: str) -> None:
        """Raise a one-line UnknownNameError (naming the options) unless `name` is an option."""
        if name not in self:
            raise UnknownNameError(self.kind, name, self)

    def check(self, name: str, task_type: str, chosen: Mapping[str, str], dataset: str) -> None:
        """Raise a one-line ConfigError unless option `name` may be used on a `task_type` task (`dataset`
        names it) beside the other choices `chosen` ({key: value})."""
        if name == self.default:
            return
        anywhere = self.task_types()
        if anywhere is not None and task_type not in anywhere:
            raise ConfigError(f"{self.kind}={name} does not apply to {dataset} ({task_type} task); "
                              f"it applies to {', '.join(anywhere)} tasks")
        valid = self.options_for(task_type)
        if name not in valid:
            close = difflib.get_close_matches(str(name), valid, n=1)  # as UnknownNameError suggests
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"unknown {self.kind} '{name}' for {dataset}; valid: {', '.join(valid)}{hint}")
        for key, value in self._requires[name].items():
            if chosen.get(key) != value:
                others = [n for n in valid if not self._requires[n]]
                raise ConfigError(f"{self.kind}={name} needs {self.section}.{key}={value} ({self.section}.{key} "
                                  f"'{chosen.get(key)}' works with {self.key}: {', '.join(others)})")

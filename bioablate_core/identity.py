"""What identifies a run, said once, on the fields themselves: each schema field is marked with its group,
and every list a fingerprint hashes or leaves out is read off these marks (`marked`).

    ft, inert = markers("finetune", "none")

    @dataclass
    class FinetuneConfig:
        lr: float = ft(bounded(5e-5, gt=0))    # a default, or a dataclasses.Field to mark
        progress_bar: bool = inert(True)

    marked(FinetuneConfig, "finetune")  # ["lr"]: in the order the fields are declared

Reading the marks of a class with an unmarked field is an error, so a new field must be placed. A class
whose hashed lists have an order of their own marks its fields with `field_marks` instead.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable

MARK = "decides"  # the dataclass field metadata key a field's group is kept under


def markers(*groups: str) -> tuple[Callable[[Any], Any], ...]:
    """One marking function per group, each taking a field's default or a dataclasses.Field."""
    def marker(group: str) -> Callable[[Any], Any]:
        def mark(value: Any) -> Any:
            if not isinstance(value, dataclasses.Field):
                return dataclasses.field(default=value, metadata={MARK: group})
            return dataclasses.field(default=value.default, default_factory=value.default_factory,
                                     metadata={**value.metadata, MARK: group})
        return mark
    return tuple(marker(group) for group in groups)


def field_marks(groups: Iterable[str]) -> Callable[..., Callable[[type], type]]:
    """The class decorator of a schema whose fields fall into `groups`: `@decorator(group="field field",
    ...)` marks each field of the class with its group, in the order named, kept as `cls.__decides__`."""
    allowed = tuple(groups)

    def decorator(**marks: str) -> Callable[[type], type]:
        unknown = sorted(set(marks) - set(allowed))
        if unknown:
            raise TypeError(f"unknown groups {unknown}; the groups are {', '.join(allowed)}")

        def mark(cls: type) -> type:
            table: dict[str, str] = {}
            for group, names in marks.items():
                for name in names.split():
                    if name in table:
                        raise TypeError(f"{cls.__name__}.{name} is marked twice")
                    table[name] = group
            fields = {f.name for f in dataclasses.fields(cls)}
            if set(table) != fields:
                raise TypeError(f"{cls.__name__}: unmarked fields {sorted(fields - set(table))}, unknown names "
                                f"{sorted(set(table) - fields)} (say which group each field belongs to: "
                                f"{', '.join(allowed)})")
            cls.__decides__ = table
            return cls
        return mark
    return decorator


def marks(cls: type) -> dict[str, str]:
    """{field: group} of `cls`, from its class decorator or else from its fields' metadata."""
    if "__decides__" in vars(cls):
        return cls.__decides__
    unmarked = [f.name for f in dataclasses.fields(cls) if MARK not in f.metadata]
    if unmarked:
        raise TypeError(f"{cls.__name__}: unmarked fields {unmarked} (mark each with the group it belongs to)")
    return {f.name: f.metadata[MARK] for f in dataclasses.fields(cls)}


def marked(cls: type, *groups: str) -> list[str]:
    """The fields of `cls` marked with one of `groups`, in the order of `marks`."""
    return [name for name, group in marks(cls).items() if group in groups]

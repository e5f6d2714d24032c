"""What identifies a run, said once, on the fields themselves: each field of a schema dataclass is marked
with the group it belongs to (which runs' results it decides, where a run goes, what shapes a dataset's
runs, ...), and every list a fingerprint hashes or leaves out is read off these marks (`marked`). A field
left unmarked, marked twice or misspelt is an error when its class is defined: a new field must be placed.

    decides = field_marks(("finetune", "pretrain", "both", "none", "place"))

    @decides(finetune="lr epochs", none="progress_bar")
    @dataclass
    class FinetuneConfig: ...

    marked(FinetuneConfig, "finetune")  # ["lr", "epochs"]: in the order written
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable


def field_marks(groups: Iterable[str]) -> Callable[..., Callable[[type], type]]:
    """The class decorator of a schema whose fields fall into `groups`: `@decorator(group="field field",
    ...)` marks each field of the class with its group, kept as `cls.__decides__` ({field: group})."""
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


def marked(cls: type, *groups: str) -> list[str]:
    """The fields of `cls` marked with one of `groups`, in the order the marks name them."""
    return [name for name, group in cls.__decides__.items() if group in groups]

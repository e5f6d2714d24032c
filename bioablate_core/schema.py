"""The one way a YAML file is read and checked: against a dataclass schema, through OmegaConf.

Every config file goes through `load_yaml` and `validate`, so every mistake reads the same way, as one line:

    exp.yaml: unknown key 'vary.tagging.valeus' (did you mean 'values'?); valid keys under 'vary.tagging': ...

A numeric key declares its range beside its default (`epochs: int = bounded(3, ge=1)`), and `merge` checks
it, and that every number is finite, on every result.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import difflib
import functools
import inspect
import io
import math
import textwrap
import tokenize
import types
import typing
from pathlib import Path
from typing import Any

from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError

from bioablate_core.choices import Choice
from bioablate_core.errors import ConfigError


def load_yaml(path: Path | str) -> DictConfig:
    """A YAML file whose top level is a mapping; a missing file or a parse error is one ConfigError."""
    path = Path(path)
    try:
        cfg = OmegaConf.load(path)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, expected a YAML file") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}); save the file as UTF-8") from None
    except Exception as e:  # yaml.YAMLError and friends: show where the parser stopped
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
    if not isinstance(cfg, DictConfig):
        raise ConfigError(f"{path}: expected a mapping of keys at the top level")
    try:  # `${...}` interpolations refer to keys of the same file: resolved here, where the file is known
        OmegaConf.resolve(cfg)
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", None)
        raise ConfigError(f"{path}: {key + ': ' if key else ''}{str(e).splitlines()[0]} (an interpolation "
                          "${...} must name a key of the same file)") from None
    return cfg


def defaults(schema: type) -> DictConfig:
    """A fresh config of `schema`'s defaults: a copy of one built per schema, cheaper than building it again."""
    return copy.deepcopy(_defaults(schema))


@functools.lru_cache(maxsize=None)
def _defaults(schema: type) -> DictConfig:
    return OmegaConf.structured(schema)


@functools.lru_cache(maxsize=None)
def _field_types(schema: type) -> dict[str, Any]:
    """The fields' annotations, evaluated and cached; callers must not mutate it."""
    hints = typing.get_type_hints(schema)
    return {f.name: hints.get(f.name, f.type) for f in dataclasses.fields(schema)}


def _as_schema(annotation: Any) -> type | None:
    """The dataclass an annotation names directly, or through Optional[...]; None otherwise."""
    if dataclasses.is_dataclass(annotation):
        return annotation
    if typing.get_origin(annotation) is typing.Union:
        for arg in typing.get_args(annotation):
            if dataclasses.is_dataclass(arg):
                return arg
    return None


def schema_at(schema: type, parts: list[str]) -> type | None:
    """The dataclass whose keys are valid at the key path `parts`, or None where the path leaves the schema."""
    node: type | None = schema
    i = 0
    while node is not None and i < len(parts):
        annotation = _field_types(node).get(parts[i])
        if annotation is None:
            return None
        nested = _as_schema(annotation)
        if nested is not None:
            node, i = nested, i + 1
            continue
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        if origin in (dict, typing.Dict) and len(args) == 2 and dataclasses.is_dataclass(args[1]):
            if i + 1 >= len(parts):
                return None  # the mapping itself: any entry name is valid
            node, i = args[1], i + 2
            continue
        return None
    return node


def unknown_key(source: str | Path, schema: type, full_key: str) -> ConfigError:
    parts = full_key.split(".")
    node = schema_at(schema, parts[:-1])
    valid = [f.name for f in dataclasses.fields(node)] if node is not None else []
    where = f"under '{'.'.join(parts[:-1])}'" if len(parts) > 1 else "at the top level"
    close = difflib.get_close_matches(parts[-1], valid, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    listing = f"; valid keys {where}: {', '.join(valid)}" if valid else ""
    return ConfigError(f"{source}: unknown key '{full_key}'{hint}{listing}")


@dataclasses.dataclass(frozen=True)
class Range:
    """The valid interval of a numeric key; None: unbounded on that side."""
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None

    def violated(self, value: float) -> str | None:
        """What `value` breaks ("must be >= 1"), or None when it is inside."""
        for bound, op, outside in ((self.ge, ">=", lambda b: value < b), (self.gt, ">", lambda b: value <= b),
                                   (self.le, "<=", lambda b: value > b), (self.lt, "<", lambda b: value >= b)):
            if bound is not None and outside(bound):
                return f"must be {self.describe()}"
        return None

    def describe(self) -> str:
        parts = [f"{op} {int(bound) if float(bound).is_integer() else bound}"
                 for bound, op in ((self.ge, ">="), (self.gt, ">"), (self.le, "<="), (self.lt, "<"))
                 if bound is not None]
        return " and ".join(parts)


RANGE = "range"  # the dataclass field metadata key `bounded` sets


def bounded(default: Any, *, ge: float | None = None, gt: float | None = None, le: float | None = None,
            lt: float | None = None) -> Any:
    """A dataclass field with `default` whose value must lie within `ge`, `gt`, `le`, `lt` (None passes)."""
    return dataclasses.field(default=default, metadata={RANGE: Range(ge, gt, le, lt)})


CHOICE = "choice"  # the dataclass field metadata key `choice` sets


def choice(options: Choice) -> Any:
    """A dataclass field naming one option of `options` (a `Choice`), with the choice's default."""
    return dataclasses.field(default=options.default, metadata={CHOICE: options})


def check_ranges(source: str | Path, schema: type, cfg: Any, prefix: str = "") -> None:
    """Every `bounded` key of `schema` in `cfg` (at key path `prefix`) inside its range, else a ConfigError
    naming `source` and the first key outside."""
    if isinstance(cfg, DictConfig):
        # plain containers: DictConfig node lookups are slow; a value that does not resolve is left to the walk
        try:
            cfg = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
        except OmegaConfBaseException:
            pass
    _check_ranges(source, schema, cfg, prefix)


def _missing(cfg: Any, key: str) -> bool:
    if isinstance(cfg, DictConfig):
        return OmegaConf.is_missing(cfg, key)
    return cfg[key] == MISSING  # a plain container holds a missing value as OmegaConf's "???"


def _check_ranges(source: str | Path, schema: type, cfg: Any, prefix: str = "") -> None:
    types = _field_types(schema)
    for f in dataclasses.fields(schema):
        if f.name not in cfg or _missing(cfg, f.name):
            continue
        value, key = cfg[f.name], f"{prefix}{f.name}"
        nested = _as_schema(types[f.name])
        if nested is not None and value is not None:
            _check_ranges(source, nested, value, key + ".")
            continue
        args = typing.get_args(types[f.name])
        if typing.get_origin(types[f.name]) in (dict, typing.Dict) and len(args) == 2 \
                and dataclasses.is_dataclass(args[1]) and value is not None:
            for name in value:
                _check_ranges(source, args[1], value[name], f"{key}.{name}.")
            continue
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        # nan passes every comparison (a range too) and inf passes a lower bound: neither is a setting
        bound = f.metadata.get(RANGE)
        problem = "must be a finite number" if not math.isfinite(value) else bound.violated(value) if bound else None
        if problem:
            raise ConfigError(f"{source}: {key} = {value}: {problem} (config key {key})")


def merge(schema: type, source: str | Path, *layers: Any, base: DictConfig | None = None) -> DictConfig:
    """`base` (else the schema's defaults) with `layers` merged on top, validated against `schema`; any
    mistake is one ConfigError naming `source` and the key."""
    cfg = base if base is not None else defaults(schema)
    for layer in layers:
        check_shapes(source, schema, layer)
    try:
        merged = OmegaConf.merge(cfg, *layers)
    except ConfigKeyError as e:
        raise unknown_key(source, schema, e.full_key) from None
    except ValidationError as e:
        # OmegaConf leaves `msg` empty for some of its errors: the first line of whatever it says
        message = next(iter((e.msg or str(e) or type(e).__name__).splitlines()), type(e).__name__)
        raise ConfigError(f"{source}: bad value for '{e.full_key}': {message}") from None
    except OmegaConfBaseException as e:
        raise ConfigError(f"{source}: {str(e).splitlines()[0]}") from None
    except TypeError:  # "Cannot merge incompatible container types" under a key the schema leaves open
        raise ConfigError(f"{source}: {_clash(cfg, layers)}") from None
    check_ranges(source, schema, merged)
    return merged


# ---------------------------------------------------------------------------------------------------
# Shapes: OmegaConf meets a list merged onto a mapping with a bare TypeError, so every layer is checked
# against the schema's annotations first, naming the key and what it expected.

MAPPING, LIST, VALUE = "mapping", "list", "value"
_SCALARS = {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}


def dotlist(schema: type, overrides: list[str]) -> DictConfig:
    """`key=value` overrides as a config layer, each value read as YAML, except that a string key keeps its
    text (`launcher.time=4:00:00` is not YAML 1.1's sexagesimal 14400)."""
    cfg = OmegaConf.from_dotlist(overrides)
    for override in overrides:
        key, _, text = override.partition("=")
        parts = key.split(".")
        node = schema_at(schema, parts[:-1])
        if (node is not None and isinstance(OmegaConf.select(cfg, key, throw_on_resolution_failure=False),
                                            (bool, int, float))
                and _optional_arg(_field_types(node).get(parts[-1])) is str):
            OmegaConf.update(cfg, key, text)
    return cfg


def _optional_arg(annotation: Any) -> Any:
    """X for Optional[X] (`X | None` too); the annotation itself otherwise (Any for a wider union)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else Any
    return annotation


def _shape(annotation: Any) -> tuple[str | None, str]:
    """(MAPPING | LIST | VALUE, or None where anything goes; the words for what is expected)."""
    annotation = _optional_arg(annotation)
    if dataclasses.is_dataclass(annotation):
        return MAPPING, f"a mapping with keys {', '.join(f.name for f in dataclasses.fields(annotation))}"
    origin, args = typing.get_origin(annotation) or annotation, typing.get_args(annotation)
    if origin in (dict, typing.Dict):
        entry = _shape(args[1])[1] if len(args) == 2 and _shape(args[1])[0] else ""
        return MAPPING, f"a mapping of names, each {entry}" if entry else "a mapping"
    if origin in (list, tuple, typing.List):
        item = _shape(args[0])[1] if args and _shape(args[0])[0] else ""
        return LIST, f"a list of {_plural(item)}" if item else "a list"
    if annotation in _SCALARS:
        return VALUE, _SCALARS[annotation]
    return None, ""


def _plural(words: str) -> str:
    return {"a string": "strings", "a whole number": "whole numbers", "a number": "numbers",
            "true or false": "true/false values"}.get(words, words)


def _given(value: Any) -> tuple[str, str]:
    """(MAPPING | LIST | VALUE, how the message names it)."""
    if isinstance(value, (dict, DictConfig)):
        return MAPPING, "a mapping"
    if isinstance(value, (list, tuple, ListConfig)):
        return LIST, "a list"
    text = repr(value)
    return VALUE, text if len(text) <= 40 else text[:37] + "..."


def _skipped(value: Any) -> bool:
    """Left to OmegaConf: null (Optional or not is its check), the missing marker, an interpolation."""
    return value is None or (isinstance(value, str) and (value == MISSING or value.startswith("${")))


def _boolean(value: Any) -> bool:
    """True or false as such, or spelled so in a string (a quoted "true" in a YAML file)."""
    return isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in ("true", "false"))


def check_shapes(source: str | Path, schema: type, layer: Any, prefix: str = "") -> None:
    """Every key of `layer` that `schema` types as a mapping, a list or a single value holds one, else a
    ConfigError naming `source`, the key (under `prefix`) and what fits. Unknown keys are left to `merge`."""
    if isinstance(layer, DictConfig):
        layer = OmegaConf.to_container(layer, resolve=False)
    if not isinstance(layer, dict):
        return
    types_ = _field_types(schema)
    for name, value in layer.items():
        if name in types_:
            _check_shape(source, types_[name], value, f"{prefix}{name}")


def _check_shape(source: str | Path, annotation: Any, value: Any, key: str) -> None:
    if _skipped(value):
        return
    expected, words = _shape(annotation)
    if expected is None:
        return
    given, named = _given(value)
    if given != expected:
        raise ConfigError(f"{source}: {key}: expected {words}, got {named}")
    annotation = _optional_arg(annotation)
    if annotation is bool and not _boolean(value):  # OmegaConf reads 2 as true, and "y" or "on" too
        raise ConfigError(f"{source}: {key}: expected true or false, got {named}")
    if dataclasses.is_dataclass(annotation):
        check_shapes(source, annotation, value, f"{key}.")
        return
    args = typing.get_args(annotation)
    if expected == MAPPING and len(args) == 2:
        for name, entry in value.items():
            _check_shape(source, args[1], entry, f"{key}.{name}")
    elif expected == LIST and args:
        for i, item in enumerate(value):
            _check_shape(source, args[0], item, f"{key}[{i}]")


def _clash(base: Any, layers: tuple[Any, ...]) -> str:
    """Where a layer puts a list on a mapping, or the reverse, under a key the schema leaves open."""
    def walk(old: Any, new: Any, key: str) -> str | None:
        if isinstance(old, dict) and isinstance(new, dict):
            for name in new:
                found = walk(old[name], new[name], f"{key}.{name}" if key else str(name)) if name in old else None
                if found:
                    return found
            return None
        kinds = (_given(old)[0], _given(new)[0])
        if set(kinds) == {MAPPING, LIST}:
            return f"{key}: expected {'a mapping' if kinds[0] == MAPPING else 'a list'}, got {_given(new)[1]}"
        return None

    try:
        container = OmegaConf.to_container(base, resolve=False) if isinstance(base, DictConfig) else base
        for layer in layers:
            found = walk(container, OmegaConf.to_container(OmegaConf.create(layer), resolve=False), "")
            if found:
                return found
            container = OmegaConf.to_container(OmegaConf.merge(container, layer), resolve=False)
    except (TypeError, OmegaConfBaseException):  # the clash is where the walk could not look
        pass
    return "a list where a mapping is expected, or the reverse"


def validate(source: str | Path, raw: Any, schema: type) -> DictConfig:
    """`raw` (e.g. from `load_yaml`) checked against `schema`'s keys and types; errors name `source`."""
    return merge(schema, source, raw)


def load(path: Path | str, schema: type) -> DictConfig:
    """Read and validate a YAML file in one step."""
    return validate(path, load_yaml(path), schema)


# ---------------------------------------------------------------------------------------------------
# Describing a schema (`bioablate list keys`): its keys, types and the comments written beside them


def _type_name(annotation: Any) -> str:
    if annotation is Any:
        return "any"
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Union:
        return " | ".join("None" if a is type(None) else _type_name(a) for a in args)
    if args:
        return f"{typing.get_origin(annotation).__name__}[{', '.join(_type_name(a) for a in args)}]"
    return getattr(annotation, "__name__", str(annotation))


def _field_comments(schema: type) -> dict[str, str]:
    """Field name -> the comment beside it in the schema's source, else the comment lines right above it."""
    try:
        source = textwrap.dedent(inspect.getsource(schema))
    except (OSError, TypeError):  # no source shipped: no descriptions
        return {}
    comments: dict[int, str] = {}
    code_lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#").strip()
        elif token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                                tokenize.ENDMARKER):
            code_lines.add(token.start[0])
    described: dict[str, str] = {}
    for node in ast.parse(source).body[0].body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        beside = [comments[n] for n in range(node.lineno, node.end_lineno + 1) if n in comments]
        above, line = [], node.lineno - 1
        while line in comments and line not in code_lines:
            above.insert(0, comments[line])
            line -= 1
        described[node.target.id] = " ".join(beside or above)
    return described


def describe(schema: type, prefix: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, type, description) of every leaf key of `schema`, following nested dataclasses."""
    rows: list[tuple[str, str, str]] = []
    comments = _field_comments(schema)
    options = {f.name: f.metadata[CHOICE] for f in dataclasses.fields(schema) if CHOICE in f.metadata}
    for name, annotation in _field_types(schema).items():
        nested = _as_schema(annotation)
        if nested is not None:
            rows += describe(nested, f"{prefix}{name}.")
        else:
            text = comments.get(name, "")
            if name in options:
                text = " | ".join(options[name]) + (f": {text}" if text else "")
            rows.append((f"{prefix}{name}", _type_name(annotation), text))
    return rows

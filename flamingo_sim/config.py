"""Typed configuration: frozen dataclasses, loaded from YAML and validated once, at the edge.

Every config section is a frozen dataclass. :func:`from_mapping` builds one from plain data
(what YAML gives), checking every key and type and naming the file and the dotted key in any
error. Unknown keys are errors (a typo must not silently fall back to a default).

Dataclasses check the range of each field in ``__post_init__`` with :func:`check_ranges`
(``check_ranges(self, lr="> 0", dropout="[0, 1]")``), which raises :class:`FieldError`; the
loader turns that into a :class:`~flamingo_sim.errors.ConfigError` naming the file, the dotted
key and what was expected (``e.yaml: fl.lr: expected a number > 0, got -1.0``). Cross-field
rules raise a plain ``ValueError``, reported with the file and the section.

A plug-in's parameters sit in its own section (``selector:``, or beside ``aggregation.name``):
a field marked ``metadata=PLUGIN_PARAMS`` takes the keys its section's other fields do not
(they are checked later, by the plug-in's ``Params`` dataclass, once the plug-in is known),
and :func:`to_mapping` writes them back in place.

Overrides (``--set fl.rounds=20``) are applied to the raw mapping *before* validation, so
they get exactly the same checks as the file.

Values are YAML as PyYAML reads it (YAML 1.1: ``true``/``false``, ``null``, quoted strings), except
that a key written twice in one mapping is an error naming the line of each (YAML requires unique
keys, where PyYAML keeps the last silently), and that a number reads as Python reads it: ``1e-3``, ``1E5`` and ``1_000e-3`` are numbers, where YAML
1.1 reads a float only with a dot and a signed exponent (``1.0e-3``). Files must be UTF-8 text;
another encoding, a directory or a binary file is one line naming the file.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
from pathlib import Path
from typing import Any, Literal, Mapping, TypeVar, Union, get_args, get_origin, get_type_hints

import yaml

from flamingo_sim.errors import ConfigError

T = TypeVar("T")

__all__ = ["from_mapping", "load_yaml", "read_text", "parse_yaml", "load_config", "apply_overrides", "to_mapping", "check_ranges",
           "fits_float32", "FLOAT32_MAX", "FLOAT32_TINY", "FieldError", "PLUGIN_PARAMS", "rest_field"]

#: Field metadata: this ``dict`` field takes the section's keys that no other field names (a plug-in's parameters).
PLUGIN_PARAMS = {"plugin_params": True}


def rest_field(cls: Any) -> str | None:
    """The name of ``cls``'s field marked :data:`PLUGIN_PARAMS`, if any."""
    for f in dataclasses.fields(cls):
        if f.metadata.get("plugin_params"):
            return f.name
    return None


class FieldError(ValueError):
    """One field of a config section is out of range: ``key`` (relative to the section) and what was expected."""

    def __init__(self, key: str, expected: str, got: Any) -> None:
        super().__init__(f"{key}: expected {expected}, got {got!r}")
        self.key, self.expected, self.got = key, expected, got


_COMPARE = re.compile(r"^(>=|<=|>|<)\s*(-?[0-9.e+-]+)$")
_INTERVAL = re.compile(r"^([\[(])\s*(-?[0-9.e+-]+)\s*,\s*(-?[0-9.e+-]+)\s*([\])])$")


def _in_range(value: float, rule: str) -> bool:
    if m := _COMPARE.match(rule):
        op, bound = m.group(1), float(m.group(2))
        return {">=": value >= bound, "<=": value <= bound, ">": value > bound, "<": value < bound}[op]
    if m := _INTERVAL.match(rule):
        lo, hi = float(m.group(2)), float(m.group(3))
        above = value >= lo if m.group(1) == "[" else value > lo
        below = value <= hi if m.group(4) == "]" else value < hi
        return above and below
    raise ValueError(f"range rule {rule!r} is not understood")  # a programming error


#: The largest float32 and the smallest normal one: a value the training puts into a float32 tensor
#: (a learning rate, FedProx's mu) must lie between them (or be 0), or it overflows mid-run.
FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_TINY = 1.1754943508222875e-38
#: What a rule's ``float32`` suffix adds to the expectation it states.
FLOAT32_TEXT = "that fits float32, the training's dtype (its size between 1.2e-38 and 3.4e+38, or 0)"


def fits_float32(value: float) -> bool:
    """Whether ``value`` is a float32 as it is: finite, not overflowing, and not rounded to 0 or to a subnormal."""
    return math.isfinite(value) and (value == 0 or FLOAT32_TINY <= abs(value) <= FLOAT32_MAX)


def check_ranges(obj: Any, **rules: str) -> None:
    """Check numeric fields of ``obj`` against rules such as ``">= 1"``, ``"> 0"``, ``"[0, 1]"``.

    ``None`` values (optional fields left unset) pass; NaN and infinities never do. A field
    holding a list, tuple or mapping has each of its values checked (the key names the item).
    A rule ending in ``", float32"`` (``lr="> 0, float32"``) also asks that the value fit
    float32 (:func:`fits_float32`): a value the training uses as a float32 tensor or scalar.
    Raises :class:`FieldError` for the first value out of range.
    """
    for name, full_rule in rules.items():
        dtype = full_rule.endswith(", float32")
        rule = full_rule.removesuffix(", float32")
        value = getattr(obj, name)
        items: list[tuple[str, Any]]
        if isinstance(value, dict):
            items = [(f"{name}.{k}", v) for k, v in value.items()]
        elif isinstance(value, (list, tuple)):
            items = [(f"{name}[{i}]", v) for i, v in enumerate(value)]
        else:
            items = [(name, value)]
        for key, v in items:
            if v is None:
                continue
            kind = "an integer" if isinstance(v, int) and not isinstance(v, bool) else "a number"
            if not math.isfinite(v) or not _in_range(v, rule) or (dtype and not fits_float32(v)):
                raise FieldError(key, f"{kind} {'in ' if rule[0] in '[(' else ''}{rule}" + (f" {FLOAT32_TEXT}" if dtype else ""), v)


#: One run of digits as Python writes them: underscores only between digits.
_DIGITS = r"[0-9](?:_?[0-9])*"
#: A float in exponent form as Python's ``float()`` reads it, where YAML 1.1 reads a string (no dot, or an unsigned exponent).
_EXPONENT_FLOAT = re.compile(rf"^[-+]?(?:{_DIGITS}(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})[eE][-+]?{_DIGITS}$")


class DuplicateKey(yaml.constructor.ConstructorError):
    """A key written twice in one mapping (YAML requires unique keys; PyYAML would keep the last silently)."""

    def __init__(self, key: Any, first_line: int, line: int, mark: Any) -> None:
        where = f"twice on line {line}" if first_line == line else f"lines {first_line} and {line}"
        super().__init__(problem=f"key {key!r} written twice in one mapping ({where}); YAML takes each key once",
                         problem_mark=mark)
        self.line = line


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, reading ``1e-3`` and ``1E5`` as numbers and refusing a key written twice (see the module's docstring)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _value in node.value:  # the mapping's own keys, before a merge (``<<``) adds others it may override
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise DuplicateKey(key, seen[key], line, key_node.start_mark)
                seen[key] = line
            except TypeError:  # an unhashable key: SafeLoader's own error follows
                continue
        return super().construct_mapping(node, deep=deep)


_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789."))


def parse_yaml(text: str) -> Any:
    """YAML text as this package reads it: YAML 1.1, with numbers as Python reads them."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506  # a subclass of SafeLoader: no object construction


def read_text(path: str | Path, what: str = "file") -> str:
    """The UTF-8 text of a file the user named; a missing file, a directory, a binary file or another
    encoding is a :class:`ConfigError` naming ``path`` (``what`` says what it should be)."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory, not {what}")
    if not path.is_file():
        raise ConfigError(f"{path}: {what} not found")
    raw = path.read_bytes()
    if b"\x00" in raw[:8192]:
        raise ConfigError(f"{path}: a binary file, not {what}")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}: line {line}: not UTF-8 text (byte 0x{raw[exc.start]:02x}); save the file as UTF-8") from None


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML file whose top level is a mapping; errors name the file."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise ConfigError(f"{path}: config file not found")
    text = read_text(path, "a YAML file")
    try:
        data = parse_yaml(text)
    except DuplicateKey as exc:
        raise ConfigError(f"{path}: line {exc.line}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}:{where} not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys at the top level, got {type(data).__name__}")
    return data


def load_config(cls: type[T], path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> T:
    """Load ``path`` as ``cls``, after applying ``key=value`` overrides."""
    data = load_yaml(path)
    data = apply_overrides(data, overrides, source=str(path))
    return from_mapping(cls, data, source=str(path))


def apply_overrides(data: dict[str, Any], overrides: list[str] | tuple[str, ...], source: str = "--set") -> dict[str, Any]:
    """Return a copy of ``data`` with each ``dotted.key=value`` applied (value parsed as YAML)."""
    import copy

    out = copy.deepcopy(data)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r}: expected KEY=VALUE, for example fl.rounds=20")
        key, _, raw = item.partition("=")
        key = key.strip()
        if not key or any(not part for part in key.split(".")):
            raise ConfigError(f"override {item!r}: empty key")
        try:
            value = parse_yaml(raw) if raw.strip() else None
        except DuplicateKey as exc:
            raise ConfigError(f"override {item!r}: {exc.problem}") from None
        except yaml.YAMLError:
            value = raw
        node = out
        parts = key.split(".")
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"override {item!r}: {'.'.join(parts[: i + 1])} is not a section")
            node = child
        node[parts[-1]] = value
    return out


def from_mapping(cls: type[T], data: Any, source: str = "<config>", path: str = "") -> T:
    """Build dataclass ``cls`` from ``data``, validating keys and types recursively."""
    return _convert(cls, data, source, path)


def to_mapping(obj: Any) -> Any:
    """The inverse of :func:`from_mapping`: plain dicts/lists, ready for YAML or JSON."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {f.name: to_mapping(getattr(obj, f.name)) for f in dataclasses.fields(obj) if not f.metadata.get("plugin_params")}
        rest = rest_field(obj)
        if rest is not None:
            out.update(to_mapping(getattr(obj, rest)))
        return out
    if isinstance(obj, (list, tuple)):
        return [to_mapping(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_mapping(v) for k, v in obj.items()}
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _where(source: str, path: str) -> str:
    return f"{source}: {path}" if path else source


def _type_name(tp: Any) -> str:
    if tp is type(None):
        return "null"
    origin = get_origin(tp)
    if origin is Literal:
        return " or ".join(repr(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if origin in (list, tuple):
        args = get_args(tp)
        return f"a list of {_type_name(args[0])}" if args else "a list"
    if origin is dict:
        return "a mapping"
    if dataclasses.is_dataclass(tp):
        return "a mapping (section)"
    return getattr(tp, "__name__", str(tp))


def _convert(tp: Any, value: Any, source: str, path: str) -> Any:
    origin = get_origin(tp)
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        return _convert_dataclass(tp, value, source, path)
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, value, source, path)
            except ConfigError as exc:
                errors.append(exc)
        if len(errors) == 1:
            raise errors[0]
        raise ConfigError(f"{_where(source, path)}: expected {_type_name(tp)}, got {value!r}")
    if origin is Literal:
        if value in get_args(tp) and not (isinstance(value, bool) and not any(isinstance(a, bool) for a in get_args(tp))):
            return value
        hint = ""
        if isinstance(value, bool) and all(isinstance(a, str) for a in get_args(tp)):  # YAML 1.1 reads on/off, yes/no as booleans
            hint = " (YAML reads an unquoted on/off, yes/no or true/false as a boolean: quote the word, or use one of the names above)"
        raise ConfigError(f"{_where(source, path)}: expected one of {_type_name(tp)}, got {value!r}{hint}")
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{_where(source, path)}: expected {_type_name(tp)}, got {value!r}")
        (item_tp, *_rest) = get_args(tp) or (Any,)
        items = [_convert(item_tp, v, source, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{_where(source, path)}: expected a mapping, got {value!r}")
        key_tp, val_tp = get_args(tp) or (Any, Any)
        return {
            _convert(key_tp, k, source, f"{path}.{k}"): _convert(val_tp, v, source, f"{path}.{k}")
            for k, v in value.items()
        }
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{_where(source, path)}: expected true or false, got {value!r}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ConfigError(f"{_where(source, path)}: expected an integer, got {value!r}")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise ConfigError(f"{_where(source, path)}: expected a number, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{_where(source, path)}: expected a string, got {value!r}")
    if tp is Path:
        if isinstance(value, (str, Path)):
            return Path(value)
        raise ConfigError(f"{_where(source, path)}: expected a path, got {value!r}")
    raise TypeError(f"config type {tp!r} at {path} is not supported")  # a programming error


def _convert_dataclass(cls: Any, value: Any, source: str, path: str) -> Any:
    if isinstance(value, cls):
        return value
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{_where(source, path)}: expected a mapping (section), got {value!r}")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    rest = rest_field(cls)
    if rest is not None:
        fields.pop(rest)
        value = {**{k: v for k, v in value.items() if k in fields}, rest: {k: v for k, v in value.items() if k not in fields}}
        fields[rest] = next(f for f in dataclasses.fields(cls) if f.name == rest)
    unknown = [k for k in value if k not in fields]
    if unknown:
        known = ", ".join(sorted(fields))
        key = f"{path}.{unknown[0]}" if path else str(unknown[0])
        raise ConfigError(f"{source}: unknown key {key!r} (known here: {known})")
    kwargs = {}
    for name, field in fields.items():
        sub = f"{path}.{name}" if path else name
        if name in value:
            kwargs[name] = _convert(hints[name], value[name], source, sub)
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{source}: missing required key {sub!r}")
    try:
        return cls(**kwargs)
    except FieldError as exc:
        key = f"{path}.{exc.key}" if path else exc.key
        raise ConfigError(f"{source}: {key}: expected {exc.expected}, got {exc.got!r}") from None
    except ValueError as exc:
        raise ConfigError(f"{_where(source, path)}: {exc}") from None


"""One plug-in shape for every extension point: a registry of names, import paths and entry points.

An extension point (policies, selectors, aggregators, engines, executors) is a :class:`Contract`,
declared in its concept's ``base.py``: the parts a plug-in must have, the optional ones with
their defaults (defined on the contract's base class), and the entry-point group third-party
packages register in. A :class:`Registry` finds a plug-in by

1. a built-in name (``fedprox``), the shipped implementations beside the contract;
2. an import path ``package.module:Name`` (the module looked for on the Python path, then beside
   the experiment and in the working directory; a module not found says where it looked);
3. an entry point of the contract's group, declared by an installed package::

       [project.entry-points."flamingo_sim.policies"]
       charging = "my_package.policy:ChargingPolicy"

:meth:`Registry.build` makes the plug-in with the parameters of its YAML section, validated by
the plug-in's own ``Params`` dataclass (frozen, ranges checked by
:func:`~flamingo_sim.config.check_ranges`, each field passed to the constructor as a keyword).
``Registry.check`` holds it to its contract before anything runs: every required part
present and its own (a method a subclass inherits from the contract's class is only the
contract's stub, and counts as missing), every method taking the arguments the engine passes,
and the contract's own rule (:attr:`Contract.validate`); an optional part it lacks gets the
contract's default. Every failure is one :class:`~flamingo_sim.errors.ConfigError` line naming
the config key, the plug-in, the part and the contract.

``display_name`` is what reports call a plug-in: its name in the experiment, or for an
import path its own ``name`` attribute (else its class's name), never the import path.
``plugin_label`` is what a mid-run error calls a built plug-in: the name the experiment gave it
(``uniform``, ``module:Class``), so that the user finds the line to fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import importlib.metadata
import inspect
import sys
import types
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from flamingo_sim.config import from_mapping
from flamingo_sim.errors import ConfigError

__all__ = ["Contract", "Registry", "GROUPS", "load_object", "entry_points", "params_class", "check_params", "check_name", "unknown_message",
           "display_name", "plugin_label"]

#: The entry-point group of each extension point.
GROUPS = {
    "policy": "flamingo_sim.policies",
    "selector": "flamingo_sim.selectors",
    "aggregator": "flamingo_sim.aggregators",
    "engine": "flamingo_sim.engines",
    "executor": "flamingo_sim.executors",
}


@dataclass(frozen=True)
class Contract:
    """An extension point: its ``kind`` (``"policy"``), the ``base`` class that documents it and
    defines the defaults of its ``optional`` parts, and the ``required`` parts a plug-in must have.

    ``validate(plugin)``: the contract's own rule beyond its parts (a policy's decline reasons),
    what is wrong in a few words, or None."""

    kind: str
    base: type
    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    validate: Callable[[Any], str | None] | None = None

    @property
    def group(self) -> str:
        return GROUPS[self.kind]

    @property
    def where(self) -> str:
        return f"{self.base.__module__}.{self.base.__qualname__}"

    def stub(self, name: str) -> Any:
        """The contract class's own definition of ``name`` (a required method's is a stub that does nothing), or None."""
        for klass in self.base.__mro__:
            if name in vars(klass):
                return vars(klass)[name]
        return None

    def problem(self, target: Any, built: bool) -> str | None:
        """What ``target`` (a plug-in class, or with ``built`` the object made) gets wrong of this
        contract, in a few words naming the part; None when nothing."""
        absent = [n for n in self.required if _static(target, n) is _ABSENT]
        stubs = [n for n in self.required if n not in absent and _static(target, n) is self.stub(n)]
        if absent or stubs:
            return self._missing(target, absent, stubs)
        for name in (*self.required, *self.optional):
            wrong = self._signature_problem(target, name, built)
            if wrong:
                return wrong
        return None

    def _missing(self, target: Any, absent: list[str], stubs: list[str]) -> str:
        klass = target if isinstance(target, type) else type(target)
        own = sorted({n for k in klass.__mro__ if k.__module__ not in (self.base.__module__, "builtins", "typing", "abc")
                      for n in vars(k) if not n.startswith("_")})
        near = [f"{m[0]} (for {n}?)" for n in absent + stubs if (m := difflib.get_close_matches(n, own, n=1, cutoff=0.6))]
        hint = f"; it defines {', '.join(near)}: a misspelling?" if near else ""
        article = "an" if self.kind[0] in "aeiou" else "a"
        needs = f"{article} {self.kind} needs {', '.join(self.required)}" + (f"; {', '.join(self.optional)} are optional" if self.optional else "")
        if absent:
            also = f", and {', '.join(stubs)} only as the contract's stub" if stubs else ""
            return f"lacks {', '.join(absent)}, which the contract {self.where} requires{also}{hint} ({needs})"
        return (f"has no {', '.join(stubs)} of its own, only the stub it inherits from the contract {self.where}, which does nothing"
                f"{hint} ({needs})")

    def _signature_problem(self, target: Any, name: str, built: bool) -> str | None:
        stub = self.stub(name)
        if not isinstance(stub, types.FunctionType):
            return None  # a data attribute (proximal_mu, resumable, ...)
        found = _static(target, name)
        if found is _ABSENT or found is stub:
            return None
        if not callable(found) and not isinstance(found, (staticmethod, classmethod)):
            return f"{name} is a {type(found).__name__}, not a method (see the contract {self.where})"
        want = list(inspect.signature(stub).parameters)[1:]
        try:
            if built:
                params = list(inspect.signature(getattr(target, name)).parameters.values())
            elif isinstance(found, staticmethod):
                params = list(inspect.signature(found.__func__).parameters.values())
            elif isinstance(found, (classmethod, types.FunctionType)):
                params = list(inspect.signature(found.__func__ if isinstance(found, classmethod) else found).parameters.values())[1:]
            else:
                return None  # a callable object: checked once built
            inspect.Signature(params).bind(*want)
        except TypeError:
            shown = ", ".join(str(p) for p in params)
            return (f"{name}({shown}) cannot take the arguments the engine passes, {name}({', '.join(want)}) "
                    f"(see the contract {self.where})")
        except ValueError:
            return None  # no signature to read (a builtin)
        return None


class _Absent:
    pass


_ABSENT = _Absent()


def _static(target: Any, name: str) -> Any:
    """``target``'s ``name`` as it is defined (no descriptor run, no property called), or :data:`_ABSENT`."""
    try:
        return inspect.getattr_static(target, name)
    except AttributeError:
        return _ABSENT


class _ImportFailed(Exception):
    """What went wrong importing ``module:attr``, in a few words."""


def _import(value: str, search: Sequence[Path] = ()) -> Any:
    """The object ``module:attr`` (``attr`` may be dotted) names; ``search``: folders also tried for the
    module, after ``sys.path``. Raises :class:`_ImportFailed` saying what failed and, for a module
    not found, where it was looked for."""
    module_name, _, attr = value.partition(":")
    extra = [str(p) for p in dict.fromkeys(search) if str(p) not in sys.path]
    sys.path.extend(extra)
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        if module_name == missing or module_name.startswith(missing + "."):
            where = " and ".join(str(p) for p in dict.fromkeys(search))
            raise _ImportFailed(f"{exc}; looked on the Python path" + (f", then in {where}" if where else "")) from None
        raise _ImportFailed(f"{exc}, which {module_name} imports") from None
    except ImportError as exc:
        raise _ImportFailed(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - the user's module failed as it ran (a syntax error, its own raise): one line
        raise _ImportFailed(f"{type(exc).__name__}: {exc}") from None
    finally:
        for p in extra:
            sys.path.remove(p)
    for part in attr.split(".") if attr else ():
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise _ImportFailed(f"module {module_name!r} has no attribute {attr!r}") from None
    return obj


def load_object(path: str, source: str, *, kind: str, known: Mapping[str, Any] | Sequence[str], search: Sequence[Path] = ()) -> Any:
    """Import ``package.module:Name``; errors name the config key and what was expected.

    ``search``: folders also tried for the module (after ``sys.path``), such as the experiment
    file's directory, so that a user's ``models.py`` beside the experiment imports as-is.
    """
    if ":" not in path:
        names = ", ".join(known)
        raise ConfigError(f"{source}: {kind} {path!r}: expected one of {names} or an import path 'package.module:ClassName'")
    try:
        return _import(path, search)
    except _ImportFailed as exc:
        raise ConfigError(f"{source}: {kind} {path!r}: cannot import ({exc})") from None


def _source_tree_entry_points(group: str) -> dict[str, str]:
    """The entry points this package declares in the ``pyproject.toml`` beside it (a source
    checkout), for an install whose metadata predates them; empty elsewhere (and before Python 3.11)."""
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if sys.version_info >= (3, 11) and pyproject.is_file():
        import tomllib

        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            return {}
        project = data.get("project", {})
        if project.get("name") == "flamingo-sim":
            return {str(k): str(v) for k, v in project.get("entry-points", {}).get(group, {}).items()}
    return {}


def entry_points(group: str) -> dict[str, str]:
    """Name -> ``module:attr`` of every entry point installed in ``group`` (this package's own
    declarations included when its installed metadata is older than its source)."""
    found = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=group)}
    for name, value in _source_tree_entry_points(group).items():
        found.setdefault(name, value)
    return found


def params_class(obj: Any) -> type | None:
    """The plug-in's ``Params`` dataclass, or None when it takes no parameters."""
    params = getattr(obj, "Params", None)
    if params is None:
        return None
    if not (isinstance(params, type) and dataclasses.is_dataclass(params)):
        raise TypeError(f"{obj!r}: Params must be a dataclass")
    return params


_NO_SOURCE = "\0"


def unknown_message(kind: str, spec: str, builtin: Sequence[str] | Mapping[str, Any]) -> str:
    """What is said of a ``spec`` that is no built-in name, installed entry point or import path."""
    installed = entry_points(GROUPS[kind])
    names = ", ".join(map(repr, [*builtin, *(n for n in sorted(installed) if n not in builtin)]))
    return (f"unknown {kind} {spec!r}; expected one of {names} (built-in or installed in entry-point group {GROUPS[kind]!r}) "
            "or an import path 'package.module:ClassName'")


def check_name(kind: str, spec: str, builtin: Sequence[str] | Mapping[str, Any], key: str) -> None:
    """A :class:`ValueError` (inside a config's own check) if ``spec`` names no plug-in of ``kind``
    that can be found without importing anything."""
    if ":" not in spec and spec not in builtin and spec not in entry_points(GROUPS[kind]):
        raise ValueError(f"{key}: {unknown_message(kind, spec, builtin)}")


def check_params(params: type | None, kind: str, spec: str, section: Mapping[str, Any] | None, key: str) -> dict[str, Any]:
    """The constructor keywords from ``section`` (config key ``key``), checked by the plug-in's
    ``params`` dataclass with its defaults filled in; a :class:`ValueError` naming the key (and
    no file: a config's own check adds it, :meth:`Registry.params` too) when they are wrong."""
    section = dict(section or {})
    if params is None:
        if section:
            raise ValueError(f"{key}: {kind} {spec!r} takes no parameters (it declares no Params), got {', '.join(sorted(section))}")
        return {}
    try:
        value: Any = from_mapping(params, section, source=_NO_SOURCE, path=key)
    except ConfigError as exc:
        raise ValueError(str(exc).removeprefix(f"{_NO_SOURCE}: ")) from None
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}


def _at(source: str, message: str) -> str:
    return f"{source}: {message}" if source else message


class Registry:
    """The plug-ins of one :class:`Contract`: the built-ins, import paths and entry points.

    ``builtin`` maps a name to the plug-in (a class or factory), or to its ``module:attr`` in the
    same layer or below, imported when asked for. Built-in names win over an entry point of the same name.
    """

    def __init__(self, contract: Contract, builtin: dict[str, Any]) -> None:
        self.contract = contract
        self.builtin = builtin

    def names(self) -> list[str]:
        """Built-in names, then installed entry points' names."""
        return [*self.builtin, *(n for n in sorted(entry_points(self.contract.group)) if n not in self.builtin)]

    def load(self, spec: str, key: str, search: Sequence[Path] = ()) -> Any:
        """The plug-in (class or factory) named ``spec`` at config key ``key``."""
        kind = self.contract.kind
        if spec in self.builtin:
            found = self.builtin[spec]
            # a shipped plug-in of this layer given as "module:attr" is imported only when asked for (Ray's executor)
            return load_object(found, key, kind=kind, known=self.names()) if isinstance(found, str) else found
        if ":" in spec:
            return load_object(spec, key, kind=kind, known=self.names(), search=search)
        installed = entry_points(self.contract.group)
        if spec not in installed:
            raise ConfigError(f"{key}: {unknown_message(kind, spec, self.builtin)}")
        try:
            return _import(installed[spec])
        except _ImportFailed as exc:
            raise ConfigError(f"{key}: {kind} {spec!r} (entry point {installed[spec]!r}) cannot be imported: {exc}") from None

    def params(self, plugin: Any, spec: str, section: Mapping[str, Any] | None, source: str, key: str) -> dict[str, Any]:
        """The constructor keywords from ``section``, validated by the plug-in's ``Params`` (its
        defaults filled in); errors name ``source`` (the experiment file) and the dotted ``key``."""
        try:
            return check_params(params_class(plugin), self.contract.kind, spec, section, key)
        except ValueError as exc:
            raise ConfigError(_at(source, str(exc))) from None

    def build(self, spec: str, section: Mapping[str, Any] | None, *, source: str, key: str, params_key: str,
              search: Sequence[Path] = (), args: Sequence[Any] = (), extra: Callable[[Any], Mapping[str, Any]] | None = None) -> Any:
        """Load ``spec`` (named at ``key``), construct it as ``plugin(*args, **params, **extra(plugin))``
        with the parameters of ``section`` (the config key ``params_key``), and :meth:`check` it."""
        where = _at(source, key)
        plugin = self.load(spec, where, search)
        if isinstance(plugin, type):  # held to its contract before it is made (an abstract class cannot be)
            self._refuse(plugin, spec, where, built=False)
        kwargs = self.params(plugin, spec, section, source, params_key)
        if extra is not None:
            kwargs.update(extra(plugin))
        try:
            obj = plugin(*args, **kwargs)
        except TypeError as exc:
            raise ConfigError(f"{where}: {self.contract.kind} {spec!r} cannot be built with {sorted(kwargs) or 'no parameters'} ({exc})") from None
        except ValueError as exc:
            raise ConfigError(_at(source, f"{params_key}: {exc}")) from None
        checked = self.check(obj, spec, where)
        _remember(checked, spec)
        return checked

    def _refuse(self, target: Any, spec: str, key: str, built: bool) -> None:
        problem = self.contract.problem(target, built)
        if problem is None and built and self.contract.validate is not None:
            problem = self.contract.validate(target)
        if problem is not None:
            raise ConfigError(f"{key}: {self.contract.kind} {spec!r} {problem}")

    def check(self, obj: Any, spec: str, key: str) -> Any:
        """``obj`` held to the contract (module docstring; else one error line naming ``key``, the
        plug-in, the part and the contract), each missing optional part set to the contract's
        default (a method of the base class, or its value)."""
        self._refuse(obj, spec, key, built=True)
        c = self.contract
        for name in c.optional:
            if hasattr(obj, name):
                continue
            default = getattr(c.base, name)
            value = types.MethodType(default, obj) if isinstance(default, types.FunctionType) else default
            try:
                setattr(obj, name, value)
            except (AttributeError, TypeError):
                raise ConfigError(f"{key}: {c.kind} {spec!r} lacks the optional {name} and cannot take its default; "
                                  f"subclass {c.where}") from None
        return obj


def display_name(spec: str, plugin: Any) -> str:
    """What reports and tables call the plug-in named ``spec``: ``spec`` itself for a shipped or
    installed (entry-point) name; for an import path ``module:Class``, the ``name`` attribute the
    plug-in's own classes define (one inherited from this package's classes, such as a shipped
    policy's, does not count), else ``Class``."""
    if ":" not in spec:
        return spec
    klass = plugin if isinstance(plugin, type) else type(plugin)
    for k in klass.__mro__:
        if k.__module__.partition(".")[0] == __name__.partition(".")[0]:
            break  # from here on the package's own classes
        value = vars(k).get("name")
        if isinstance(value, str) and value.strip():
            return value.strip()
    return spec.rpartition(":")[2].rpartition(".")[2]


#: The name each plug-in built by :meth:`Registry.build` was given, by ``id`` while it lives.
_LABELS: dict[int, str] = {}


def _remember(plugin: Any, spec: str) -> None:
    try:
        weakref.finalize(plugin, _LABELS.pop, id(plugin), None)
    except TypeError:  # no weak reference to it (__slots__): named by its class
        return
    _LABELS[id(plugin)] = spec


def plugin_label(plugin: Any) -> str:
    """What a mid-run error calls ``plugin``: the name it was built from (a shipped name, an entry
    point's name, the import path ``module:Class`` of the experiment), else ``module:Class``."""
    label = _LABELS.get(id(plugin))
    if label is not None:
        return label
    klass = type(plugin)
    return f"{klass.__module__}:{klass.__qualname__}"

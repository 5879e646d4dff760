"""The configuration reference, generated from the config dataclasses so that it cannot drift.

Every key of an experiment file is a field of :class:`~flamingo_sim.fl.config.ExperimentConfig`
or of a section it nests. Each field carries its meaning in a ``#:`` comment on the line(s)
directly above it (the Sphinx convention for attribute docs)::

    #: K: the client updates aggregated each round.
    participants_per_round: int = 100

Its type and default come from the dataclass, its range from the ``check_ranges(self, key=...)``
call in the class's ``__post_init__`` (the one way config values are range-checked). The
source is read as text and parsed with :mod:`ast`, never executed, and nothing heavier than the
config modules themselves is imported.

A plug-in's parameters (``policy_params.<name>``, ``selector``, the keys beside
``aggregation.name``) are listed per plug-in, from its ``Params`` dataclass read the same way:
the shipped plug-ins always, and with :func:`plugin_params_of` those an experiment names
(``python -m flamingo_sim.fl.config_reference EXPERIMENT``, a YAML file or a shipped experiment's
name, prints the reference with them). ``python docs/hooks.py`` writes :func:`reference_markdown`
into the configuration page and :func:`plugins_markdown` into the plug-in guide; tests fail when a
key has no description, or when a page's tables no longer match the code.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import sys
import types
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

__all__ = ["ConfigKey", "PluginParams", "class_source", "config_keys", "plugin_params", "plugin_params_of", "reference_markdown",
           "plugins_markdown", "CHOSEN_BY", "main"]

#: The section holding a plug-in's parameters -> the key that chooses the plug-in.
CHOSEN_BY = {"policy_params": "policies", "selector": "fl.selection", "aggregation": "aggregation.name"}


@dataclass(frozen=True)
class ConfigKey:
    """One experiment key: its dotted path, and the type, default, range and meaning shown for it.

    A section (a field whose type is a config dataclass, such as ``fl``) is a key too, with
    ``is_section`` set: its description introduces the section's table.
    """

    key: str
    type: str
    default: str
    range: str
    description: str
    section: str
    is_section: bool = False
    #: The plug-in these parameters belong to (the value of :data:`CHOSEN_BY`'s key); '' for the others.
    plugin: str = ""


@dataclass(frozen=True)
class PluginParams:
    """A plug-in's parameter section: where it sits, the plug-in's name, its ``Params`` dataclass."""

    section: str
    plugin: str
    params: type


@functools.lru_cache(maxsize=None)
def _parsed(path: str) -> tuple[ast.Module, tuple[str, ...]]:
    text = Path(path).read_text(encoding="utf-8")
    return ast.parse(text), tuple(text.splitlines())


def _class_node(cls: type) -> tuple[ast.ClassDef, tuple[str, ...]]:
    path = inspect.getsourcefile(cls)
    if path is None:
        raise TypeError(f"{cls.__qualname__}: no source file to read its field descriptions from")
    tree, lines = _parsed(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            return node, lines
    raise TypeError(f"{cls.__qualname__}: class not found in {path}")


def class_source(cls: type) -> tuple[ast.ClassDef, tuple[str, ...]]:
    """``cls``'s class statement, parsed (never executed), and its file's lines."""
    return _class_node(cls)


def _descriptions(node: ast.ClassDef, lines: tuple[str, ...]) -> dict[str, str]:
    """Field name -> the ``#:`` comment lines directly above it, joined."""
    out = {}
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            above = []
            i = stmt.lineno - 2  # the line above, 0-based
            while i >= 0 and lines[i].strip().startswith("#:"):
                above.append(lines[i].strip()[2:].strip())
                i -= 1
            out[stmt.target.id] = " ".join(reversed(above)).strip()
    return out


def _literal_text(node: ast.expr, namespace: dict[str, Any]) -> str | None:
    """A string constant, or an f-string whose names are module-level constants."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name) and value.value.id in namespace:
                parts.append(str(namespace[value.value.id]))
            else:
                return None
        return "".join(parts)
    return None


def _ranges(cls: type, node: ast.ClassDef) -> dict[str, str]:
    """Field name -> the rule given to ``check_ranges`` in the class's ``__post_init__``."""
    namespace = vars(sys.modules[cls.__module__])
    out: dict[str, str] = {}
    for stmt in node.body:
        if not (isinstance(stmt, ast.FunctionDef) and stmt.name == "__post_init__"):
            continue
        for call in ast.walk(stmt):
            if not isinstance(call, ast.Call):
                continue
            name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", None)
            if name != "check_ranges":
                continue
            for kw in call.keywords:
                rule = _literal_text(kw.value, namespace)
                if kw.arg is not None and rule is not None:
                    out[kw.arg] = rule
    return out


def _type_text(tp: Any) -> str:
    if tp is type(None):
        return "null"
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) if isinstance(a, str) else str(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(_type_text(a) for a in get_args(tp))
    if origin in (list, tuple):
        args = [a for a in get_args(tp) if a is not Ellipsis]
        return f"list of {_type_text(args[0])}" if args else "list"
    if origin is dict:
        key, value = get_args(tp) or (Any, Any)
        return f"mapping {_type_text(key)} -> {_type_text(value)}"
    if tp is Path:
        return "path"
    if tp is bool:
        return "bool"
    return getattr(tp, "__name__", str(tp))


def _value_text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, str):
        return repr(value) if value == "" else value
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_value_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    return str(value)


def config_keys(cls: type | None = None, prefix: str = "") -> list[ConfigKey]:
    """Every key of ``cls`` (default: the experiment config) and of the sections it nests, in file order.

    A section (a field whose type is a config dataclass) comes first, then its keys, with the
    section's path before them.
    """
    if cls is None:
        from flamingo_sim.fl.config import ExperimentConfig

        cls = ExperimentConfig
    node, lines = _class_node(cls)
    descriptions, ranges = _descriptions(node, lines), _ranges(cls, node)
    hints = get_type_hints(cls)
    keys: list[ConfigKey] = []
    for f in dataclasses.fields(cls):
        if not f.init or f.metadata.get("plugin_params"):
            continue
        key = f"{prefix}{f.name}"
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp) and isinstance(tp, type):
            keys.append(ConfigKey(key=key, type="section", default="", range="", description=descriptions.get(f.name, ""),
                                  section=prefix.rstrip("."), is_section=True))
            keys += config_keys(tp, prefix=f"{key}.")
            continue
        if f.default is not dataclasses.MISSING:
            default = _value_text(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = _value_text(f.default_factory())
        else:
            default = "(required)"
        keys.append(ConfigKey(key=key, type=_type_text(tp), default=default, range=ranges.get(f.name, ""),
                              description=descriptions.get(f.name, ""), section=prefix.rstrip(".")))
    return keys


def plugin_params() -> list[PluginParams]:
    """The shipped plug-ins that take parameters (torch-free: the aggregators' come from their own module)."""
    from flamingo_sim.devices.policies import POLICIES
    from flamingo_sim.fl.strategy.parameters import AGGREGATOR_PARAMS
    from flamingo_sim.fl.strategy.selection import SELECTORS
    from flamingo_sim.plugins import params_class

    out = [PluginParams(f"policy_params.{name}", name, p) for name, cls in POLICIES.builtin.items() if (p := params_class(cls))]
    out += [PluginParams("selector", name, p) for name, cls in SELECTORS.builtin.items() if (p := params_class(cls))]
    out += [PluginParams("aggregation", name, p) for name, p in AGGREGATOR_PARAMS.items() if p is not None]
    return out


def plugin_params_of(experiment: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> list[PluginParams]:
    """The parameter sections of the plug-ins an experiment names that are not shipped (imported:
    an import path's module is also looked for beside the experiment, as a run does)."""
    from flamingo_sim.devices.policies import POLICIES
    from flamingo_sim.fl.config import load_experiment
    from flamingo_sim.fl.plugins import plugin_search
    from flamingo_sim.fl.strategy.parameters import AGGREGATOR_PARAMS
    from flamingo_sim.fl.strategy.selection import SELECTORS
    from flamingo_sim.plugins import Registry, params_class

    cfg = load_experiment(experiment, overrides)
    search = plugin_search(experiment)
    out = []

    def add(registry: Registry, builtin: Any, spec: str, section: str, key: str) -> None:
        if spec not in builtin and (p := params_class(registry.load(spec, f"{experiment}: {key}", search))):
            out.append(PluginParams(section, spec, p))

    for name in cfg.policies:
        add(POLICIES, POLICIES.builtin, name, f"policy_params.{name}", "policies")
    add(SELECTORS, SELECTORS.builtin, cfg.fl.selection, "selector", "fl.selection")
    if cfg.aggregation.name not in AGGREGATOR_PARAMS:
        from flamingo_sim.fl.strategy.aggregators import AGGREGATORS

        add(AGGREGATORS, AGGREGATOR_PARAMS, cfg.aggregation.name, "aggregation", "aggregation.name")
    return out


def _plugin_keys(plugins: list[PluginParams]) -> list[ConfigKey]:
    keys = []
    for p in plugins:
        intro = (inspect.getdoc(p.params) or "").split("\n\n")[0].replace("\n", " ")
        keys.append(ConfigKey(key=p.section, type="section", default="", range="", description=intro, section="", is_section=True, plugin=p.plugin))
        keys += [replace(k, section=p.section, plugin=p.plugin) for k in config_keys(p.params, prefix=f"{p.section}.")]
    return keys


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _heading(section: str, plugin: str) -> str:
    if not plugin:
        return f"### `{section}`" if section else "### Top level"
    if section.startswith("policy_params."):
        return f"### `{section}` (policy `{plugin}`)"
    return f"### `{section}` with `{'name' if section == 'aggregation' else CHOSEN_BY[section]}: {plugin}`"


def _tables(keys: list[ConfigKey]) -> str:
    intros = {(k.key, k.plugin): k.description for k in keys if k.is_section}
    sections: dict[tuple[str, str], list[ConfigKey]] = {}
    for k in keys:
        if not k.is_section:
            sections.setdefault((k.section, k.plugin), []).append(k)
    out = []
    for (section, plugin), rows in sections.items():
        out.append(_heading(section, plugin))
        out.append("")
        if section:
            out += [intros[section, plugin], ""]
        out.append("| key | type | default | range | meaning |")
        out.append("|---|---|---|---|---|")
        for k in rows:
            default = f"`{k.default}`" if k.default != "(required)" else "required"
            rng = f"`{k.range}`" if k.range else ""
            out.append(f"| `{k.key}` | {_cell(k.type)} | {default} | {rng} | {_cell(k.description)} |")
        out.append("")
    return "\n".join(out)


def reference_markdown(cls: type | None = None, plugins: list[PluginParams] | None = None) -> str:
    """The reference as Markdown: one table per section (key, type, default, range, meaning).

    With the experiment config (``cls`` None), each plug-in's parameter section follows: the
    shipped plug-ins' and ``plugins`` (:func:`plugin_params_of`)."""
    keys = config_keys(cls)
    if cls is None:
        keys += _plugin_keys(plugin_params() + list(plugins or ()))
    return _tables(keys)


def plugins_markdown(plugins: list[PluginParams]) -> str:
    """The parameter tables of ``plugins`` alone (the plug-in guide shows its examples' this way)."""
    return _tables(_plugin_keys(plugins))


def main(argv: list[str] | None = None) -> int:
    """``python -m flamingo_sim.fl.config_reference [EXPERIMENT]``: print the reference, with the plug-ins of
    EXPERIMENT (a YAML file or a shipped experiment's name, as ``flamingo-sim run`` takes); a bad one is one line."""
    import argparse

    from flamingo_sim.errors import FlamingoError
    from flamingo_sim.resources import find_experiment, name_shipped

    parser = argparse.ArgumentParser(prog="python -m flamingo_sim.fl.config_reference",
                                     description="Print the configuration reference as Markdown (docs/configuration.md's tables).")
    parser.add_argument("experiment", nargs="?", help="also list the parameters of the plug-ins this experiment names "
                                                      "(a YAML file or a shipped experiment's name, e.g. openimage_mobilenet)")
    args = parser.parse_args(argv)
    try:
        plugins = plugin_params_of(find_experiment(args.experiment)) if args.experiment else None
        text = reference_markdown(plugins=plugins)
    except FlamingoError as exc:
        print(f"{parser.prog}: error: {name_shipped(str(exc))}", file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Loading user-supplied classes (policies, selectors) by import path, with clear errors."""

from __future__ import annotations

import importlib
from typing import Any, Mapping

from flamingo_sim.errors import ConfigError


def load_object(path: str, source: str, *, kind: str, known: Mapping[str, Any]) -> Any:
    """Import ``package.module:Name`` (or ``package.module.Name``); errors name the config key."""
    names = ", ".join(sorted(known))
    if ":" in path:
        module_name, _, attr = path.partition(":")
    elif "." in path:
        module_name, _, attr = path.rpartition(".")
    else:
        raise ConfigError(f"{source}: unknown {kind} {path!r} (known: {names}; or give package.module:Class)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{source}: {kind} {path!r} does not import: {exc}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"{source}: {kind} {path!r}: module {module_name!r} has no attribute {attr!r}") from None

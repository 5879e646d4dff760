"""Loading user-supplied classes (policies, selectors) by import path, with clear errors."""

from __future__ import annotations

import importlib
from typing import Any, Mapping

from flamingo_sim.errors import ConfigError


def load_object(path: str, source: str, *, kind: str, known: Mapping[str, Any]) -> Any:
    """Import ``package.module:Name``; errors name the config key and what was expected."""
    if ":" not in path:
        names = ", ".join(known)
        raise ConfigError(f"{source}: {kind} {path!r}: expected one of {names} or an import path 'package.module:ClassName'")
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{source}: {kind} {path!r}: cannot import ({exc})") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"{source}: {kind} {path!r}: cannot import (module {module_name!r} has no attribute {attr!r})") from None

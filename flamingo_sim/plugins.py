"""Loading user-supplied classes (policies, selectors) by import path, with clear errors."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from flamingo_sim.errors import ConfigError


def load_object(path: str, source: str, *, kind: str, known: Mapping[str, Any], search: Sequence[Path] = ()) -> Any:
    """Import ``package.module:Name``; errors name the config key and what was expected.

    ``search``: folders also tried for the module (after ``sys.path``), such as the experiment
    file's directory, so that a user's ``models.py`` beside the experiment imports as-is.
    """
    if ":" not in path:
        names = ", ".join(known)
        raise ConfigError(f"{source}: {kind} {path!r}: expected one of {names} or an import path 'package.module:ClassName'")
    module_name, _, attr = path.partition(":")
    extra = [str(p) for p in search if str(p) not in sys.path]
    sys.path.extend(extra)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{source}: {kind} {path!r}: cannot import ({exc})") from None
    finally:
        for p in extra:
            sys.path.remove(p)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"{source}: {kind} {path!r}: cannot import (module {module_name!r} has no attribute {attr!r})") from None

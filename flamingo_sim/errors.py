"""User-facing errors.

Anything a user can cause (a bad file, a bad config key, an impossible selection) raises a
:class:`FlamingoError` whose message is one line saying what, where and what was expected.
The CLI prints that line and exits non-zero; it never shows a traceback for these.

Messages name the library's parameters and config keys (``n_seeds``, ``engine``), never the
command line's flags: each CLI command declares its flags for those names and
:func:`in_cli_terms` rewrites the line it prints.
"""

from __future__ import annotations

import re
from typing import Mapping


class FlamingoError(Exception):
    """An error caused by the user's input, reported as one clear line."""


class ConfigError(FlamingoError):
    """A configuration file or override is invalid (names the file and the key)."""


class InputDataError(FlamingoError):
    """An input data file is missing, empty, corrupt or of the wrong shape."""


class PluginError(FlamingoError):
    """A plug-in returned what its contract does not allow, mid-run (a selector's duplicate ids, an
    aggregate that lost an entry): one line naming the plug-in, the contract and what came back.
    The run stops before the round goes on; the line that reports it says how to continue it once
    the plug-in is fixed."""


class PoolLost(FlamingoError):
    """A process the units' executor needs died and could not be replaced (which, and how it died);
    the finished units are kept: the line that reports it says how to continue."""


def in_cli_terms(message: str, flags: Mapping[str, str]) -> str:
    """``message`` with each parameter name in ``flags`` (as a whole word) replaced by its flag.

    >>> in_cli_terms("n_seeds: expected a count >= 1, got 0", {"n_seeds": "--seeds"})
    '--seeds: expected a count >= 1, got 0'
    """
    if not flags:
        return message
    names = "|".join(re.escape(n) for n in sorted(flags, key=len, reverse=True))
    return re.sub(rf"(?<![\w.'\"/-])({names})(?![\w'\"/-])", lambda m: flags[m.group(1)], message)

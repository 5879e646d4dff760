"""User-facing errors.

Anything a user can cause (a bad file, a bad config key, an impossible selection) raises a
:class:`FlamingoError` whose message is one line saying what, where and what was expected.
The CLI prints that line and exits non-zero; it never shows a traceback for these.
"""


class FlamingoError(Exception):
    """An error caused by the user's input, reported as one clear line."""


class ConfigError(FlamingoError):
    """A configuration file or override is invalid (names the file and the key)."""


class InputDataError(FlamingoError):
    """An input data file is missing, empty, corrupt or of the wrong shape."""

"""Commands of this subpackage (filled in by its issue)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add this subpackage's commands to the ``flamingo-sim`` parser."""

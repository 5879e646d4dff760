"""The types of every command's flags: whole counts, finite numbers in a stated range, temperatures.

Each is an ``argparse`` ``type=``: a bad value becomes argparse's usage error naming the flag, before
anything is read or written (``flamingo-sim thermal: error: argument --ambient-c: expected a finite
temperature in [-40, 70] degC, got 'nan'``), never a traceback or a silently odd result.
"""

from __future__ import annotations

import argparse
import math
from typing import Callable

__all__ = ["count", "number", "AMBIENT_C"]


def count(minimum: int = 1, maximum: int | None = None) -> Callable[[str], int]:
    """A whole number in [``minimum``, ``maximum``] written in digits (``-5``, ``3.0`` and ``1e3`` refused)."""
    span = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"

    def parse(text: str) -> int:
        digits = text[1:] if text.startswith("-") else text
        value = int(text) if digits.isdigit() else None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"expected a whole number {span}, got {text!r}")
        return value

    return parse


def number(low: float | None = None, high: float | None = None, *, low_open: bool = False, what: str = "number",
           unit: str = "") -> Callable[[str], float]:
    """A finite number in the interval from ``low`` to ``high`` (either end open where asked; None: unbounded)."""
    left = "(" if low_open else "["
    span = "" if low is None and high is None else (
        f" >= {low:g}" if high is None and not low_open else f" > {low:g}" if high is None else
        f" in {left}{'-inf' if low is None else f'{low:g}'}, {high:g}]")
    tail = f" {unit}" if unit else ""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        ok = math.isfinite(value) and (low is None or (value > low if low_open else value >= low)) and (high is None or value <= high)
        if not ok:
            raise argparse.ArgumentTypeError(f"expected a finite {what}{span}{tail}, got {text!r}")
        return value

    return parse


#: An ambient (battery-trace) temperature: above absolute zero by far, within a phone's operating range and
#: beyond it on both sides (Li-ion cells are rated from about -20 to 60 degC; Android shuts a phone down near 68).
AMBIENT_C = number(-40.0, 70.0, what="temperature", unit="degC")

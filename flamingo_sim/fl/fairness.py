"""Fairness and participation: Jain's index and participation histograms.

Jain's fairness index of ``x_1..x_n >= 0`` is ``(sum x)^2 / (n * sum x^2)``: 1 when every
client got the same, ``1/n`` when one client got everything (Jain, Chiu and Hawe, 1984). The
engine reports it over *every* client of the population, for the number of rounds each was
kept (participation) and for the training energy each one's battery paid (all attempts).
"""

from __future__ import annotations

import numpy as np

__all__ = ["jain_index", "participation_histogram"]


def jain_index(x: np.ndarray) -> float:
    """Jain's index of the non-negative values ``x``; NaN when all are zero (or none given)."""
    v = np.asarray(x, dtype=np.float64)
    if v.size and (v < 0).any():
        raise ValueError("Jain's index needs non-negative values")
    sq = float(np.dot(v, v))
    if v.size == 0 or sq == 0.0:
        return float("nan")
    return float(v.sum()) ** 2 / (v.size * sq)


def participation_histogram(counts: np.ndarray) -> dict[str, int]:
    """How many clients took part ``k`` times, for every ``k`` from 0 to the most (keys are strings, for JSON)."""
    c = np.bincount(np.asarray(counts, dtype=np.int64))
    return {str(k): int(n) for k, n in enumerate(c)}

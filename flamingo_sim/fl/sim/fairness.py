"""Fairness and participation: Jain's index and participation histograms.

Jain's fairness index of ``x_1..x_n >= 0`` is ``(sum x)^2 / (n * sum x^2)``: 1 when every
client got the same, ``1/n`` when one client got everything (Jain, Chiu and Hawe, 1984). The
engine reports it over *every* client of the population, for the number of rounds each was
kept (participation) and for the training energy each one's battery paid (all attempts).

Both sums are numpy's pairwise sums (``np.add.reduce`` of a 1-D float64 array: a fixed order of
additions in plain C), never a BLAS call such as ``np.dot``, whose kernel, and so whose last bits,
depend on the CPU and on the BLAS numpy was built with: the index is the same on every CPU.
"""

from __future__ import annotations

import numpy as np

__all__ = ["jain_index", "merge_sorted", "participation_histogram"]


def jain_index(x: np.ndarray, n: int | None = None) -> float:
    """Jain's index of the non-negative values ``x``; NaN when all are zero (or none given).

    ``n``: the population's size when ``x`` holds only its non-zero entries (zeros add nothing
    to either sum), so that the round loop's per-round index at 1,000,000 clients costs O(clients
    that ever took part), not O(population).
    """
    v = np.asarray(x, dtype=np.float64)
    if v.size and (v < 0).any():
        raise ValueError("Jain's index needs non-negative values")
    size = v.size if n is None else int(n)
    if size < v.size:
        raise ValueError(f"n={size} is less than the {v.size} values given")
    v = np.ascontiguousarray(v).ravel()
    sq = float(np.add.reduce(v * v))  # not np.dot: a BLAS kernel's order of additions depends on the CPU
    if size == 0 or sq == 0.0:
        return float("nan")
    return float(np.add.reduce(v)) ** 2 / (size * sq)


def merge_sorted(sorted_idx: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``sorted_idx`` (sorted, distinct int64) with the entries of ``new`` it lacks, still sorted."""
    new = np.unique(np.asarray(new, dtype=np.int64))
    pos = np.searchsorted(sorted_idx, new)
    there = pos < len(sorted_idx)
    there[there] = sorted_idx[pos[there]] == new[there]
    return np.insert(sorted_idx, pos[~there], new[~there])


def participation_histogram(counts: np.ndarray) -> dict[str, int]:
    """How many clients took part ``k`` times, for every ``k`` from 0 to the most (keys are strings, for JSON)."""
    c = np.bincount(np.asarray(counts, dtype=np.int64))
    return {str(k): int(n) for k, n in enumerate(c)}

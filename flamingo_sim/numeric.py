"""Arithmetic whose result is the same on every x86-64 CPU.

numpy's vectorised ``exp`` uses the CPU's widest SIMD (AVX-512 where present), which differs from libm's in the last
bit for a few per cent of arguments: a figure computed with ``np.exp`` is then CPU-dependent, and every figure after it
(a temperature that crosses a threshold, a bandwidth that sets a round's time). :func:`exp` is libm's, one value at a
time, the same wherever the same libm runs.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["exp", "power"]

#: The largest argument whose exp is finite in float64 (log of the largest double).
_EXP_MAX = 709.782712893384


def exp(x: np.ndarray | float) -> np.ndarray:
    """Element-wise e**x with libm's ``exp`` (not numpy's SIMD one): an array of ``x``'s shape (float64); an
    argument above ~709.78 gives infinity, as ``np.exp`` does, without an error."""
    a = np.asarray(x, dtype=np.float64)
    flat = a.reshape(-1).tolist()
    out = np.fromiter((math.inf if v > _EXP_MAX else math.exp(v) if v == v else math.nan for v in flat), dtype=np.float64,
                      count=len(flat))
    return out.reshape(a.shape)


def power(base: np.ndarray | float, exponent: float) -> np.ndarray:
    """Element-wise ``base ** exponent`` with libm's ``pow`` (numpy's ``**`` on float64 arrays takes the SIMD path, which
    differs from libm's in the last bit on AVX-512 CPUs); ``base`` >= 0, or a negative base with an integral exponent."""
    a = np.asarray(base, dtype=np.float64)
    flat = a.reshape(-1).tolist()
    e = float(exponent)
    return np.fromiter((math.pow(v, e) if v == v else math.nan for v in flat), dtype=np.float64, count=len(flat)).reshape(a.shape)

"""Randomness derived from (seed, purpose, ...): no global RNG anywhere in the library.

``rng(seed, "selection", round_idx)`` always gives the same stream for the same arguments, so a
resumed run draws the same cohorts as an uninterrupted one, and adding a new consumer of
randomness never shifts the streams of the others.
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np

__all__ = ["rng", "derive_seed"]


def _key(part: int | str) -> int:
    if isinstance(part, (int, np.integer)) and not isinstance(part, bool):
        if part < 0:
            raise ValueError(f"seed parts must be non-negative, got {part}")
        return int(part)
    return _text_key(str(part))


@functools.lru_cache(maxsize=1024)
def _text_key(text: str) -> int:
    """64 bits of BLAKE2b of ``text`` (cached: the purposes are a handful of fixed words)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def derive_seed(seed: int, *parts: int | str) -> int:
    """A 63-bit integer seed derived from ``seed`` and ``parts`` (for torch generators)."""
    ss = np.random.SeedSequence([_key(seed), *(_key(p) for p in parts)])
    return int(ss.generate_state(2, dtype=np.uint64)[0] >> np.uint64(1))


def rng(seed: int, *parts: int | str) -> np.random.Generator:
    """A numpy Generator for (seed, *parts), e.g. ``rng(7, "selection", 12)``."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([_key(seed), *(_key(p) for p in parts)])))

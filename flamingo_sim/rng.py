"""Randomness derived from (seed, purpose, ...): no global RNG anywhere in the library.

``rng(seed, "selection", round_idx)`` always gives the same stream for the same arguments, so a
resumed run draws the same cohorts as an uninterrupted one, and adding a new consumer of
randomness never shifts the streams of the others.

:func:`rngs` gives the streams of many keys that differ only in their last part (a cohort's
clients) at once: the same generators as :func:`rng`, their seeds mixed in one vectorised pass.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.random.bit_generator import ISeedSequence

__all__ = ["rng", "rngs", "derive_seed"]


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


# -- many streams at once ------------------------------------------------------------------------
# NumPy's SeedSequence (numpy/random/bit_generator.pyx; its output is fixed across versions, NEP 19): the
# entropy's 32-bit words hashed into a pool of 4 words, then the pool hashed into the bit generator's seed.
_POOL = 4
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R, _SHIFT, _MASK = np.uint32(0xCA01F9DD), np.uint32(0x4973F715), np.uint32(16), 0xFFFFFFFF
#: PCG64 asks its seed sequence for 4 uint64 words
_PCG64_WORDS = 4


def _words(n: int) -> list[int]:
    """The uint32 words SeedSequence makes of a non-negative integer (least significant first; 0 is one word)."""
    out = [n & _MASK]
    n >>= 32
    while n:
        out.append(n & _MASK)
        n >>= 32
    return out


def _seed_words(entropy: np.ndarray, n_words: int) -> np.ndarray:
    """``SeedSequence(row).generate_state(n_words, np.uint64)`` of each row of ``entropy`` (uint32 words), vectorised over rows."""
    k, length = entropy.shape
    hash_const = _INIT_A

    def hashmix(value: np.ndarray) -> np.ndarray:
        nonlocal hash_const
        value = value ^ np.uint32(hash_const)
        hash_const = (hash_const * _MULT_A) & _MASK
        value = value * np.uint32(hash_const)
        return value ^ (value >> _SHIFT)

    def mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        result = _MIX_L * x - _MIX_R * y
        return result ^ (result >> _SHIFT)

    pool = [hashmix(entropy[:, i] if i < length else np.zeros(k, dtype=np.uint32)) for i in range(_POOL)]
    for src in range(_POOL):
        for dst in range(_POOL):
            if src != dst:
                pool[dst] = mix(pool[dst], hashmix(pool[src]))
    for src in range(_POOL, length):
        for dst in range(_POOL):
            pool[dst] = mix(pool[dst], hashmix(entropy[:, src]))
    out = np.empty((k, 2 * n_words), dtype=np.uint32)
    hash_const = _INIT_B
    for i in range(2 * n_words):
        value = pool[i % _POOL] ^ np.uint32(hash_const)
        hash_const = (hash_const * _MULT_B) & _MASK
        value = value * np.uint32(hash_const)
        out[:, i] = value ^ (value >> _SHIFT)
    return out.astype("<u4").view("<u8").astype(np.uint64)  # as SeedSequence: little-endian pairs of words


class _Seeded(ISeedSequence):
    """A seed sequence whose state is already computed (what :func:`rngs` hands PCG64)."""

    __slots__ = ("state",)

    def __init__(self, state: np.ndarray) -> None:
        self.state = state

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        if n_words != _PCG64_WORDS or np.dtype(dtype) != np.dtype(np.uint64):
            raise ValueError(f"precomputed for {_PCG64_WORDS} uint64 words, asked for {n_words} of {np.dtype(dtype)}")
        return self.state.copy()


def _tails(last: Sequence[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The keys of ``last`` as SeedSequence words, grouped by how many words each takes: ``[(rows, words (rows, width)), ...]``.
    Integer keys below 2**64 (a cohort's client ids, as a list or an array) are split into words as one array; any
    other key (text, a larger integer) one by one, as :func:`rng` does."""
    keys = np.asarray(last) if len(last) else np.zeros(0, dtype=np.uint64)
    if keys.ndim == 1 and keys.dtype.kind in "iu" and (not len(keys) or keys.min() >= 0):
        keys = keys.astype(np.uint64)
        words = np.stack([keys & np.uint64(_MASK), keys >> np.uint64(32)], axis=1).astype(np.uint32)
        wide = words[:, 1] > 0
        if not wide.any():
            return [(np.arange(len(keys)), words[:, :1])]
        return [(np.flatnonzero(~wide), words[~wide, :1]), (np.flatnonzero(wide), words[wide])]
    split = [_words(_key(x)) for x in last]
    by_width: dict[int, list[int]] = {}
    for i, w in enumerate(split):
        by_width.setdefault(len(w), []).append(i)
    return [(np.asarray(rows), np.asarray([split[i] for i in rows], dtype=np.uint32)) for rows in by_width.values()]


def rngs(seed: int, *parts: int | str, last: Sequence[int]) -> list[np.random.Generator]:
    """``[rng(seed, *parts, x) for x in last]``: the same generators, their seeds derived in one vectorised pass per
    key width (a cohort's clients: a few microseconds each instead of tens)."""
    head = np.asarray([w for part in (seed, *parts) for w in _words(_key(part))], dtype=np.uint32)
    out: list[Any] = [None] * len(last)
    for rows, tail in _tails(last):
        entropy = np.empty((len(rows), len(head) + tail.shape[1]), dtype=np.uint32)
        entropy[:, : len(head)] = head
        entropy[:, len(head) :] = tail
        for row, state in zip(rows.tolist(), _seed_words(entropy, _PCG64_WORDS)):
            seeded: Any = _Seeded(state)  # numpy's stubs name SeedSequence; PCG64 takes any ISeedSequence
            out[row] = np.random.Generator(np.random.PCG64(seeded))
    return out

"""Client selection: which of the online clients are asked to train this round.

A selector is any object with ``select(online, n, generator) -> indices``; ``online`` is the
sorted array of online client indices, ``generator`` a numpy Generator derived from
(seed, "selection", round), so a resumed run selects exactly the same cohorts.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from flamingo_sim.plugins import load_object


class Selector(Protocol):
    def select(self, online: np.ndarray, n: int, generator: np.random.Generator) -> np.ndarray:
        """Return ``n`` distinct entries of ``online``."""
        ...


class UniformSelector:
    """Uniformly at random, without replacement (FedScale's default)."""

    def select(self, online: np.ndarray, n: int, generator: np.random.Generator) -> np.ndarray:
        if n >= len(online):
            return np.asarray(online, dtype=np.int64).copy()
        return np.sort(generator.choice(online, size=n, replace=False)).astype(np.int64)


SELECTORS = {"uniform": UniformSelector}


def make_selector(name: str, source: str = "fl.selection") -> Selector:
    """A selector by registered name or ``package.module:Class`` import path."""
    if name in SELECTORS:
        return SELECTORS[name]()
    return load_object(name, source, kind="selector", known=SELECTORS)()

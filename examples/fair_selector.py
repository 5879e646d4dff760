"""Fair selection: a client selector in one file (docs/plugins.md).

Most of a round's slots go to the online clients selected least often so far (ties broken at
random); a share ``explore`` (a parameter read from the experiment's ``selector`` section) is
drawn uniformly among the rest. The counts are the selector's memory: ``state_dict`` puts them
in every checkpoint, so a resumed run selects the same cohorts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from flamingo_sim.config import check_ranges
from flamingo_sim.fl.strategy.base import CoordinatorView, Selector


@dataclass(frozen=True)
class FairParams:
    """Fair selection (``selector`` with ``fl.selection: fair_selector:FairSelector``)."""

    #: Share of the slots drawn uniformly among the online clients; the rest go to the least selected.
    explore: float = 0.25

    def __post_init__(self) -> None:
        check_ranges(self, explore="[0, 1]")


class FairSelector(Selector):
    """The least selected online clients first, plus a uniformly drawn share ``explore``."""

    Params = FairParams

    def __init__(self, explore: float = 0.25) -> None:
        self.explore = explore
        self.times = np.zeros(0, dtype=np.int64)  # how often each client was selected

    def select(self, online: np.ndarray, n: int, generator: np.random.Generator, view: CoordinatorView) -> np.ndarray:
        if len(self.times) < view.n_clients:
            self.times = np.concatenate([self.times, np.zeros(view.n_clients - len(self.times), dtype=np.int64)])
        if n >= len(online):
            chosen = np.asarray(online, dtype=np.int64).copy()
        else:
            n_random = int(round(self.explore * n))
            keys = self.times[online] + generator.random(len(online))  # fewest selections first, ties at random
            fair = online[np.argsort(keys)[: n - n_random]]
            rest = np.setdiff1d(online, fair)
            chosen = np.sort(np.concatenate([fair, generator.choice(rest, size=n_random, replace=False)])).astype(np.int64)
        self.times[chosen] += 1
        return chosen

    def state_dict(self) -> dict[str, Any]:
        return {"times": self.times.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.times = np.asarray(state["times"], dtype=np.int64).copy()

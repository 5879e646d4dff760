"""The contracts of the server's two plug-ins: who trains (:class:`Selector`) and how their
updates combine (:class:`Aggregator`), with the defaults of their optional parts.

A selector needs ``select``; ``observe``, ``state_dict`` and ``load_state_dict`` are optional
and default to doing nothing (a stateless selector). An aggregator needs ``aggregate``;
``proximal_mu`` (the FedProx term clients add to their local loss) defaults to 0, and
``state_dict``/``load_state_dict`` (a server optimiser's memory, kept in checkpoints) to
nothing. Subclass the contract to inherit the defaults; the factories
(:func:`~flamingo_sim.fl.strategy.selection.make_selector`,
:func:`~flamingo_sim.fl.strategy.aggregators.make_aggregator`) also give them to a plug-in that
lacks them (:data:`SELECTOR`, :data:`AGGREGATOR`).

A plug-in's parameters come from its YAML section (``selector:``; ``aggregation:`` besides
``name`` and ``weighting``), checked by the ``Params`` dataclass it declares, whose fields are
passed to its constructor as keywords. This module imports neither torch nor the shipped
implementations, so that a config is checked without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

import numpy as np

from flamingo_sim.plugins import Contract

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["CoordinatorView", "Selector", "Aggregator", "SELECTOR", "AGGREGATOR"]


class CoordinatorView:
    """What the coordinator knows at selection time: the round, the offline threshold and the
    battery level (percent, effective: training drains it) each client reports.

    Give the levels either as an array over every client (``battery_pct``) or as a reader
    ``level_pct_at(clients)`` plus ``n_clients``: the round loop does the latter, so that a round
    at 1,000,000 clients does not build a million-entry array unless a selector asks for
    :attr:`battery_pct` (built once, on first use). Selectors that need a few clients' levels
    call :meth:`battery_pct_at`.
    """

    #: The round being selected for, from 1 (FedBuff: the next server update).
    round: int
    #: The battery level (%) below which a client goes offline (``traces.min_pct``).
    min_pct: float
    #: Clients in the population (``battery_pct`` has one entry each).
    n_clients: int

    def __init__(
        self,
        round: int,
        battery_pct: np.ndarray | None = None,
        min_pct: float = 10.0,
        *,
        level_pct_at: Callable[[np.ndarray], np.ndarray] | None = None,
        n_clients: int | None = None,
    ) -> None:
        if (battery_pct is None) == (level_pct_at is None):
            raise ValueError("CoordinatorView needs battery_pct or level_pct_at (exactly one)")
        if level_pct_at is not None and n_clients is None:
            raise ValueError("CoordinatorView: level_pct_at needs n_clients")
        self.round = int(round)
        self.min_pct = float(min_pct)
        self._battery_pct = None if battery_pct is None else np.asarray(battery_pct, dtype=np.float64)
        self._level_pct_at = level_pct_at
        self.n_clients = int(n_clients) if n_clients is not None else len(self._battery_pct)  # type: ignore[arg-type]

    @property
    def battery_pct(self) -> np.ndarray:
        """Effective battery level of every client, in [0, 100]."""
        if self._battery_pct is None:
            assert self._level_pct_at is not None
            self._battery_pct = self._level_pct_at(np.arange(self.n_clients))
        return self._battery_pct

    def battery_pct_at(self, clients: np.ndarray) -> np.ndarray:
        """Effective battery level of ``clients`` only."""
        if self._battery_pct is not None:
            return self._battery_pct[clients]
        assert self._level_pct_at is not None
        return self._level_pct_at(np.asarray(clients, dtype=np.int64))


class Selector(Protocol):
    """Picks the clients asked to train in a round; subclass it for the optional parts' defaults."""

    def select(self, online: np.ndarray, n: int, generator: np.random.Generator, view: CoordinatorView) -> np.ndarray:
        """Return at most ``n`` unique online integer client ids: distinct entries of ``online`` (the sorted online
        client indices), an integer array of length ``m <= n``, sorted. Checked every round
        (:func:`~flamingo_sim.fl.strategy.selection.check_selection`): anything else stops the run in one line.

        ``generator`` derives from (seed, "selection", round): a resumed run draws the same cohorts."""
        ...

    def observe(self, round: int, clients: np.ndarray, n_samples: np.ndarray, train_loss: np.ndarray, duration_s: np.ndarray) -> None:
        """Optional: what arrived with the kept clients' updates after ``round``. Default: nothing."""
        return None

    def state_dict(self) -> dict[str, Any]:
        """Optional: the selector's memory, saved in checkpoints. Default: none (``{}``)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Optional: restore what :meth:`state_dict` returned. Default: nothing."""
        return None


class Aggregator(Protocol):
    """Turns a round's client states into the next global model; subclass it for the optional parts' defaults."""

    #: Optional: weight of the proximal term mu/2 ||w - w_global||^2 clients add to their local loss. Default: 0 (none).
    proximal_mu: float = 0.0

    def aggregate(self, global_state: dict[str, Tensor], stacked: dict[str, Tensor], n_samples: Tensor) -> dict[str, Tensor]:
        """The next global state from the current one and the clients' states (stacked along a first
        dimension, one entry per client, with their sample counts ``n_samples``): a dict with every entry of
        ``global_state``, each a tensor of the same shape and dtype, all values finite. Checked every round
        (:func:`~flamingo_sim.fl.strategy.aggregators.check_aggregate`): anything else stops the run in one line."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Optional: the server optimiser's memory, saved in checkpoints. Default: none (``{}``)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Optional: restore what :meth:`state_dict` returned. Default: nothing."""
        return None


#: The selector extension point (entry-point group ``flamingo_sim.selectors``).
SELECTOR = Contract("selector", Selector, required=("select",), optional=("observe", "state_dict", "load_state_dict"))
#: The aggregator extension point (entry-point group ``flamingo_sim.aggregators``).
AGGREGATOR = Contract("aggregator", Aggregator, required=("aggregate",), optional=("proximal_mu", "state_dict", "load_state_dict"))

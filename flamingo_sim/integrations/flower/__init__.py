"""flamingo-sim's phones inside Flower: who is online, what a task costs, which updates count.

Flower's simulation engine treats every client as always online, instantly fast and free to
run. This package puts flamingo-sim's coordinator rules between a Flower ``ServerApp`` and its
strategy, the way :mod:`flamingo_sim.integrations.fedscale` does for FedScale: each round is
planned by :meth:`Simulation.plan_round <flamingo_sim.fl.sim.simulation.Simulation.plan_round>`
(battery traces and energy budgets say who is online, the experiment's selector picks, every
selected phone's task is priced by its profile and the policy, declines, drop-outs, the deadline
and the K fastest settle the round) and closed by
:meth:`~flamingo_sim.fl.sim.simulation.Simulation.finish_round` (virtual clock, batteries, clients
lost, the owners' UX figures), so a Flower run writes the same ``metrics.parquet`` as a native one.

- :class:`~flamingo_sim.integrations.flower.strategy.FlamingoStrategy` wraps a Flower Message
  API strategy (``flwr.serverapp.strategy.FedAvg``, ``FedProx``, ``FedAdam``, ...) in a user's
  own Flower app, whose ``ClientApp`` needs nothing from flamingo-sim: a node stands for the
  flamingo-sim client of its ``partition-id`` where the app answers the partition query
  (:func:`~flamingo_sim.integrations.flower.client.register_partition_query`, optional: it fixes
  the map between runs), else for one in node-id order; federated evaluation is refused (not
  priced), the server evaluates;
- :class:`~flamingo_sim.integrations.flower.engine.FlowerEngine` is ``flamingo-sim run
  --engine flower`` (:func:`~flamingo_sim.integrations.flower.simulation.run_flower`): a shipped
  experiment through Flower's simulation engine, its model trained on its data by
  :data:`~flamingo_sim.integrations.flower.client.experiment_client_app`.

- :mod:`~flamingo_sim.integrations.flower.grid` the grid the strategy runs Flower's round loop on (stoppable, and the inner strategy's view).

Flower is imported only when one of these is used (``pip install 'flamingo-sim[flower]'``);
:func:`load_flower` says what to install when it is missing.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from flamingo_sim.errors import FlamingoError

INSTALL_HINT = "pip install 'flamingo-sim[flower]'"
#: What ``load_flower`` needs (import name -> pip package).
REQUIRED = {"flwr": "flwr[simulation]", "ray": "flwr[simulation]"}
#: Names importable from this package, imported (with Flower) on first use.
LAZY = {
    "FlamingoStrategy": "flamingo_sim.integrations.flower.strategy",
    "register_partition_query": "flamingo_sim.integrations.flower.client",
    "experiment_client_app": "flamingo_sim.integrations.flower.client",
    "run_flower": "flamingo_sim.integrations.flower.simulation",
}

__all__ = ["INSTALL_HINT", "FlowerUnavailable", "flower_available", "load_flower", *LAZY]


class FlowerUnavailable(FlamingoError):
    """Flower (with its Ray simulation engine) is not installed."""


def _missing() -> list[str]:
    missing = []
    for mod, pkg in REQUIRED.items():
        if importlib.util.find_spec(mod) is None and pkg not in missing:
            missing.append(pkg)
    return missing


def flower_available() -> bool:
    """Whether Flower and its simulation engine (Ray) can be imported."""
    return not _missing()


def load_flower() -> Any:
    """The ``flwr`` package; :class:`FlowerUnavailable`, one line with the install command, if it or Ray is missing."""
    missing = _missing()
    if missing:
        raise FlowerUnavailable(f"the Flower engine needs {', '.join(missing)}, which is not installed: {INSTALL_HINT}")
    return importlib.import_module("flwr")


def __getattr__(name: str) -> Any:  # FlamingoStrategy etc. on first use, importing Flower then
    if name in LAZY:
        load_flower()
        return getattr(importlib.import_module(LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

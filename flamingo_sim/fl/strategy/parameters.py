"""The shipped aggregators' parameters (their ``Params`` dataclasses), in a module without torch, so
that the configuration reference and a config check do not import it."""

from __future__ import annotations

from dataclasses import dataclass

from flamingo_sim.config import check_ranges

__all__ = ["FedProxParams", "ServerOptimizerParams", "AGGREGATOR_PARAMS"]


@dataclass(frozen=True)
class FedProxParams:
    """FedProx's parameter (``aggregation:`` with ``name: fedprox``)."""

    #: Weight of the proximal term mu/2 ||w - w_global||^2 in the clients' local loss.
    mu: float = 0.01

    def __post_init__(self) -> None:
        check_ranges(self, mu=">= 0, float32")


@dataclass(frozen=True)
class ServerOptimizerParams:
    """FedAdam's and FedYogi's parameters (``aggregation:`` with ``name: fedadam`` or ``fedyogi``)."""

    #: Server learning rate.
    server_lr: float = 0.01
    #: First-moment decay.
    beta1: float = 0.9
    #: Second-moment decay.
    beta2: float = 0.99
    #: Adaptivity, the epsilon of the update.
    tau: float = 1e-3

    def __post_init__(self) -> None:
        check_ranges(self, server_lr="> 0, float32", beta1="[0, 1)", beta2="[0, 1)", tau="> 0, float32")


#: Each shipped aggregator's ``Params`` (None: no parameters besides ``weighting``).
AGGREGATOR_PARAMS: dict[str, type | None] = {
    "fedavg": None, "fedprox": FedProxParams, "fedadam": ServerOptimizerParams, "fedyogi": ServerOptimizerParams}

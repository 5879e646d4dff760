"""Aggregators: how the server turns a round's client states into the next global model.

An aggregator is any object with the :class:`Aggregator` protocol: ``aggregate`` (a new global
state from the old one and the stacked client states), ``proximal_mu`` (the FedProx term the
clients add to their local loss; 0 for none), and ``state_dict``/``load_state_dict`` (the
server optimiser's moments, saved in every checkpoint so that a resumed run is bit-identical).
The arithmetic is in :mod:`flamingo_sim.fl.strategy.aggregate` (pure functions); the classes here hold
state and parameters only.

Registered names (the experiment's ``aggregation:`` section names one, with its parameters):

========== ============================================== ==========================================
name       what                                           parameters (default)
========== ============================================== ==========================================
fedavg     mean of client states (McMahan et al. 2017)    weighting (samples)
fedprox    fedavg + proximal term mu/2 ||w - w_global||^2  weighting, mu (0.01)
           in local training (Li et al. 2020)
fedadam    Adam on the server (Reddi et al. 2021)         weighting, server_lr (0.01), beta1 (0.9),
                                                          beta2 (0.99), tau (0.001)
fedyogi    Yogi on the server (Reddi et al. 2021;         as fedadam
           FedScale's benchmark configs use it)
========== ============================================== ==========================================

``weighting: samples`` weights clients by their sample counts, ``uniform`` is the plain mean
(FedScale's). The server optimisers act on floating-point parameters; buffers (BatchNorm
running statistics) and integer entries take the weighted mean. Their second moment starts
at ``tau**2`` and the first at zero, as in Reddi et al.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

import torch
from torch import Tensor

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.strategy.aggregate import fedavg, server_adam_step, server_yogi_step
from flamingo_sim.fl.strategy.parameters import AGGREGATOR_PARAMETERS
from flamingo_sim.plugins import load_object

__all__ = ["Aggregator", "FedAvg", "FedProx", "FedAdam", "FedYogi", "AGGREGATORS", "PARAMETERS", "make_aggregator"]


class Aggregator(Protocol):
    proximal_mu: float

    def aggregate(self, global_state: dict[str, Tensor], stacked: dict[str, Tensor], n_samples: Tensor) -> dict[str, Tensor]:
        """The next global state from the current one and the clients' (stacked) states."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def _weights(weighting: str, n_samples: Tensor | Sequence[float]) -> Tensor:
    w = torch.as_tensor(n_samples, dtype=torch.float64)
    return w if weighting == "samples" else torch.ones_like(w)


class FedAvg:
    """The (sample-weighted or plain) mean of the client states; stateless."""

    proximal_mu = 0.0

    def __init__(self, weighting: str = "samples", buffers: Sequence[str] = ()) -> None:
        self.weighting = weighting

    def aggregate(self, global_state: dict[str, Tensor], stacked: dict[str, Tensor], n_samples: Tensor) -> dict[str, Tensor]:
        return fedavg(stacked, _weights(self.weighting, n_samples))

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


class FedProx(FedAvg):
    """FedAvg on the server; the clients add ``mu/2 ||w - w_global||^2`` to their local loss."""

    def __init__(self, mu: float = 0.01, weighting: str = "samples", buffers: Sequence[str] = ()) -> None:
        super().__init__(weighting)
        self.proximal_mu = float(mu)


StepFn = Callable[..., tuple[Tensor, Tensor, Tensor]]


class _ServerOptimizer:
    """Shared body of FedAdam and FedYogi: moments per floating-point parameter."""

    proximal_mu = 0.0
    step_fn: StepFn

    def __init__(
        self,
        server_lr: float = 0.01,
        beta1: float = 0.9,
        beta2: float = 0.99,
        tau: float = 1e-3,
        weighting: str = "samples",
        buffers: Sequence[str] = (),
    ) -> None:
        self.hyper = {"server_lr": float(server_lr), "beta1": float(beta1), "beta2": float(beta2), "tau": float(tau)}
        self.weighting = weighting
        self.buffers = frozenset(buffers)
        self.m: dict[str, Tensor] = {}
        self.v: dict[str, Tensor] = {}

    def aggregate(self, global_state: dict[str, Tensor], stacked: dict[str, Tensor], n_samples: Tensor) -> dict[str, Tensor]:
        mean = fedavg(stacked, _weights(self.weighting, n_samples))
        out: dict[str, Tensor] = {}
        tau = self.hyper["tau"]
        for name, avg in mean.items():
            x = global_state[name]
            if name in self.buffers or not x.dtype.is_floating_point:
                out[name] = avg
                continue
            m = self.m[name].to(x.device) if name in self.m else torch.zeros_like(x)
            v = self.v[name].to(x.device) if name in self.v else torch.full_like(x, tau * tau)
            out[name], self.m[name], self.v[name] = type(self).step_fn(x, avg - x, m, v, **self.hyper)
        return out

    def state_dict(self) -> dict[str, Any]:
        """The moments as CPU tensors (a checkpoint loads on any device; :meth:`aggregate` moves them back)."""
        return {"m": {k: t.detach().cpu().clone() for k, t in self.m.items()}, "v": {k: t.detach().cpu().clone() for k, t in self.v.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.m = {k: t.clone() for k, t in state["m"].items()}
        self.v = {k: t.clone() for k, t in state["v"].items()}


class FedAdam(_ServerOptimizer):
    """Adam on the server over the round's pseudo-gradient."""

    step_fn = staticmethod(server_adam_step)


class FedYogi(_ServerOptimizer):
    """Yogi on the server over the round's pseudo-gradient."""

    step_fn = staticmethod(server_yogi_step)


AGGREGATORS: dict[str, type] = {"fedavg": FedAvg, "fedprox": FedProx, "fedadam": FedAdam, "fedyogi": FedYogi}

#: The parameters each registered aggregator takes besides ``weighting``, with their defaults.
PARAMETERS = AGGREGATOR_PARAMETERS


def make_aggregator(cfg: Any, buffers: Sequence[str] = (), source: str = "aggregation") -> Aggregator:
    """An aggregator from the experiment's ``aggregation`` section (:class:`~flamingo_sim.fl.config.AggregationConfig`).

    ``buffers``: the model's buffer names (averaged, never stepped by a server optimiser).
    A ``package.module:Class`` name is called with the parameters that are set, ``weighting``
    and ``buffers``.
    """
    params = cfg.parameters()
    if cfg.name in AGGREGATORS:
        return AGGREGATORS[cfg.name](**params, weighting=cfg.weighting, buffers=tuple(buffers))
    cls = load_object(cfg.name, f"{source}.name", kind="aggregator", known=AGGREGATORS)
    try:
        return cls(**params, weighting=cfg.weighting, buffers=tuple(buffers))
    except TypeError as exc:
        raise ConfigError(f"{source}: aggregator {cfg.name!r} cannot be built with {sorted(params)} ({exc})") from None

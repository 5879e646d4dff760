"""Aggregators: how the server turns a round's client states into the next global model; the shipped ones.

An aggregator has the :class:`~flamingo_sim.fl.strategy.base.Aggregator` contract: ``aggregate`` (a new global
state from the old one and the stacked client states), the optional ``proximal_mu`` (the FedProx term the
clients add to their local loss; default 0), and ``state_dict``/``load_state_dict`` (the
server optimiser's moments, saved in every checkpoint so that a resumed run is bit-identical).
The arithmetic is in :mod:`flamingo_sim.fl.strategy.aggregate` (pure functions); the classes here hold
state and parameters only.

Registered names (the experiment's ``aggregation:`` section names one, with its parameters, checked
by its ``Params`` in :mod:`flamingo_sim.fl.strategy.parameters`; :func:`make_aggregator` also finds
import paths and entry points):

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

The engines aggregate through :func:`checked_aggregate`, which holds what comes back to the
contract (:func:`check_aggregate`: the global state's entries, shapes and dtypes, finite values).

``weighting: samples`` weights clients by their sample counts, ``uniform`` is the plain mean
(FedScale's). The server optimisers act on floating-point parameters; buffers (BatchNorm
running statistics) and integer entries take the weighted mean. Their second moment starts
at ``tau**2`` and the first at zero, as in Reddi et al.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
from torch import Tensor

from flamingo_sim.errors import PluginError
from flamingo_sim.fl.strategy.aggregate import fedavg, server_adam_step, server_yogi_step
from flamingo_sim.fl.strategy.base import AGGREGATOR, Aggregator
from flamingo_sim.fl.strategy.parameters import FedProxParams, ServerOptimizerParams
from flamingo_sim.plugins import Registry, plugin_label

__all__ = ["Aggregator", "FedAvg", "FedProx", "FedAdam", "FedYogi", "AGGREGATORS", "make_aggregator", "checked_aggregate",
           "check_aggregate"]


def _weights(weighting: str, n_samples: Tensor | Sequence[float]) -> Tensor:
    w = torch.as_tensor(n_samples, dtype=torch.float64)
    return w if weighting == "samples" else torch.ones_like(w)


class FedAvg(Aggregator):
    """The (sample-weighted or plain) mean of the client states; stateless."""

    def __init__(self, weighting: str = "samples", buffers: Sequence[str] = ()) -> None:
        self.weighting = weighting

    def aggregate(self, global_state: dict[str, Tensor], stacked: dict[str, Tensor], n_samples: Tensor) -> dict[str, Tensor]:
        return fedavg(stacked, _weights(self.weighting, n_samples))


class FedProx(FedAvg):
    """FedAvg on the server; the clients add ``mu/2 ||w - w_global||^2`` to their local loss."""

    Params = FedProxParams

    def __init__(self, mu: float = 0.01, weighting: str = "samples", buffers: Sequence[str] = ()) -> None:
        super().__init__(weighting)
        self.proximal_mu = float(mu)


StepFn = Callable[..., tuple[Tensor, Tensor, Tensor]]


class _ServerOptimizer(Aggregator):
    """Shared body of FedAdam and FedYogi: moments per floating-point parameter."""

    Params = ServerOptimizerParams
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


#: The shipped aggregators by name; import paths and entry points (group ``flamingo_sim.aggregators``) find the rest.
AGGREGATORS = Registry(AGGREGATOR, {"fedavg": FedAvg, "fedprox": FedProx, "fedadam": FedAdam, "fedyogi": FedYogi})


def make_aggregator(cfg: Any, buffers: Sequence[str] = (), source: str = "", *, search: Sequence[Path] = ()) -> Aggregator:
    """An aggregator from the experiment's ``aggregation`` section (:class:`~flamingo_sim.fl.config.AggregationConfig`).

    ``buffers``: the model's buffer names (averaged, never stepped by a server optimiser).
    The aggregator is built with the section's parameters (checked by its ``Params``) and, where
    its constructor takes them, ``weighting`` and ``buffers``; ``source`` is the experiment file
    the errors name, ``search`` folders for an import path's module.
    """

    def extra(cls: Callable[..., Any]) -> dict[str, Any]:
        try:
            takes = inspect.signature(cls).parameters
        except (TypeError, ValueError):
            takes = {}  # type: ignore[assignment]
        anything = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in takes.values())
        given = {"weighting": cfg.weighting, "buffers": tuple(buffers)}
        return {k: v for k, v in given.items() if anything or k in takes}

    aggregator: Aggregator = AGGREGATORS.build(cfg.name, cfg.parameters(), source=source, key="aggregation.name", params_key="aggregation",
                                               search=search, extra=extra)
    return aggregator


def checked_aggregate(aggregator: Aggregator, global_state: dict[str, Tensor], stacked: dict[str, Tensor], n_samples: Tensor,
                      round: int | None = None) -> dict[str, Tensor]:
    """``aggregator.aggregate(global_state, stacked, n_samples)``, held to the contract (:func:`check_aggregate`)
    before any engine makes it the global model; ``round`` only names the round in the error."""
    return check_aggregate(aggregator, global_state, aggregator.aggregate(global_state, stacked, n_samples), round)


def check_aggregate(aggregator: Any, global_state: Mapping[str, Tensor], result: Any, round: int | None = None) -> dict[str, Tensor]:
    """``result`` as it came when it has ``global_state``'s entries, each a tensor of the same shape and
    dtype, all values finite; else a :class:`~flamingo_sim.errors.PluginError` line naming the aggregator,
    the contract and what came back. The values are read once, summed (non-finite where one is), with
    one synchronisation per device and dtype; ``isfinite`` runs only when a sum is not finite."""
    problem = _aggregate_problem(global_state, result)
    if problem is None:
        return result
    at = f" at round {round}" if round is not None else ""
    raise PluginError(f"aggregator {plugin_label(aggregator)!r} broke its contract{at}: aggregate must return the global state's "
                      f"{len(global_state)} entries with their shapes and dtypes, all values finite, got {problem}")


def _aggregate_problem(global_state: Mapping[str, Tensor], result: Any) -> str | None:
    if not isinstance(result, Mapping):
        return "None" if result is None else f"a {type(result).__name__}"
    if result.keys() != global_state.keys():
        missing = [k for k in global_state if k not in result]
        extra = [k for k in result if k not in global_state]
        said = [f"{len(missing)} missing (e.g. {', '.join(map(repr, missing[:3]))})"] if missing else []
        said += [f"{len(extra)} unexpected (e.g. {', '.join(map(repr, extra[:3]))})"] if extra else []
        return f"{len(result)} entries, " + ", ".join(said)
    sums: dict[tuple[torch.device, torch.dtype], list[Tensor]] = {}
    for name, want in global_state.items():
        got = result[name]
        if not isinstance(got, Tensor):
            return f"{name!r} as a {type(got).__name__}"
        if got.shape != want.shape:
            return f"{name!r} of shape {tuple(got.shape)}, not {tuple(want.shape)}"
        if got.dtype != want.dtype:
            return f"{name!r} as {got.dtype}, not {want.dtype}"
        if got.is_floating_point() or got.is_complex():  # a NaN or an infinity makes the sum non-finite
            sums.setdefault((got.device, got.dtype), []).append(got.sum())
    if all(bool(torch.stack(group).isfinite().all()) for group in sums.values()):
        return None
    for name, got in result.items():  # which (a sum of finite values may also overflow: then none is found)
        if (got.is_floating_point() or got.is_complex()) and not bool(torch.isfinite(got).all()):
            bad = got[~torch.isfinite(got)]
            kinds = ", ".join(sorted({str(v) for v in bad.flatten()[:1000].tolist()}))
            return f"{name!r} with {bad.numel()} non-finite values ({kinds})"
    return None

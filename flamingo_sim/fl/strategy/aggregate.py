"""Aggregation of client updates: pure functions of stacked client states.

A stacked state maps each parameter/buffer name to a tensor whose leading dimension is the
client (what :class:`flamingo_sim.fl.training.trainer.CohortResult` carries). The stateful server
optimisers (:mod:`flamingo_sim.fl.strategy.aggregators`) are built from these functions.

Server optimisers follow Reddi et al., "Adaptive Federated Optimization" (ICLR 2021): the
pseudo-gradient of a round is ``delta = mean_i(client_i) - global`` (a step in the descent
direction), and with moments ``m`` and ``v``::

    m'      = beta1 * m + (1 - beta1) * delta
    v' Adam = beta2 * v + (1 - beta2) * delta**2
    v' Yogi = v - (1 - beta2) * delta**2 * sign(v - delta**2)
    global' = global + server_lr * m' / (sqrt(v') + tau)

without bias correction, as in the paper.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

__all__ = ["fedavg", "server_adam_step", "server_yogi_step", "staleness_weights", "fedbuff_step"]


def fedavg(stacked_params: dict[str, Tensor], weights: Tensor | Sequence[float]) -> dict[str, Tensor]:
    """The weighted mean over clients of every entry: ``sum_i w_i p_i / sum_i w_i``.

    FedAvg weights clients by their sample counts; equal weights give FedScale's plain mean.
    Computed in float64 and returned in each entry's dtype; integer entries (such as
    BatchNorm's ``num_batches_tracked``) are rounded to the nearest integer.
    """
    w = torch.as_tensor(weights, dtype=torch.float64).flatten()
    if w.numel() == 0:
        raise ValueError("no clients to aggregate")
    if not torch.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"weights must be finite and non-negative, got {w.tolist()}")
    total = float(w.sum())
    if total <= 0:
        raise ValueError("weights sum to zero")
    k = w.numel()
    out: dict[str, Tensor] = {}
    for name, value in stacked_params.items():
        if value.dim() == 0 or value.shape[0] != k:
            raise ValueError(f"{name}: expected a leading client dimension of {k}, got shape {tuple(value.shape)}")
        wd = (w / total).to(value.device)
        mean = torch.tensordot(wd, value.to(torch.float64), dims=1)
        if value.dtype.is_floating_point or value.dtype.is_complex:
            out[name] = mean.to(value.dtype)
        else:
            out[name] = torch.round(mean).to(value.dtype)
    return out


def _check_moments(x: Tensor, delta: Tensor, m: Tensor, v: Tensor) -> None:
    if not (x.shape == delta.shape == m.shape == v.shape):
        raise ValueError(f"shapes differ: global {tuple(x.shape)}, delta {tuple(delta.shape)}, m {tuple(m.shape)}, v {tuple(v.shape)}")


def server_adam_step(
    x: Tensor, delta: Tensor, m: Tensor, v: Tensor, *, server_lr: float, beta1: float, beta2: float, tau: float
) -> tuple[Tensor, Tensor, Tensor]:
    """One FedAdam server step; returns new ``(global, m, v)`` (inputs are not modified)."""
    _check_moments(x, delta, m, v)
    m_new = beta1 * m + (1.0 - beta1) * delta
    v_new = beta2 * v + (1.0 - beta2) * delta * delta
    return x + server_lr * m_new / (torch.sqrt(v_new) + tau), m_new, v_new


def server_yogi_step(
    x: Tensor, delta: Tensor, m: Tensor, v: Tensor, *, server_lr: float, beta1: float, beta2: float, tau: float
) -> tuple[Tensor, Tensor, Tensor]:
    """One FedYogi server step; returns new ``(global, m, v)`` (inputs are not modified).

    Yogi's second moment moves additively towards ``delta**2``, so a single large
    pseudo-gradient cannot shrink the step size as fast as Adam's average does.
    """
    _check_moments(x, delta, m, v)
    m_new = beta1 * m + (1.0 - beta1) * delta
    sq = delta * delta
    v_new = v - (1.0 - beta2) * sq * torch.sign(v - sq)
    return x + server_lr * m_new / (torch.sqrt(v_new) + tau), m_new, v_new


def staleness_weights(staleness: Sequence[int] | Tensor, exponent: float) -> Tensor:
    """FedBuff's polynomial staleness weights ``(1 + tau) ** -exponent`` (float64).

    ``tau`` is how many server model versions were made while the client trained.
    """
    tau = torch.as_tensor(staleness, dtype=torch.float64)
    if (tau < 0).any():
        raise ValueError(f"staleness must be >= 0, got {tau.tolist()}")
    return (1.0 + tau) ** (-float(exponent))


def fedbuff_step(global_state: dict[str, Tensor], stacked_deltas: dict[str, Tensor], weights: Tensor, server_lr: float) -> dict[str, Tensor]:
    """FedBuff's server update over a full buffer of ``M`` client deltas (Nguyen et al. 2022)::

        global' = global + server_lr * sum_i w_i * delta_i / M

    ``delta_i`` = the client's trained model minus the model it started from; ``w_i`` its
    staleness weight. Integer entries are rounded to the nearest integer.
    """
    w = torch.as_tensor(weights, dtype=torch.float64).flatten()
    m = w.numel()
    if m == 0:
        raise ValueError("no deltas to apply")
    out: dict[str, Tensor] = {}
    for name, x in global_state.items():
        d = stacked_deltas[name]
        if d.shape != (m, *x.shape):
            raise ValueError(f"{name}: expected deltas of shape {(m, *x.shape)}, got {tuple(d.shape)}")
        new = x.to(torch.float64) + server_lr * torch.tensordot(w / m, d.to(torch.float64), dims=1)
        out[name] = new.to(x.dtype) if x.dtype.is_floating_point else torch.round(new).to(x.dtype)
    return out

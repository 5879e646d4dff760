"""Aggregation of client updates: pure functions of stacked client states.

A stacked state maps each parameter/buffer name to a tensor whose leading dimension is the
client (what :class:`flamingo_sim.fl.training.CohortResult` carries).
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

__all__ = ["fedavg"]


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

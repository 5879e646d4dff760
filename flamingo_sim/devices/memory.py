"""Whether a client's training fits its phone's memory, and the largest minibatch that does.

A phone's memory (:class:`PhoneMemory`, in the phone catalogue): its RAM and the memory one
background training process may hold before Android's low-memory killer ends it
(``app_limit_gb``). A task's training memory per client is ``fixed + per_sample x batch``
(the state counted four times over, the activations twice per sample:
:func:`flamingo_sim.fl.training.memory.per_client_bytes`, the estimator the engine already uses
to size its chunks). :func:`largest_batch` gives the largest batch that fits a limit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flamingo_sim.config import check_ranges

__all__ = ["PhoneMemory", "largest_batch", "GIB"]

GIB = float(1 << 30)


@dataclass(frozen=True)
class PhoneMemory:
    """A phone model's RAM and the memory one background training process may hold."""

    #: RAM (GB as sold, 10^9 bytes) of the base model, the vendor's specification.
    ram_gb: float
    #: Memory (GB, 10^9 bytes) one background process may hold before the low-memory killer ends it.
    app_limit_gb: float

    def __post_init__(self) -> None:
        check_ranges(self, ram_gb="> 0", app_limit_gb="> 0")
        if self.app_limit_gb > self.ram_gb:
            raise ValueError(f"app_limit_gb ({self.app_limit_gb}) must not exceed ram_gb ({self.ram_gb})")

    @property
    def app_limit_bytes(self) -> float:
        return self.app_limit_gb * 1e9


def largest_batch(limit_bytes: np.ndarray | float, fixed_bytes: float, per_sample_bytes: float, batch_size: int) -> np.ndarray:
    """The largest minibatch ``<= batch_size`` whose training fits ``limit_bytes`` (0: none fits)."""
    limit = np.asarray(limit_bytes, dtype=float)
    if per_sample_bytes <= 0:
        return np.where(limit >= fixed_bytes, batch_size, 0).astype(np.int64)
    fit = np.floor((limit - fixed_bytes) / per_sample_bytes)
    return np.clip(fit, 0, batch_size).astype(np.int64)

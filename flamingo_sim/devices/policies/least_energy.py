"""A third execution policy: the least-energy choice that fits, pinned, no feedback (``least_energy``).

It borrows the *rule* of Android's Energy-Aware Scheduler (a task fits CPUs whose capacity
exceeds its utilisation by 25 %, ``CAPACITY_MARGIN`` = 80 %: Linux's 1280/1024 margin, and
among those EAS picks what its energy model says costs least), but applies it to Flamingo's own
profiles, which the kernel never sees: for a local-training task on a phone whose execution
choices are profiled (:class:`~flamingo_sim.devices.profiles.ProfileSet`),

- a choice *fits* when its throughput is at least ``margin`` times the phone's fastest choice,
  ``step_latency_s <= fastest_latency_s / margin``;
- every task runs pinned on the fitting choice with the least energy per step
  (``step_latency_s x power_w``), chosen once per phone model from the whole state space.

It accepts every request (no battery or temperature monitoring) and has no interference
feedback. It is an oracle of energy-aware *pinning*, not the kernel's EAS (it was called
``eas`` before): the kernel's EAS places threads by per-CPU utilisation and capacity, and while
training keeps a CPU above 80 % of its capacity EAS steps aside for the load balancer
(``Documentation/scheduler/sched-energy.rst``). PyTorch's default as stock Android runs it,
Table 3's baseline, is the ``baseline`` policy under the ``android`` interference model
(:mod:`flamingo_sim.devices.scheduling`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flamingo_sim.config import check_ranges
from flamingo_sim.devices.policies.base import PolicyConfig, PricedPolicy, TaskOutcome, TaskRequest
from flamingo_sim.devices.profiles import ProfileSet

__all__ = ["LeastEnergyPolicy", "LeastEnergyParams", "CAPACITY_MARGIN", "least_energy_choice"]

#: A task fits on CPUs whose capacity exceeds its utilisation by 25 % (utilisation <= 80 %).
CAPACITY_MARGIN = 0.8


def least_energy_choice(latency_s: np.ndarray, power_w: np.ndarray, margin: float = CAPACITY_MARGIN) -> int:
    """Index of the policy's choice among one phone's choices (NaN = padding): least energy per step among those that fit."""
    lat = np.asarray(latency_s, dtype=np.float64)
    energy = lat * np.asarray(power_w, dtype=np.float64)
    valid = np.isfinite(lat)
    fits = valid & (lat <= np.nanmin(lat) / margin)
    return int(np.flatnonzero(fits)[np.argmin(energy[fits])])


@dataclass(frozen=True)
class LeastEnergyParams:
    """The policy's parameters (``policy_params.least_energy``)."""

    #: A choice fits when its step latency is at most the phone's fastest divided by this (Linux's 1024/1280 = 0.8).
    margin: float = CAPACITY_MARGIN

    def __post_init__(self) -> None:
        check_ranges(self, margin="(0, 1]")


class LeastEnergyPolicy(PricedPolicy):
    """The cheapest choice that fits, pinned, every request, no feedback (module docstring)."""

    name = "least_energy"
    Params = LeastEnergyParams

    def __init__(self, config: PolicyConfig | None = None, margin: float = CAPACITY_MARGIN) -> None:
        super().__init__(config)
        if not 0 < margin <= 1:
            raise ValueError(f"margin must be in (0, 1], got {margin}")
        self.margin = float(margin)

    def init(self, n_clients: int, phone_idx: np.ndarray, profile_set: ProfileSet) -> None:
        super().init(n_clients, phone_idx, profile_set)
        ps = profile_set
        pos = np.array([least_energy_choice(ps.space_latency_s[p], ps.space_power_w[p], self.margin) for p in range(ps.n_phones)], dtype=np.int64)
        rows = np.arange(ps.n_phones)
        self.choice_latency_s = ps.space_latency_s[rows, pos]
        self.choice_power_w = ps.space_power_w[rows, pos]
        self.choice_label_idx = ps.space_label_idx[rows, pos]

    def run_tasks(self, request: TaskRequest) -> TaskOutcome:
        return self.run_fixed(request, self.choice_latency_s, self.choice_power_w, self.choice_label_idx, self.name)

"""A third execution policy: Android's Energy-Aware Scheduler, as the paper compared it.

Android's EAS places a task on the CPUs that can carry its utilisation with headroom (the task
fits when its utilisation is below ``CAPACITY_MARGIN`` = 80 % of the capacity: Linux's
1280/1024 margin) and, among those, on the ones its energy model says cost least. Here, for a
local-training task (CPU-bound, all its threads fully busy) on a phone whose execution choices
are profiled (:class:`~flamingo_sim.devices.profiles.ProfileSet`):

- a choice *fits* when its throughput is at least ``margin`` times the phone's fastest choice,
  ``step_latency_s <= fastest_latency_s / margin``;
- EAS runs every task on the fitting choice with the least energy per step
  (``step_latency_s x power_w``), chosen once per phone model from the whole state space.

It accepts every request (no battery or temperature monitoring) and has no interference
feedback: when the owner's foreground app shares a core, the task slows down and stays put
(priced by :func:`~flamingo_sim.devices.execution.run_ladder` without the control loop). That
is what separates it from Flamingo, which gives cores back under interference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flamingo_sim.config import check_ranges
from flamingo_sim.devices.policies.base import PolicyConfig, PricedPolicy, TaskOutcome, TaskRequest
from flamingo_sim.devices.profiles import ProfileSet

__all__ = ["EasPolicy", "EasParams", "CAPACITY_MARGIN", "eas_choice"]

#: A task fits on CPUs whose capacity exceeds its utilisation by 25 % (utilisation <= 80 %).
CAPACITY_MARGIN = 0.8


def eas_choice(latency_s: np.ndarray, power_w: np.ndarray, margin: float = CAPACITY_MARGIN) -> int:
    """Index of EAS's choice among one phone's choices (NaN = padding): least energy per step among those that fit."""
    lat = np.asarray(latency_s, dtype=np.float64)
    energy = lat * np.asarray(power_w, dtype=np.float64)
    valid = np.isfinite(lat)
    fits = valid & (lat <= np.nanmin(lat) / margin)
    return int(np.flatnonzero(fits)[np.argmin(energy[fits])])


@dataclass(frozen=True)
class EasParams:
    """EAS's parameters (``policy_params.eas``)."""

    #: A choice fits when its step latency is at most the phone's fastest divided by this (Linux's 1024/1280 = 0.8).
    margin: float = CAPACITY_MARGIN

    def __post_init__(self) -> None:
        check_ranges(self, margin="(0, 1]")


class EasPolicy(PricedPolicy):
    """Energy-Aware-Scheduler-like placement: the cheapest choice that fits, every request, no feedback."""

    name = "eas"
    Params = EasParams

    def __init__(self, config: PolicyConfig | None = None, margin: float = CAPACITY_MARGIN) -> None:
        super().__init__(config)
        if not 0 < margin <= 1:
            raise ValueError(f"margin must be in (0, 1], got {margin}")
        self.margin = float(margin)

    def init(self, n_clients: int, phone_idx: np.ndarray, profile_set: ProfileSet) -> None:
        super().init(n_clients, phone_idx, profile_set)
        ps = profile_set
        pos = np.array([eas_choice(ps.space_latency_s[p], ps.space_power_w[p], self.margin) for p in range(ps.n_phones)], dtype=np.int64)
        rows = np.arange(ps.n_phones)
        self.choice_latency_s = ps.space_latency_s[rows, pos]
        self.choice_power_w = ps.space_power_w[rows, pos]
        self.choice_label_idx = ps.space_label_idx[rows, pos]

    def run_tasks(self, request: TaskRequest) -> TaskOutcome:
        return self.run_fixed(request, self.choice_latency_s, self.choice_power_w, self.choice_label_idx, "eas")

"""Train only while charging: a device-side training policy in one file (docs/plugins.md).

A phone accepts a round's request only while it is on the charger with at least
``min_battery_pct`` of battery (a parameter read from the experiment's
``policy_params``), and then trains as PyTorch's default does (``4567``), priced on the
phone's profile by the same public helpers as the shipped policies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flamingo_sim.config import check_ranges
from flamingo_sim.devices.policies import PolicyConfig, PricedPolicy, TaskOutcome, TaskRequest


@dataclass(frozen=True)
class ChargingParams:
    """Train only while charging (``policy_params`` of ``charging_policy:ChargingOnlyPolicy``)."""

    #: Battery level (%) a charging phone needs before it trains.
    min_battery_pct: float = 20.0

    def __post_init__(self) -> None:
        check_ranges(self, min_battery_pct="[0, 100]")


class ChargingOnlyPolicy(PricedPolicy):
    """Accept a request only on the charger at ``min_battery_pct`` or more; train on ``4567``."""

    name = "charging_only"
    Params = ChargingParams
    DECLINE_REASONS = ("not_charging",)  # its own reason: a declined_not_charging column in metrics.parquet

    def __init__(self, config: PolicyConfig | None = None, min_battery_pct: float = 20.0) -> None:
        super().__init__(config)
        self.min_battery_pct = min_battery_pct

    def run_tasks(self, request: TaskRequest) -> TaskOutcome:
        ps = self.ready(request)
        charged = np.asarray(request.charging, dtype=bool) & (np.asarray(request.battery_pct) >= self.min_battery_pct)
        reason = np.where(charged, "", "not_charging").astype(object)
        return self.run_fixed(request, ps.baseline_latency_s, ps.baseline_power_w, ps.baseline_label_idx, self.name, reason)

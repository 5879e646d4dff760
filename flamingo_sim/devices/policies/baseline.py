"""The baseline: PyTorch's default execution (as many threads as big cores, always ``4567``).

No control loop: it suffers interference whenever the owner uses the phone. Its admission
(``baseline_admission``, not stated in the paper): ``accept_all`` (the default) accepts every
request; ``monitored`` declines as Flamingo's monitoring does, ``'too_hot'`` above
``max_temperature_c`` and ``'low_battery_in_use'`` in use, unplugged and below
``min_battery_pct``, so the two policies differ only in how they train.
"""

from __future__ import annotations

import numpy as np

from flamingo_sim.devices.policies.base import PricedPolicy, TaskOutcome, TaskRequest

__all__ = ["BaselinePolicy"]


class BaselinePolicy(PricedPolicy):
    """PyTorch's default: always ``4567``, no control loop; admission per ``baseline_admission``."""

    name = "baseline"

    def run_tasks(self, request: TaskRequest) -> TaskOutcome:
        ps = self.ready(request)
        reason = None
        if self.config.baseline_admission == "monitored":
            reason = self.monitor(request, np.ones(request.k, dtype=bool))
        return self.run_fixed(request, ps.baseline_latency_s, ps.baseline_power_w, ps.baseline_label_idx, "baseline", reason)

"""The baseline: PyTorch's default execution (as many threads as big cores, ``4567``, not pinned).

No control loop. Its threads are not pinned (``pinned = False``): under the ``android``
interference model the kernel places them on the highest-capacity cores of the training app's
cpuset and moves one off a core the owner's foreground app needs whenever a CPU of that cpuset
is free (:mod:`flamingo_sim.devices.scheduling`); this is PyTorch's default as stock Android
(EAS) schedules it, Table 3's baseline. Its admission
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
    """PyTorch's default: ``4567`` unpinned, no control loop; admission per ``baseline_admission``."""

    name = "baseline"
    pinned = False

    def run_tasks(self, request: TaskRequest) -> TaskOutcome:
        ps = self.ready(request)
        reason = None
        if self.config.baseline_admission == "monitored":
            reason = self.monitor(request, np.ones(request.k, dtype=bool))
        return self.run_fixed(request, ps.baseline_latency_s, ps.baseline_power_w, ps.baseline_label_idx, "baseline", reason)

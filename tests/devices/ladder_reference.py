"""The test oracle of :func:`flamingo_sim.devices.execution.run_ladder`: the same pricing, one
step at a time in plain Python (used by tests/devices/test_execution.py and
benchmarks/devices.py; it is not part of the library)."""

from __future__ import annotations

import numpy as np

from flamingo_sim.devices.execution import _EPS, InterferenceModel, LadderResult, _check, _slowdowns


def run_ladder_reference(latency_s, power_w, shared, n_rungs, n_steps, in_use, slot_s: float, controlled,
                         interference: InterferenceModel = InterferenceModel(), factor: float = 1.1,
                         probe_s: float = 120.0, slowdown=None) -> LadderResult:
    """The same as :func:`run_ladder`, one step at a time in plain Python (for tests/benchmarks)."""
    lat, pw, sh, nr, ns, use, ctl = _check(latency_s, power_w, shared, n_rungs, n_steps, in_use, controlled)
    k, c = lat.shape
    n_slots = use.shape[1]
    slows = _slowdowns(interference, slowdown, k).tolist()
    out_t, out_e, out_i = np.zeros(k), np.zeros(k), np.zeros(k)
    steps = np.zeros((k, c), dtype=np.int64)
    final = np.zeros(k, dtype=np.int64)
    lat_l, pw_l, sh_l, use_l = lat.tolist(), pw.tolist(), sh.tolist(), use.tolist()
    for i in range(k):
        slow = slows[i]
        t = mark = energy = inter = 0.0
        r = 0
        row_use, row_lat, row_pw, row_sh = use_l[i], lat_l[i], pw_l[i], sh_l[i]
        for _ in range(int(ns[i])):
            slot = min(int(t / slot_s + _EPS), n_slots - 1)
            shared_now = row_use[slot] and row_sh[r]
            step = row_lat[r] * (slow if shared_now else 1.0)
            t += step
            energy += step * row_pw[r]
            if shared_now:
                inter += step
            steps[i, r] += 1
            if ctl[i]:
                if step > factor * row_lat[r]:
                    r = min(r + 1, int(nr[i]) - 1)
                    mark = t
                elif t - mark >= probe_s * (1 - _EPS) and r > 0:
                    r -= 1
        out_t[i], out_e[i], out_i[i], final[i] = t, energy, inter, r
    return LadderResult(out_t, out_e, out_i, steps, final, out_t.copy())

"""The test oracle of :func:`flamingo_sim.devices.execution.run_ladder`: the same pricing, one
step at a time in plain Python (used by tests/devices/test_execution.py and
benchmarks/devices.py; it is not part of the library)."""

from __future__ import annotations

import numpy as np

from flamingo_sim.devices.execution import _EPS, LadderContention, LadderResult, _check


def _in_use_seconds(row_use: list[bool], slot_s: float, a: float, b: float) -> float:
    """Seconds of [a, b) in use, slot by slot (the last slot lasts for ever)."""
    n = len(row_use)
    total, s = 0.0, 0
    while s < n:
        lo, hi = s * slot_s, (s + 1) * slot_s if s < n - 1 else float("inf")
        if row_use[s]:
            total += max(0.0, min(b, hi) - max(a, lo))
        s += 1
    return total


def run_ladder_reference(latency_s, power_w, n_rungs, n_steps, in_use, slot_s: float, controlled,
                         contention: LadderContention | None = None, factor: float = 1.1, probe_s: float = 120.0) -> LadderResult:
    """The same as :func:`run_ladder`, one step at a time in plain Python (for tests/benchmarks)."""
    lat, pw, nr, ns, use, ctl, con = _check(latency_s, power_w, n_rungs, n_steps, in_use, controlled, contention)
    k, c = lat.shape
    n_slots = use.shape[1]
    out_t, out_e, out_i, out_l = np.zeros(k), np.zeros(k), np.zeros(k), np.zeros(k)
    steps = np.zeros((k, c), dtype=np.int64)
    final = np.zeros(k, dtype=np.int64)
    for i in range(k):
        t = mark = energy = inter = lost = 0.0
        r = 0
        row_use = use[i].tolist()
        for _ in range(int(ns[i])):
            slot = min(int(t / slot_s + _EPS), n_slots - 1)
            now = row_use[slot]
            lf, ef, loss = (float(con.latency_factor[i, r]), float(con.energy_factor[i, r]), float(con.foreground_loss[i, r])) \
                if now else (1.0, 1.0, 0.0)
            step = float(lat[i, r]) * lf
            energy += float(lat[i, r]) * float(pw[i, r]) * ef
            if loss > 0:
                overlap = _in_use_seconds(row_use, slot_s, t, t + step)
                inter += overlap
                lost += overlap * loss
            t += step
            steps[i, r] += 1
            if ctl[i]:
                if now and lf > factor:
                    r = min(r + 1, int(nr[i]) - 1)
                    mark = t
                elif t - mark >= probe_s * (1 - _EPS) and r > 0:
                    r -= 1
        out_t[i], out_e[i], out_i[i], out_l[i], final[i] = t, energy, inter, lost, r
    return LadderResult(out_t, out_e, out_i, out_l, steps, final, out_t.copy())

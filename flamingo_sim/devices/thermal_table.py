"""Sustained training under the thermal model, per phone and DNN model: the table of ``flamingo-sim thermal``.

For the baseline's choice (``4567``) and Flamingo's (the fastest viable one) of every profile:
the steady-state temperature of training without pause at the given ambient (trace)
temperature, heated by the power the profile charges the battery (one power per step: ``heat_w``
equals ``power_w`` on every row), when the cluster's throttling threshold is reached (never, if the steady state stays
below it), the throttled step latency and energy, and the steady state once throttled
(:mod:`flamingo_sim.devices.thermal`, the catalogue's ``body`` and ``throttle`` entries).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from flamingo_sim.devices.profiles import Profile
from flamingo_sim.devices.thermal import time_to_excess_s
from flamingo_sim.errors import ConfigError

__all__ = ["sustained_rows", "format_rows"]


def sustained_rows(profiles: Sequence[Profile], ambient_c: float) -> list[dict[str, Any]]:
    """One row per (profile, choice) of the baseline and Flamingo (see the module docstring)."""
    rows = []
    for prof in profiles:
        body = prof.phone.body
        if body is None or not prof.phone.soc.throttle:
            raise ConfigError(f"phone {prof.phone.name!r}: no body (mass, dimensions) or throttle rules in the catalogue")
        if not prof.has_power:
            continue
        r_k_w, tau_s = body.resistance_k_per_w, body.time_constant_s
        for who, choice in (("baseline", prof.baseline), ("flamingo", prof.best)):
            power = float(choice.power_w or 0.0)
            heat = power  # all of it ends as heat: energy conserved
            rule = prof.phone.soc.throttle_rule(choice.cores)
            onset = math.inf if rule is None else float(time_to_excess_s(np.array(rule.threshold_c - ambient_c), np.array(0.0),
                                                                          np.array(heat), np.array(r_k_w), np.array(tau_s)))
            speed = 1.0 if rule is None or math.isinf(onset) else rule.speed_frac
            pfrac = 1.0 if rule is None or math.isinf(onset) else rule.power_frac
            rows.append({
                "phone": prof.phone.name, "model": prof.model, "policy": who, "choice": choice.label, "power_w": power,
                "heat_w": heat, "step_latency_s": choice.step_latency_s, "resistance_k_per_w": r_k_w, "time_constant_s": tau_s,
                "steady_c": ambient_c + heat * r_k_w, "threshold_c": None if rule is None else rule.threshold_c,
                "onset_s": None if math.isinf(onset) else onset, "throttled_step_latency_s": choice.step_latency_s / speed,
                "throttled_step_energy_j": choice.step_latency_s * power * pfrac / speed,
                "throttled_steady_c": ambient_c + heat * pfrac * r_k_w,
            })
    return rows


def format_rows(rows: Sequence[dict[str, Any]], ambient_c: float) -> str:
    head = (f"{'phone':<14} {'model':<17} {'policy':<9} {'choice':<6} {'heat W':>6} {'steady':>8} {'throttle at':>11} "
            f"{'s/step':>8} {'throttled':>10} {'then':>8}")
    lines = [f"sustained training at {ambient_c:g} degC ambient (trace) temperature, heated by the power charged: "
             "steady state, onset of throttling, step latency before and after it, steady state once throttled", head, "-" * len(head)]
    for r in rows:
        onset = "never" if r["onset_s"] is None else f"{r['onset_s'] / 60:.1f} min"
        lines.append(f"{r['phone']:<14} {r['model']:<17} {r['policy']:<9} {r['choice']:<6} {r['heat_w']:>6.2f} {r['steady_c']:>6.1f} C "
                     f"{onset:>11} {r['step_latency_s']:>8.2f} {r['throttled_step_latency_s']:>10.2f} {r['throttled_steady_c']:>6.1f} C")
    return "\n".join(lines)

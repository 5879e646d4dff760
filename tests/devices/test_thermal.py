"""The thermal circuit against its closed form and a numerical integration; throttling against hand-computed steps."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from flamingo_sim.devices.soc import load_phones
from flamingo_sim.devices.thermal import (
    SPECIFIC_HEAT_J_PER_GK,
    SURFACE_H_W_PER_M2K,
    ThermalBody,
    ThrottleRule,
    excess_after,
    rc_excess_c,
    throttled_task,
    time_to_excess_s,
)
from flamingo_sim.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def _integrate(t_end_s: float, x0: float, power_w: float, r: float, tau: float, dt: float = 0.01) -> float:
    """C dx/dt = P - x/R by classical Runge-Kutta (C = tau / R), independent of the closed form."""
    c = tau / r

    def f(x: float) -> float:
        return (power_w - x / r) / c

    x, t = x0, 0.0
    while t < t_end_s - 1e-12:
        h = min(dt, t_end_s - t)
        k1 = f(x)
        k2 = f(x + h / 2 * k1)
        k3 = f(x + h / 2 * k2)
        k4 = f(x + h * k3)
        x += h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        t += h
    return x


@pytest.mark.parametrize("x0,power_w", [(0.0, 2.731), (8.0, 1.0), (15.0, 0.0)])
def test_closed_form_matches_the_integrated_circuit(x0, power_w):
    r, tau = 4.3, 573.0
    for t in (0.0, 60.0, 573.0, 2000.0):
        assert rc_excess_c(t, x0, power_w, r, tau) == pytest.approx(_integrate(t, x0, power_w, r, tau), abs=1e-9)
    # the steady state is P R, reached after many time constants
    assert rc_excess_c(50 * tau, x0, power_w, r, tau) == pytest.approx(power_w * r, abs=1e-12)


def test_time_to_excess_reaches_the_target_exactly():
    r, tau = np.array([4.3, 4.3, 4.3]), np.array([573.0, 573.0, 573.0])
    t = time_to_excess_s(np.array([5.0, 5.0, 20.0]), np.array([0.0, 6.0, 0.0]), np.array([2.731, 2.731, 2.731]), r, tau)
    assert t[0] == pytest.approx(573.0 * math.log(2.731 * 4.3 / (2.731 * 4.3 - 5.0)), rel=1e-12)
    assert rc_excess_c(t[0], 0.0, 2.731, 4.3, 573.0) == pytest.approx(5.0, abs=1e-9)
    assert t[1] == 0.0  # already above the threshold
    assert t[2] == math.inf  # the steady state (11.7 K) never reaches 20 K


def test_throttling_by_hand():
    # 600 s at 2 W (1200 J), R = 5 K/W, tau = 500 s: the excess heads for 10 K and reaches the
    # 5 K threshold at 500 ln 2 = 346.574 s; the remaining 253.426 s of work run at half speed
    # (506.853 s) and half power (1 W): 346.574 + 506.853 = 853.427 s, 693.147 + 506.853 = 1200.0 J.
    tasks = throttled_task(np.array([600.0, 600.0, 600.0]), np.array([1200.0, 1200.0, 1200.0]), np.array([0.0, 0.0, 6.0]),
                           np.array([5.0, 12.0, 5.0]), np.array([0.5, 0.5, 0.5]), np.array([0.5, 0.5, 0.5]),
                           np.full(3, 5.0), np.full(3, 500.0))
    onset = 500.0 * math.log(2.0)
    assert tasks.onset_s[0] == pytest.approx(onset, rel=1e-12)
    assert tasks.duration_s[0] == pytest.approx(onset + (600.0 - onset) / 0.5, rel=1e-12)
    assert tasks.duration_s[0] == pytest.approx(853.427, abs=1e-3)
    assert tasks.energy_j[0] == pytest.approx(2.0 * onset + 1.0 * (600.0 - onset) / 0.5, rel=1e-12)
    assert tasks.throttled_s[0] == pytest.approx(506.853, abs=1e-3)
    # a threshold the steady state never reaches: priced as given
    assert (tasks.duration_s[1], tasks.energy_j[1], tasks.throttled_s[1]) == (600.0, 1200.0, 0.0)
    # already above it: throttled from the first step, 1200 s at 1 W
    assert (tasks.duration_s[2], tasks.energy_j[2]) == (pytest.approx(1200.0), pytest.approx(1200.0))


def test_excess_after_follows_the_two_phases():
    tasks = throttled_task(np.array([600.0]), np.array([1200.0]), np.array([0.0]), np.array([5.0]), np.array([0.5]), np.array([0.5]),
                           np.array([5.0]), np.array([500.0]))
    onset = 500.0 * math.log(2.0)

    def at(t: float) -> float:
        return float(excess_after(np.array([t]), np.array([0.0]), tasks, np.array([2.0]), np.array([0.5]), np.array([5.0]), np.array([500.0]))[0])

    assert at(onset) == pytest.approx(5.0, abs=1e-9)  # the threshold at the onset
    # then at 1 W towards 5 K: it stays at 5 K (the throttled steady state equals the threshold here)
    assert at(onset + 200.0) == pytest.approx(5.0, abs=1e-9)
    assert at(100.0) == pytest.approx(10.0 * (1 - math.exp(-100.0 / 500.0)), rel=1e-12)
    assert at(1e6) == pytest.approx(at(float(tasks.duration_s[0])))  # past the end: the end's excess


def test_body_constants_by_hand():
    pixel3 = ThermalBody(mass_g=148, length_mm=145.6, width_mm=68.2, thickness_mm=7.9)
    area = 2 * (0.1456 * 0.0682 + 0.1456 * 0.0079 + 0.0682 * 0.0079)
    assert pixel3.area_m2 == pytest.approx(area)
    assert pixel3.heat_capacity_j_per_k == pytest.approx(148 * SPECIFIC_HEAT_J_PER_GK)
    assert pixel3.resistance_k_per_w == pytest.approx(1 / (SURFACE_H_W_PER_M2K * area))
    assert pixel3.time_constant_s == pytest.approx(573.2, abs=0.1)


def test_shipped_catalogue_has_heat_and_memory_for_every_phone():
    phones = load_phones(ROOT / "profiles")
    for phone in phones.values():
        assert phone.body is not None and phone.memory is not None, phone.name
        assert {"low_power", "big"} <= set(phone.soc.throttle), phone.name
        assert 0 < phone.memory.limit_bytes() < phone.memory.ram_gb * 2**30


def test_bad_throttle_entries_are_refused(tmp_path):
    text = (ROOT / "profiles" / "phones.yaml").read_text()
    (tmp_path / "phones.yaml").write_text(text.replace("      big: {threshold_c: 40.0,", "      huge: {threshold_c: 40.0,", 1))
    with pytest.raises(ConfigError, match=r"socs\.sd845: throttle: 'huge' is not a core type"):
        load_phones(tmp_path)
    (tmp_path / "phones.yaml").write_text(text.replace("speed_frac: 0.6", "speed_frac: 1.5", 1))
    with pytest.raises(ConfigError, match="speed_frac"):
        load_phones(tmp_path)
    with pytest.raises(ValueError, match="power_frac"):
        ThrottleRule(threshold_c=40.0, power_frac=0.0)


def test_energy_conserved_the_circuit_receives_what_the_battery_is_charged():
    """Property over random tasks, throttled or not: integrating the circuit, the heat it received
    (C dT plus what flowed to the air, T / R dt) equals the energy each task was charged."""
    from flamingo_sim.devices.thermal import excess_after, throttled_task

    rng = np.random.default_rng(7)
    n = 64
    dur = rng.uniform(30.0, 3000.0, n)
    power = rng.uniform(0.2, 6.0, n)
    x0 = rng.uniform(0.0, 8.0, n)
    thr = rng.uniform(2.0, 15.0, n)
    speed, pfrac = rng.uniform(0.4, 1.0, n), rng.uniform(0.3, 1.0, n)
    res, tau = rng.uniform(3.0, 6.0, n), rng.uniform(300.0, 900.0, n)
    tasks = throttled_task(dur, dur * power, x0, thr, speed, pfrac, res, tau)
    assert (tasks.throttled_s > 0).sum() >= 10 and (tasks.throttled_s == 0).sum() >= 10  # both kinds drawn
    # trapezoid over 20,000 points per task of the excess the model reports
    t = np.linspace(0.0, 1.0, 20001)[:, None] * tasks.duration_s[None, :]
    x = np.stack([excess_after(t[i], x0, tasks, power, pfrac, res, tau) for i in range(len(t))])
    cap = tau / res  # C = tau / R
    to_air = ((x[1:] + x[:-1]) / 2 / res * np.diff(t, axis=0)).sum(axis=0)  # the trapezoid rule (numpy 1.24's floor has no trapezoid)
    received = cap * (x[-1] - x0) + to_air
    np.testing.assert_allclose(received, tasks.energy_j, rtol=1e-6)

"""The pricing stage (flamingo_sim.devices.pricing): one timeline of power per task, read by the battery and the heat.

By hand: a task's energy part way, the share at which it has drawn a given energy, and the thermal circuit fed that
power; over a run: every phone's circuit, integrated step by step from the power its battery was charged, ends where
the stage booked it (the heat a phone receives is the energy it is charged, for tasks stopped part way too).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from flamingo_sim.devices.pricing import DevicePricing, PowerTimeline
from flamingo_sim.devices.thermal import rc_excess_c
from flamingo_sim.fl.config import DevicesConfig, NetworkConfig
from flamingo_sim.fl.plugins import experiment_policy
from flamingo_sim.fl.sim.rounds import BATTERY_EXHAUSTED, TOO_SLOW
from flamingo_sim.fl.sim.simulation import Simulation
from flamingo_sim.fl.strategy.selection import UniformSelector
from tests.fl.sim.test_simulation import scripted_parts


def _timeline(segment_s, segment_w, clock_s, linear=False) -> PowerTimeline:
    segment_s, segment_w = np.array([segment_s], dtype=float), np.array([segment_w], dtype=float)
    return PowerTimeline(segment_s, segment_w, np.array([clock_s], dtype=float), (segment_s * segment_w).sum(axis=1), np.array([linear]))


# a compute throttled after 100 s at 2 W, then 50 s at half power: 200 + 50 = 250 J on a clock of 150 s
THROTTLED = _timeline([0.0, 100.0, 50.0, 0.0], [0.0, 2.0, 1.0, 0.0], 150.0)
# download 10 s at 1 W | compute 100 s at 2 W | upload 10 s at 1 W: 220 J on a clock of 120 s
RADIO = _timeline([10.0, 100.0, 0.0, 10.0], [1.0, 2.0, 2.0, 1.0], 120.0)


def test_energy_part_way_follows_the_power_as_it_runs():
    assert THROTTLED.energy_j[0] == 250.0
    assert THROTTLED.spent_j(np.array([0.5]))[0] == pytest.approx(150.0)  # 75 s at 2 W, not half of 250 J
    assert THROTTLED.spent_j(np.array([0.8]))[0] == pytest.approx(220.0)  # 100 s at 2 W, 20 s at 1 W
    assert THROTTLED.spent_j(np.array([1.0]))[0] == 250.0  # a whole task: its energy exactly
    assert RADIO.spent_j(np.array([0.5]))[0] == pytest.approx(10.0 + 2.0 * 50.0)
    assert RADIO.radio_spent_j(np.array([0.5]))[0] == pytest.approx(10.0)
    assert RADIO.radio_spent_j(np.array([1.0]))[0] == pytest.approx(20.0)


def test_the_share_at_an_energy_inverts_the_curve():
    assert THROTTLED.share_at_j(np.array([225.0]))[0] == pytest.approx(125.0 / 150.0)  # 200 J by 100 s, 25 J more at 1 W
    assert THROTTLED.share_at_j(np.array([100.0]))[0] == pytest.approx(50.0 / 150.0)
    assert THROTTLED.share_at_j(np.array([300.0]))[0] == 1.0  # more than the task draws: it runs whole
    assert RADIO.share_at_j(np.array([215.0]))[0] == pytest.approx(115.0 / 120.0)  # 210 J by 110 s, 5 J of upload
    shares = np.linspace(0.0, 1.0, 41)
    for tl in (THROTTLED, RADIO):
        many = PowerTimeline(np.repeat(tl.segment_s, 41, axis=0), np.repeat(tl.segment_w, 41, axis=0), np.repeat(tl.clock_s, 41),
                             np.repeat(tl.energy_j, 41), np.repeat(tl.linear, 41))
        assert many.share_at_j(many.spent_j(shares)) == pytest.approx(shares, abs=1e-12)


def test_a_task_at_one_power_is_charged_its_share_bit_for_bit():
    one = _timeline([0.0, 150.0, 0.0, 0.0], [0.0, 1.7, 0.0, 0.0], 150.0, linear=True)
    shares = np.array([0.1, 1 / 3, 0.77])
    assert np.array_equal(one.spent_j(shares), one.energy_j * shares)
    assert np.array_equal(one.share_at_j(np.array([100.0])), np.array([100.0]) / one.energy_j)


def test_the_circuit_fed_the_timeline_matches_the_closed_form_segment_by_segment():
    r, tau = 4.3, 600.0
    x = RADIO.excess_c(np.array([1.0]), np.array([2.0]), np.array([r]), np.array([tau]))[0]
    by_hand = 2.0
    for seg_s, w in ((10.0, 1.0), (100.0, 2.0), (10.0, 1.0)):
        by_hand = w * r + (by_hand - w * r) * math.exp(-seg_s / tau)
    assert x == pytest.approx(by_hand, rel=1e-12)
    # past the task's end it only decays
    later = RADIO.excess_c(np.array([1.5]), np.array([2.0]), np.array([r]), np.array([tau]))[0]
    assert later == pytest.approx(by_hand * math.exp(-60.0 / tau), rel=1e-12)


def _sim(network_model: str) -> Simulation:
    parts = scripted_parts(rounds=3)
    cfg = dataclasses.replace(parts.cfg, devices=DevicesConfig(thermal="rc", memory="none", throttle_threshold_c=33.0),
                              network=dataclasses.replace(parts.cfg.network, model=network_model))
    assert isinstance(cfg.network, NetworkConfig)
    parts = dataclasses.replace(parts, cfg=cfg)
    return Simulation(parts, experiment_policy(cfg, None, "baseline"), "baseline", 0, UniformSelector())


@pytest.mark.parametrize("network_model", ["lognormal", "traces"])
def test_heat_received_is_the_energy_charged_over_a_run(network_model):
    """Every task of a run, its phone's circuit integrated in 1,000 steps (and at each change of power) from the power its battery was charged
    (the battery's energy drawn, differenced over time), ends where the pricing stage booked it: the heat a phone
    receives is the energy its battery pays, including the throttled task stopped part way by its battery."""
    sim = _sim(network_model)
    pricing: DevicePricing = sim.pricing
    seen = {"partial": 0, "throttled": 0, "tasks": 0}
    booked = []
    settle = pricing.settle

    def record(cohort, t0_s, done):
        before = pricing.excess_c_at(t0_s, cohort.request.client_idx)
        settle(cohort, t0_s, done)
        booked.append((cohort, np.asarray(done, dtype=float).copy(), before, pricing.excess_c[cohort.request.client_idx].copy()))

    pricing.settle = record  # type: ignore[method-assign]
    charged_j = 0.0
    for _ in range(3):
        plan = sim.plan_round()
        charged_j += float(plan.settled.energy_spent_j.sum())
        seen["partial"] += int(np.isin(plan.settled.reason, (BATTERY_EXHAUSTED, TOO_SLOW)).sum())
        sim.finish_round(plan, sim.train_round(plan))
    assert pricing.heat is not None
    heat_j = 0.0
    for cohort, done, before, after in booked:
        tl, h = cohort.timeline, cohort.heat
        for i in np.flatnonzero((done > 0) & (tl.energy_j > 0)):
            seen["tasks"] += 1
            seen["throttled"] += int(cohort.throttled_s[i] > 0)
            edges = np.cumsum(tl.segment_s[i]) / tl.clock_s[i]  # each segment's end: no step straddles a change of power
            grid = np.unique(np.concatenate([np.linspace(0.0, done[i], 1001), edges[edges < done[i]]]))
            n = len(grid)
            one = PowerTimeline(tl.segment_s[[i] * n], tl.segment_w[[i] * n], tl.clock_s[[i] * n], tl.energy_j[[i] * n], np.zeros(n, dtype=bool))
            energy = one.spent_j(grid)
            dt = np.diff(grid) * tl.clock_s[i]
            power = np.diff(energy) / np.where(dt > 0, dt, 1.0)  # what the battery was charged, per step
            x = before[i]
            for p, d in zip(power, dt):
                x = float(rc_excess_c(d, x, p, h.resistance_k_per_w[i], h.tau_s[i]))
            assert x == pytest.approx(after[i], rel=1e-9, abs=1e-12)
            heat_j += float(energy[-1])
    assert seen["tasks"] >= 3 and seen["throttled"] >= 1 and seen["partial"] >= 1
    assert heat_j == pytest.approx(charged_j, rel=1e-12)

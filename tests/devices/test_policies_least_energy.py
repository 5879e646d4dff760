"""The least-energy policy: its choice by hand on Pixel 3's profile, every request accepted, no feedback; the old name refused."""

from __future__ import annotations

import numpy as np
import pytest

from flamingo_sim.devices.policies import Policy, TaskRequest, make_policy
from flamingo_sim.devices.policies.least_energy import LeastEnergyPolicy, least_energy_choice
from flamingo_sim.devices.profiles import ProfileSet


@pytest.fixture(scope="module")
def ps(profiles_dir):
    return ProfileSet.load(profiles_dir, ["pixel_3"], "mobilenet_v2")


def test_least_energy_choice_by_hand():
    # a Pixel 3-like ladder (state-space order 4567, 456, 45, 4, 0123, 012, 01, 0)
    lat = np.array([49.7, 43.48, 37.27, 31.06, 72.06, 67.26, 64.85, 72.06])
    pw = np.array([2.731, 2.454, 2.177, 1.9, 1.001, 0.9457, 0.8803, 0.79])
    # energy per step: 135.7, 106.7, 81.14, 59.01, 72.13, 63.61, 57.09, 56.93
    # margin 0.8: fits if latency <= 31.06 / 0.8 = 38.83 -> 45, 4 -> cheapest 4
    assert least_energy_choice(lat, pw, 0.8) == 3
    # margin 0.45: latency <= 69.02 adds 012 (63.61 J) and 01 (57.09 J) -> 01
    assert least_energy_choice(lat, pw, 0.45) == 6
    # margin 0.4: latency <= 77.65, every choice fits -> 0 (56.93 J)
    assert least_energy_choice(lat, pw, 0.4) == 7
    assert least_energy_choice(np.append(lat, np.nan), np.append(pw, np.nan), 0.8) == 3  # padding ignored


def test_least_energy_runs_every_task_on_its_choice_without_feedback(ps):
    pol = make_policy("least_energy")
    assert isinstance(pol, LeastEnergyPolicy) and isinstance(pol, Policy) and pol.pinned
    pol.init(3, np.zeros(3, dtype=np.int64), ps)
    k = 3
    req = TaskRequest(np.arange(k), np.zeros(k, dtype=np.int64), 10, 0.0, np.array([5.0, 80.0, 80.0]), np.zeros(k, bool),
                      np.array([30.0, 50.0, 30.0]), np.ones((k, 1), bool), 60.0)
    out = pol.run_tasks(req)
    assert out.accepted.all()  # no battery or temperature monitoring
    assert out.choice_mix() == {"4": 30}
    # one big core: the owner's two threads take two idle big cores, no interference: 10 steps x 31.06 s at 1.3 W
    assert out.duration_s.tolist() == pytest.approx([310.6] * 3)
    assert out.energy_j.tolist() == pytest.approx([310.6 * 1.3] * 3)
    # the owner keeps its cores, but training's DRAM traffic (4 x 1205.0 + 6 x 11.4 MiB a step, over 31.06 s, against
    # the SD845's 3733 MT/s x 8 bytes) slows its memory-bound share (0.34) by u / (1 - u): the whole task, a little
    u = (4 * 1205.0 + 6 * 11.4) * 2**20 / 31.06 / (3733e6 * 8)
    assert out.interference_s.tolist() == pytest.approx([310.6] * 3)
    assert out.foreground_lost_s.tolist() == pytest.approx([310.6 * (1 - 1 / (1 + 0.34 * u / (1 - u)))] * 3)
    state = pol.state_dict()
    fresh = make_policy("least_energy")
    fresh.init(3, np.zeros(3, dtype=np.int64), ps)
    fresh.load_state_dict(state)
    assert fresh.run_tasks(req).duration_s.tolist() == out.duration_s.tolist()


def test_the_old_name_is_refused_with_the_new_one():
    from flamingo_sim.config import from_mapping
    from flamingo_sim.errors import ConfigError
    from flamingo_sim.fl.config import ExperimentConfig

    with pytest.raises(ConfigError, match="e.yaml: policies: policy 'eas' was renamed 'least_energy': it picks the least-energy"):
        from_mapping(ExperimentConfig, {"name": "x", "policies": ["baseline", "eas"]}, source="e.yaml")

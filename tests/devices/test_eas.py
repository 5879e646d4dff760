"""The EAS-like policy: its choice by hand on Pixel 3's profile, every request accepted, no feedback."""

from __future__ import annotations

import numpy as np
import pytest

from flamingo_sim.devices.eas import EasPolicy, eas_choice
from flamingo_sim.devices.policies import Policy, TaskRequest, make_policy
from flamingo_sim.devices.profiles import ProfileSet


@pytest.fixture(scope="module")
def ps(profiles_dir):
    return ProfileSet.load(profiles_dir, ["pixel_3"], "mobilenet_v2")


def test_eas_choice_by_hand():
    # profiles/pixel_3/mobilenet_v2.yaml: 4567, 456, 45, 4, 0123, 012, 01, 0
    lat = np.array([3.97, 2.943, 2.481, 3.412, 13.5, 10.01, 8.436, 11.6])
    pw = np.array([4.315, 3.721, 3.002, 1.9, 1.315, 1.2, 1.062, 0.85])
    # energy per step: 17.13, 10.95, 7.448, 6.483, 17.75, 12.01, 8.959, 9.86
    # margin 0.8: fits if latency <= 2.481 / 0.8 = 3.101 -> 456, 45 -> cheapest 45
    assert eas_choice(lat, pw, 0.8) == 2
    # margin 0.7: latency <= 3.544 adds 4 (6.483 J) -> 4
    assert eas_choice(lat, pw, 0.7) == 3
    assert eas_choice(np.append(lat, np.nan), np.append(pw, np.nan), 0.8) == 2  # padding ignored


def test_eas_runs_every_task_on_its_choice_without_feedback(ps):
    pol = make_policy("eas")
    assert isinstance(pol, EasPolicy) and isinstance(pol, Policy)
    pol.init(3, np.zeros(3, dtype=np.int64), ps)
    k = 3
    req = TaskRequest(np.arange(k), np.zeros(k, dtype=np.int64), 10, 0.0, np.array([5.0, 80.0, 80.0]), np.zeros(k, bool),
                      np.array([30.0, 50.0, 30.0]), np.ones((k, 1), bool), 60.0)
    out = pol.run_tasks(req)
    assert out.accepted.all()  # no battery or temperature monitoring
    assert out.choice_mix() == {"45": 30}
    # cores 4, 5 are not the foreground app's: 10 steps x 2.481 s, 10 x 7.448 J, no interference
    assert out.duration_s.tolist() == pytest.approx([24.81] * 3)
    assert out.energy_j.tolist() == pytest.approx([24.81 * 3.002] * 3)
    assert out.interference_s.tolist() == [0.0] * 3
    state = pol.state_dict()
    fresh = make_policy("eas")
    fresh.init(3, np.zeros(3, dtype=np.int64), ps)
    fresh.load_state_dict(state)
    assert fresh.run_tasks(req).duration_s.tolist() == out.duration_s.tolist()

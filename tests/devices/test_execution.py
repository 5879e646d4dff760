"""The control loop against scripted interference timelines (hand-computed)."""

from __future__ import annotations

import numpy as np
import pytest

from flamingo_sim.devices.execution import InterferenceModel, run_ladder
from tests.devices.ladder_reference import run_ladder_reference

RUNNERS = [run_ladder, run_ladder_reference]


def _one(lat, pw, shared, in_use, n_steps, controlled, slot_s=60.0):
    k = 1
    return dict(latency_s=np.array([lat]), power_w=np.array([pw]), shared=np.array([shared]),
                n_rungs=np.array([len(lat)]), n_steps=np.array([n_steps]), in_use=np.array([in_use]),
                slot_s=slot_s, controlled=np.full(k, controlled))


@pytest.mark.parametrize("run", RUNNERS)
def test_control_loop_scripted_timeline(run):
    # Ladder: rung 0 (2 s, 4 W) and rung 1 (3 s, 3 W) share a core with the foreground app,
    # rung 2 (5 s, 1 W) does not. Owner uses the phone in [60, 180) s. 100 steps.
    #  t=0..60   rung 0, 30 steps (idle)
    #  t=60      rung 0 slowed 2x: one 4 s step, detected -> rung 1, mark=64
    #  t=64      rung 1 slowed: one 6 s step, detected -> rung 2, mark=70
    #  t=70..190 rung 2, 24 steps (probe deadline 70+120=190) -> rung 1
    #  t=190     rung 1, one 3 s step, still past the deadline -> rung 0
    #  t=193..   rung 0, 43 steps of 2 s -> t=279
    res = run(**_one([2.0, 3.0, 5.0], [4.0, 3.0, 1.0], [True, True, False], [0, 1, 1, 0, 0], 100, True))
    assert list(res.steps[0]) == [74, 2, 24]
    assert res.duration_s[0] == pytest.approx(279.0)
    assert res.interference_s[0] == pytest.approx(10.0)
    assert res.energy_j[0] == pytest.approx(73 * 2 * 4 + 4 * 4 + 6 * 3 + 3 * 3 + 24 * 5 * 1)  # 747 J
    assert res.final_rung[0] == 0


@pytest.mark.parametrize("run", RUNNERS)
def test_baseline_on_same_timeline_suffers(run):
    # One rung (4567), no control: 30 steps to t=60, 30 slowed 4 s steps to t=180, 40 steps to 260.
    res = run(**_one([2.0], [4.0], [True], [0, 1, 1, 0, 0], 100, False))
    assert res.duration_s[0] == pytest.approx(260.0)
    assert res.interference_s[0] == pytest.approx(120.0)
    assert res.energy_j[0] == pytest.approx(70 * 2 * 4 + 30 * 4 * 4)  # 1040 J


@pytest.mark.parametrize("run", RUNNERS)
def test_persistent_interference_probes_every_two_minutes(run):
    # In use throughout. Each cycle: one slowed 4 s step on rung 0 (detected, mark), then 24
    # steps of 5 s on rung 1 until 120 s have passed, then probe back to rung 0.
    # 60 steps = 2 cycles (50 steps, t=248) + a slowed step (t=252) + 9 steps of 5 s = 297 s.
    res = run(**_one([2.0, 5.0], [4.0, 1.0], [True, False], [1], 60, True))
    assert list(res.steps[0]) == [3, 57]
    assert res.duration_s[0] == pytest.approx(297.0)
    assert res.interference_s[0] == pytest.approx(12.0)


@pytest.mark.parametrize("run", RUNNERS)
def test_undetectable_slowdown_is_not_acted_on(run):
    # A 1.05x slowdown is below the 1.1x threshold: the loop never moves, interference counts.
    im = InterferenceModel((6, 7), 1.05)
    res = run(**_one([2.0, 5.0], [1.0, 1.0], [True, False], [1], 10, True), interference=im)
    assert list(res.steps[0]) == [10, 0]
    assert res.duration_s[0] == pytest.approx(21.0) and res.interference_s[0] == pytest.approx(21.0)


def test_vectorised_equals_per_step_loop_on_random_timelines():
    gen = np.random.default_rng(11)
    k, c, slots = 400, 4, 12
    lat = np.sort(gen.choice([0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 7.0], (k, c)), axis=1) + gen.uniform(0, 1, (k, 1)).round(2)
    pw = gen.uniform(0.5, 4, (k, c))
    shared = gen.random((k, c)) < 0.6
    n_rungs = gen.integers(1, c + 1, k)
    n_steps = gen.integers(0, 300, k)
    in_use = gen.random((k, slots)) < 0.5
    ctl = gen.random(k) < 0.8
    a = run_ladder(lat, pw, shared, n_rungs, n_steps, in_use, 30.0, ctl)
    b = run_ladder_reference(lat, pw, shared, n_rungs, n_steps, in_use, 30.0, ctl)
    assert np.array_equal(a.steps, b.steps)
    assert np.array_equal(a.final_rung, b.final_rung)
    assert np.allclose(a.duration_s, b.duration_s) and np.allclose(a.energy_j, b.energy_j)
    assert np.allclose(a.interference_s, b.interference_s)
    assert (a.steps.sum(axis=1) == n_steps).all()


def test_cfs_nice_share_from_the_kernels_weights():
    # nice 10 (Android's THREAD_PRIORITY_BACKGROUND) has CFS weight 110, nice 0 has 1024: on a shared core
    # training gets 110/1134 of it (10.31x slower) and the foreground app 1024/1134 (1.107x slower, -9.7 %).
    from flamingo_sim.devices.execution import CFS_WEIGHTS, InterferenceModel

    assert (CFS_WEIGHTS[0], CFS_WEIGHTS[10], CFS_WEIGHTS[-20], CFS_WEIGHTS[19]) == (1024, 110, 88761, 15)
    fair = InterferenceModel()
    assert fair.slowdown_for(2.0) == fair.foreground_slowdown_for(2.0) == 2.0
    cfs = InterferenceModel(share="cfs_nice")
    assert cfs.slowdown_for(2.0) == pytest.approx(1134 / 110) and cfs.foreground_slowdown_for(2.0) == pytest.approx(1134 / 1024)
    assert InterferenceModel(share="cfs_nice", training_nice=0).slowdown_for(3.0) == 2.0  # equal weights: fair, whatever the SoC says
    # a step on a shared core, priced by run_ladder with the model's training slowdown
    res = run_ladder(np.array([[2.0]]), np.array([[1.5]]), np.array([[True]]), np.array([1]), np.array([3]), np.ones((1, 1), bool),
                     600.0, np.array([False]), interference=cfs, slowdown=np.array([cfs.slowdown_for(2.0)]))
    assert res.duration_s[0] == pytest.approx(3 * 2.0 * 1134 / 110)
    with pytest.raises(Exception, match="training_nice"):
        InterferenceModel(share="cfs_nice", training_nice=25)

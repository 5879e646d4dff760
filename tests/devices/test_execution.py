"""The control loop against scripted interference timelines (hand-computed)."""

from __future__ import annotations

import numpy as np
import pytest

from flamingo_sim.devices.execution import InterferenceModel, LadderContention, in_use_seconds, run_ladder
from tests.devices.ladder_reference import run_ladder_reference

RUNNERS = [run_ladder, run_ladder_reference]


def _one(lat, pw, shared, in_use, n_steps, controlled, slot_s=60.0, slow=2.0, energy=1.5, loss=0.5):
    """One task; rungs with ``shared`` True are slowed ``slow``x, cost ``energy``x and cost the owner ``loss`` in use."""
    sh = np.array([shared])
    con = LadderContention(np.where(sh, slow, 1.0), np.where(sh, energy, 1.0), np.where(sh, loss, 0.0))
    return dict(latency_s=np.array([lat]), power_w=np.array([pw]), n_rungs=np.array([len(lat)]), n_steps=np.array([n_steps]),
                in_use=np.array([in_use]), slot_s=slot_s, controlled=np.full(1, controlled), contention=con)


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
    assert res.foreground_lost_s[0] == pytest.approx(5.0)
    # the two contended steps cost 1.5x their profiled energy, the rest their profiled energy
    assert res.energy_j[0] == pytest.approx(73 * 2 * 4 + 2 * 4 * 1.5 + 3 * 3 * 1.5 + 3 * 3 + 24 * 5 * 1)  # 738.5 J
    assert res.final_rung[0] == 0


@pytest.mark.parametrize("run", RUNNERS)
def test_baseline_on_same_timeline_suffers(run):
    # One rung (4567), no control: 30 steps to t=60, 30 slowed 4 s steps to t=180, 40 steps to 260.
    res = run(**_one([2.0], [4.0], [True], [0, 1, 1, 0, 0], 100, False, energy=2.0))
    assert res.duration_s[0] == pytest.approx(260.0)
    assert res.interference_s[0] == pytest.approx(120.0)
    assert res.energy_j[0] == pytest.approx(70 * 2 * 4 + 30 * 2 * 4 * 2.0)  # 1040 J: the earlier full-power accounting


@pytest.mark.parametrize("run", RUNNERS)
def test_a_step_past_the_owners_use_counts_only_its_part_in_use(run):
    # In use in [0, 10) only; steps of 2 s slowed 3x: 0-6, 6-12 (begun in use), then 2 s steps from 12.
    # The owner's app was slowed for 10 s, not 12: the second step's last 2 s fall after the owner stopped.
    res = run(**_one([2.0], [1.0], [True], [1, 0], 5, False, slot_s=10.0, slow=3.0, energy=1.0, loss=0.4))
    assert res.duration_s[0] == pytest.approx(18.0)
    assert res.interference_s[0] == pytest.approx(10.0)
    assert res.foreground_lost_s[0] == pytest.approx(4.0)


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
    res = run(**_one([2.0, 5.0], [1.0, 1.0], [True, False], [1], 10, True, slow=1.05))
    assert list(res.steps[0]) == [10, 0]
    assert res.duration_s[0] == pytest.approx(21.0) and res.interference_s[0] == pytest.approx(21.0)


def test_in_use_seconds_counts_the_slots_overlap():
    use = np.array([[1, 0, 1], [0, 0, 1]], dtype=bool)
    rows = np.array([0, 1, 0])
    got = in_use_seconds(use, 10.0, rows, np.array([5.0, 0.0, 25.0]), np.array([25.0, 35.0, 60.0]))
    # row 0: [5, 10) + [20, 25) = 10; row 1: [20, 35) = 15 (the last slot lasts for ever); row 0 again: [25, 60) = 35
    assert got.tolist() == [10.0, 15.0, 35.0]


def test_vectorised_equals_per_step_loop_on_random_timelines():
    gen = np.random.default_rng(11)
    k, c, slots = 400, 4, 12
    lat = np.sort(gen.choice([0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 7.0], (k, c)), axis=1) + gen.uniform(0, 1, (k, 1)).round(2)
    pw = gen.uniform(0.5, 4, (k, c))
    shared = gen.random((k, c)) < 0.6
    con = LadderContention(np.where(shared, gen.uniform(1.0, 4.0, (k, c)), 1.0), np.where(shared, gen.uniform(0.8, 2.0, (k, c)), 1.0),
                           np.where(shared, gen.uniform(0.0, 0.9, (k, c)), 0.0))
    n_rungs = gen.integers(1, c + 1, k)
    n_steps = gen.integers(0, 300, k)
    in_use = gen.random((k, slots)) < 0.5
    ctl = gen.random(k) < 0.8
    a = run_ladder(lat, pw, n_rungs, n_steps, in_use, 30.0, ctl, con)
    b = run_ladder_reference(lat, pw, n_rungs, n_steps, in_use, 30.0, ctl, con)
    assert np.array_equal(a.steps, b.steps)
    assert np.array_equal(a.final_rung, b.final_rung)
    assert np.allclose(a.duration_s, b.duration_s) and np.allclose(a.energy_j, b.energy_j)
    assert np.allclose(a.interference_s, b.interference_s) and np.allclose(a.foreground_lost_s, b.foreground_lost_s)
    assert (a.steps.sum(axis=1) == n_steps).all()
    # the owner's slowed time never exceeds their use while the task ran
    assert (a.interference_s <= in_use_seconds(in_use, 30.0, np.arange(k), np.zeros(k), a.duration_s) + 1e-9).all()


def test_the_removed_nice_weight_split_is_refused_with_its_reason():
    with pytest.raises(Exception, match="share: expected no value: it was removed.*model: android"):
        InterferenceModel(share="cfs_nice")
    with pytest.raises(Exception, match="training_nice"):
        InterferenceModel(training_nice=25)


# -- the survivors of .ci/mutation.py over the device model (benchmarks/results/mutation_device_model_2cores.json) ---------

@pytest.mark.parametrize("threshold", [1.0, 1.5, -0.01])
def test_an_in_use_threshold_outside_0_to_1_is_refused(threshold):
    # a slot is in use when its screen-on share exceeds the threshold: a share never exceeds 1, so a threshold of 1 or
    # more would never see the owner (the range is [0, 1), 1 excluded)
    from flamingo_sim.config import FieldError

    with pytest.raises(FieldError, match="in_use_threshold"):
        InterferenceModel(in_use_threshold=threshold)


@pytest.mark.parametrize("share", [1.5, -0.1])
def test_an_owner_memory_share_outside_0_to_1_is_refused(share):
    from flamingo_sim.config import FieldError

    with pytest.raises(FieldError, match="owner_memory_share"):
        InterferenceModel(owner_memory_share=share)


def test_an_in_use_threshold_just_below_1_and_of_0_is_accepted():
    assert InterferenceModel(in_use_threshold=0.999).in_use_threshold == 0.999
    assert InterferenceModel(in_use_threshold=0.0).in_use_threshold == 0.0
    assert InterferenceModel(owner_memory_share=1.0).owner_memory_share == 1.0

"""The paper's exploration protocol on constructed populations (explored-by rounds computed by hand)."""

from __future__ import annotations

import numpy as np
import pytest

from flamingo_sim.devices.policies import FlamingoPolicy, PolicyConfig, TaskRequest
from flamingo_sim.devices.profiles import ProfileSet, load_profile
from flamingo_sim.fl.sim.rounds import TOO_SLOW, settle_round

PHONES = ["pixel_3", "mi_10"]  # 8 and 11 execution choices


@pytest.fixture(scope="module")
def ps(profiles_dir):
    return ProfileSet.load(profiles_dir, PHONES, "mobilenet_v2")


def idle(clients, phones, n_steps):
    k = len(clients)
    return TaskRequest(np.asarray(clients), np.asarray(phones), n_steps, 0.0, np.full(k, 80.0), np.zeros(k, bool),
                       np.full(k, 30.0), np.zeros((k, 1), bool), 600.0)


def test_explored_by_round_hand_computed(ps):
    # explore_steps=2, 4 local steps: each task profiles 2 choices. Pixel 3 (8 choices): explored
    # by the end of round 4; Mi 10 (11 choices): 2 per round, round 6 profiles the 11th and runs
    # its 2 remaining steps under the control loop. Sharing: a Pixel 3 client first asked in
    # round 5 gets the profile; one first asked in round 2 explores from its own first choice.
    pol = FlamingoPolicy(PolicyConfig(explore_steps=2))
    pol.init(5, np.array([0, 0, 1, 0, 0]), ps)
    for rnd in range(1, 8):
        clients, phones = [0, 1, 2], [0, 0, 1]
        if rnd in (2, 5):
            clients, phones = clients + [4 if rnd == 2 else 3], phones + [0]
        out = pol.run_tasks(idle(clients, phones, 4))
        pol.settle(out, np.ones(len(clients)))
        assert list(pol.explored[:2]) == [min(2 * rnd, 8)] * 2
        assert pol.explored[2] == min(2 * rnd, 11)
        assert pol.shared_table[0] == (rnd >= 4) and pol.shared_table[1] == (rnd >= 6)
        expect_pixel = "explore" if rnd <= 4 else "control"
        assert list(out.mode[:2]) == [expect_pixel] * 2
        assert out.mode[2] == ("explore" if rnd <= 6 else "control")
        if rnd == 2:
            assert out.mode[3] == "explore" and pol.explored[4] == 2  # its own first two choices
        if rnd == 5:
            assert out.mode[3] == "control" and pol.explored[3] == 0  # the shared profile
        if rnd == 6:  # Mi 10: choice 11 ("0") for 2 steps, then 2 controlled steps on its fastest choice
            mix = dict(zip(out.labels, out.steps_by_choice[2]))
            assert mix["0"] == 2 and sum(mix.values()) == 4
    assert pol.explored[4] == 2  # never asked again: the profile reached it through sharing
    assert pol.profiled(np.array([4]))[0]


def test_first_round_steps_and_time_are_the_profiled_choices(ps, profiles_dir):
    pixel = {c.label: c for c in load_profile(profiles_dir, "pixel_3", "mobilenet_v2").all_choices}
    pol = FlamingoPolicy(PolicyConfig(explore_steps=3))
    pol.init(1, np.array([0]), ps)
    out = pol.run_tasks(idle([0], [0], 7))  # 3 steps on 4567, 3 on 456, 1 on 45 (not complete)
    mix = {lab: n for lab, n in zip(out.labels, out.steps_by_choice[0]) if n}
    assert mix == {"4567": 3, "456": 3, "45": 1}
    want = 3 * pixel["4567"].step_latency_s + 3 * pixel["456"].step_latency_s + pixel["45"].step_latency_s
    assert out.duration_s[0] == pytest.approx(want)
    pol.settle(out, np.ones(1))
    assert pol.explored[0] == 2  # "45" ran 1 of its 3 batches: profiled again next time


def test_k_fastest_cuts_a_slow_explorer(ps):
    # Two Pixel 3 explorers run the same four choices; client 1 has a slow network.
    pol = FlamingoPolicy(PolicyConfig(explore_steps=2, share_profiles=False))
    pol.init(2, np.array([0, 0]), ps)
    out = pol.run_tasks(idle([0, 1], [0, 0], 8))  # both: 4567, 456, 45, 4 (2 steps each)
    # Client 1's transfers take as long as its compute: K=1 keeps client 0 and cuts client 1 at
    # the round's end (client 0's duration), when it has run half of its task.
    comm = np.array([0.0, out.duration_s[1]])
    settled = settle_round(k=1, accepted=out.accepted, duration_s=out.duration_s + comm, energy_j=out.energy_j,
                           spare_energy_j=np.full(2, 1e9), online_at_finish=np.ones(2, bool))
    assert settled.reason[1] == TOO_SLOW
    pol.settle(out, settled.done_frac)
    assert settled.done_frac[1] == pytest.approx(0.5)
    ran = 0.5 * out.duration_s[1]
    ends = np.cumsum([2 * ps.space_latency_s[0, j] for j in range(4)])
    assert pol.explored[0] == 4
    assert pol.explored[1] == int(np.sum(ends <= ran)) == 1  # 4567 ended at 99.4 s, 456 at 186.4 s > 161.5 s


def test_collective_option_books_only_finished_choices(ps):
    pol = FlamingoPolicy(PolicyConfig(exploration="collective"))
    pol.init(3, np.array([0, 0, 0]), ps)
    out = pol.run_tasks(idle([0, 1, 2], [0, 0, 0], 2))  # 4567, 456, 45
    pol.settle(out, np.array([1.0, 0.4, 1.0]))  # the 456 explorer was cut
    assert list(np.flatnonzero(pol.model_done[0])) == [0, 2]
    out = pol.run_tasks(idle([1], [0], 2))
    assert {lab for lab, n in zip(out.labels, out.steps_by_choice[0]) if n} == {"456"}  # handed out again


def test_per_request_explores_one_choice_per_request_and_shares_after_the_first_client(ps, profiles_dir):
    # exploration: per_request, 4 local steps: round r profiles the Pixel 3's r-th choice over all
    # 4 steps; its 8 choices are explored at the end of round 8, when the coordinator shares the
    # profile, so a Pixel 3 client first asked in round 9 runs the control loop at once.
    pixel = {c.label: c for c in load_profile(profiles_dir, "pixel_3", "mobilenet_v2").all_choices}
    order = ["4567", "456", "45", "4", "0123", "012", "01", "0"]
    pol = FlamingoPolicy(PolicyConfig(exploration="per_request", explore_steps=2))
    pol.init(3, np.array([0, 0, 1]), ps)
    for rnd in range(1, 9):
        out = pol.run_tasks(idle([0], [0], 4))
        assert out.mode[0] == "explore"
        assert out.choice_mix() == {order[rnd - 1]: 4}
        assert out.duration_s[0] == pytest.approx(4 * pixel[order[rnd - 1]].step_latency_s)
        assert pol.explored[0] == rnd - 1 and not pol.shared_table[0]
        pol.settle(out, np.ones(1))
    assert pol.explored[0] == 8 and pol.shared_table[0]
    out = pol.run_tasks(idle([1, 2], [0, 1], 4))
    assert list(out.mode) == ["control", "explore"]  # the Mi 10 has no profile yet: its first choice
    assert dict(zip(out.labels, out.steps_by_choice[1]))["4567"] == 4


def test_per_request_cut_task_explores_nothing(ps):
    pol = FlamingoPolicy(PolicyConfig(exploration="per_request"))
    pol.init(1, np.array([0]), ps)
    out = pol.run_tasks(idle([0], [0], 4))
    pol.settle(out, np.array([0.99]))  # cut just before the end: the choice is profiled again
    assert pol.explored[0] == 0
    out = pol.run_tasks(idle([0], [0], 4))
    assert out.choice_mix() == {"4567": 4}


def test_old_exploration_name_is_refused_with_the_options():
    from flamingo_sim.config import from_mapping
    from flamingo_sim.errors import ConfigError

    with pytest.raises(ConfigError, match=r"exploration.*packed.*per_request.*collective"):
        from_mapping(PolicyConfig, {"exploration": "paper"}, source="exp.yaml")


@pytest.mark.parametrize("share", [True, False])
def test_exploration_none_every_client_profiled_from_the_first_request(ps, share):
    # exploration: none: the coordinator holds every phone model's profile from round 1, so no client
    # explores (with or without sharing); an idle unplugged request runs the control loop at once,
    # pricing exactly as a client that had explored: the same steps and duration.
    pol = FlamingoPolicy(PolicyConfig(exploration="none", share_profiles=share))
    pol.init(3, np.array([0, 1, 0]), ps)
    assert pol.profiled(np.arange(3)).all()
    out = pol.run_tasks(idle([0, 1, 2], [0, 1, 0], 4))
    assert list(out.mode) == ["control"] * 3
    pol.settle(out, np.ones(3))
    assert list(pol.explored[:3]) == [0, 0, 0]
    explored = FlamingoPolicy(PolicyConfig(explore_steps=2))
    explored.init(3, np.array([0, 1, 0]), ps)
    explored.explored.add(np.arange(3), ps.n_space[np.array([0, 1, 0])])  # as if each had explored every choice itself
    ref = explored.run_tasks(idle([0, 1, 2], [0, 1, 0], 4))
    assert np.array_equal(out.steps_by_choice, ref.steps_by_choice) and np.array_equal(out.duration_s, ref.duration_s)
    # an in-use request is not declined as 'in_use_exploring': the client has its profile
    req = TaskRequest(np.array([0]), np.array([0]), 4, 0.0, np.full(1, 80.0), np.zeros(1, bool), np.full(1, 30.0),
                      np.ones((1, 1), bool), 600.0)
    assert pol.run_tasks(req).decline_reason[0] == ""


# -- the survivors of .ci/mutation.py over the device model (benchmarks/results/mutation_device_model_2cores.json) ---------

def test_collective_exploration_resumes_from_its_state(ps):
    """The coordinator's table of explored choices is saved and restored: after the round of
    test_collective_option_books_only_finished_choices (4567 and 45 explored, 456 cut) a policy resumed from the state
    hands out 456 again, and a settle of the old round after the resume books nothing (no task is pending)."""
    pol = FlamingoPolicy(PolicyConfig(exploration="collective"))
    pol.init(3, np.array([0, 0, 0]), ps)
    out = pol.run_tasks(idle([0, 1, 2], [0, 0, 0], 2))
    pol.settle(out, np.array([1.0, 0.4, 1.0]))
    state = pol.state_dict()
    again = FlamingoPolicy(PolicyConfig(exploration="collective"))
    again.init(3, np.array([0, 0, 0]), ps)
    again.load_state_dict(state)
    assert list(np.flatnonzero(again.model_done[0])) == [0, 2]
    assert again.model_done.shape == pol.model_done.shape and again.model_done.dtype == bool
    again.settle(out, np.ones(3))  # nothing pending after a resume: the 456 explorer is not booked
    assert list(np.flatnonzero(again.model_done[0])) == [0, 2]
    nxt = again.run_tasks(idle([1], [0], 2))
    assert {lab for lab, n in zip(nxt.labels, nxt.steps_by_choice[0]) if n} == {"456"}


def test_a_choice_that_ends_half_a_second_after_the_cut_is_not_explored(ps):
    """The 456 explorer's 2 steps end at its duration D; cut at D - 0.5 s it has not finished, so 456 stays unexplored
    (the comparison allows 1e-9 relative and 1e-9 s of rounding, not half a second); cut at D it is explored."""
    for lost_s, done in ((0.5, [0, 2]), (0.0, [0, 1, 2])):
        pol = FlamingoPolicy(PolicyConfig(exploration="collective"))
        pol.init(3, np.array([0, 0, 0]), ps)
        out = pol.run_tasks(idle([0, 1, 2], [0, 0, 0], 2))
        d = float(out.duration_s[1])
        assert d > 1.0
        pol.settle(out, np.array([1.0, (d - lost_s) / d, 1.0]))
        assert list(np.flatnonzero(pol.model_done[0])) == done, lost_s

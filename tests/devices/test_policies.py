from __future__ import annotations

import numpy as np
import pytest

from flamingo_sim.config import from_mapping
from flamingo_sim.devices.execution import InterferenceModel
from flamingo_sim.devices.policies import BaselinePolicy, FlamingoPolicy, Policy, PolicyConfig, TaskRequest, make_policy
from flamingo_sim.devices.profiles import ProfileSet, load_profile
from flamingo_sim.errors import ConfigError

PHONES = ["pixel_3", "mi_10"]


@pytest.fixture(scope="module")
def ps(profiles_dir):
    return ProfileSet.load(profiles_dir, PHONES, "mobilenet_v2")


def req(clients, phones, n_steps=10, *, battery=80.0, charging=False, temp=30.0, in_use=None, slot_s=60.0):
    k = len(clients)
    use = np.zeros((k, 1), bool) if in_use is None else np.broadcast_to(np.asarray(in_use, bool), (k, np.asarray(in_use).shape[-1]))
    return TaskRequest(np.asarray(clients), np.asarray(phones), n_steps, 0.0, np.full(k, battery, float),
                       np.full(k, charging), np.full(k, temp, float), use, slot_s)


def run(pol, request, done=None):
    """One round: price the requests, then settle them (every task ran in full unless ``done``)."""
    out = pol.run_tasks(request)
    pol.settle(out, np.ones(request.k) if done is None else np.asarray(done, float))
    return out


def test_baseline_always_4567(ps, profiles_dir):
    pol = BaselinePolicy()
    assert not pol.pinned  # PyTorch's default: the kernel places its threads
    pol.init(2, np.array([0, 1]), ps)
    out = pol.run_tasks(req([0, 1], [0, 1], 10, temp=50.0, in_use=[[True]]))
    mi = load_profile(profiles_dir, "mi_10", "mobilenet_v2").baseline
    assert out.accepted.all() and out.choice_mix() == {"4567": 20}
    # android (the default, WALT), Mi 10, foreground cpuset 0-2,4-7: training's threads on 7 (Prime 1.35), 6, 5, 4 (A77
    # 1.15); the owner's two wake on the idle little 3 and 2 (A55 0.29). Rotation swaps the owner's thread on 2 with
    # training's (each may run on the other's CPU), not the one on 3 (training may not run there): five threads share
    # 7, 6, 5, 4, 2 at their mean speed (1.35 + 3 x 1.15 + 0.29) / 5 = 1.018; the profiled step ended with an A77
    mean = (1.35 + 3 * 1.15 + 0.29) / 5
    # the step (step: amdahl): 20 % serial on the first thread, 80 % shared by pthreadpool's work stealing; a unit of
    # work takes 1/v of compute plus the profiled step's memory stall k, which no core speed changes (the profile's
    # 4567 is 96.9 % stall: 1 - T0/L with T0 from its one-core step and Amdahl's law)
    one = load_profile(profiles_dir, "mi_10", "mobilenet_v2").all_choices
    single = next(c for c in one if c.label == "4").step_latency_s * 1.15
    t0 = 0.2 / 1.35 + 0.8 / (4 * 1.15)
    stall = 1 - single * t0 / mi.step_latency_s
    assert stall == pytest.approx(0.969, abs=5e-4)
    k = t0 * (1 / (1 - stall) - 1) / (0.2 + 0.8 / 4)
    alone = [1 / (1 / v + k) for v in (1.35, 1.15, 1.15, 1.15)]
    pool = sum(1 / (1 / v + k) for v in (1.35, 1.15, 1.15, 1.15, 0.29)) / 5
    unit = 0.2 / alone[0] + 0.8 / sum(alone)
    assert out.duration_s[1] == pytest.approx(10 * mi.step_latency_s * (0.2 / pool + 0.8 / (4 * pool)) / unit, rel=1e-9)
    assert out.duration_s[1] < 10 * mi.step_latency_s * 1.03  # memory-bound: the rotation's little core barely shows
    # the owner's threads would run on 7 and 6 alone: it keeps 0.29 / 1.35 on 3 and mean / 1.15 on 2
    # and its memory-bound share 0.34 waits u / (1 - u) longer beside training's DRAM traffic (4 x 1205.0 + 6 x 11.4 MiB a
    # step over the profiled step, against LPDDR5 at 5500 MT/s x 8 bytes)
    u = (4 * 1205.0 + 6 * 11.4) * 2**20 / mi.step_latency_s / (5500e6 * 8)
    memory = 1 / (1 + 0.34 * u / (1 - u))
    loss = ((1 - 0.29 * memory / 1.35) + (1 - mean * memory / 1.15)) / 2
    assert out.interference_s[1] > 0 and out.foreground_lost_s[1] == pytest.approx(loss * out.interference_s[1])
    # fair: the owner holds cores 6, 7, which 4567 shares: every step 2x slower, the owner's threads lose half of them
    fair = BaselinePolicy(PolicyConfig(interference=InterferenceModel(model="fair")))
    fair.init(2, np.array([0, 1]), ps)
    got = fair.run_tasks(req([0, 1], [0, 1], 10, temp=50.0, in_use=[[True]]))
    assert got.duration_s[1] == pytest.approx(10 * 2 * mi.step_latency_s)
    assert got.interference_s[1] == pytest.approx(got.duration_s[1]) and got.foreground_lost_s[1] == pytest.approx(got.duration_s[1] / 2)
    # cpu_time: training is charged its own CPU time, never the owner's half of the shared cores (earlier: 2x the energy)
    assert 10 * mi.step_energy_j <= got.energy_j[1] < 1.1 * 10 * mi.step_energy_j
    full = BaselinePolicy(PolicyConfig(interference=InterferenceModel(model="fair", energy="full_power")))
    full.init(2, np.array([0, 1]), ps)
    assert full.run_tasks(req([0, 1], [0, 1], 10, in_use=[[True]])).energy_j[1] == pytest.approx(10 * 2 * mi.step_energy_j)
    assert isinstance(pol, Policy)


def test_collective_exploration_walks_the_state_space_one_choice_per_task(ps):
    pol = FlamingoPolicy(PolicyConfig(share_profiles=False, exploration="collective"))
    pol.init(1, np.array([0]), ps)
    seen = []
    for _ in range(8):
        out = run(pol, req([0], [0], 5))
        assert out.mode[0] == "explore"
        (lab,) = [lab for lab, n in out.choice_mix().items()]
        seen.append(lab)
    assert seen == ["4567", "456", "45", "4", "0123", "012", "01", "0"]
    assert run(pol, req([0], [0], 5)).mode[0] == "control"


def test_flamingo_decisions(ps):
    pol = FlamingoPolicy()
    pol.init(3, np.array([0, 0, 1]), ps)
    assert pol.run_tasks(req([0], [0], temp=36.0)).decline_reason[0] == "too_hot"
    assert pol.run_tasks(req([0], [0], in_use=[[True]])).decline_reason[0] == "in_use_exploring"
    out = pol.run_tasks(req([0], [0], charging=True))  # exploring but charging: 4567, no progress
    assert out.mode[0] == "default" and out.choice_mix() == {"4567": 10}
    assert pol.explored[0] == 0
    for _ in range(8):
        run(pol, req([0], [0], 1))
    # Sharing: client 1 (same model) gets the profile from the coordinator; client 2 (mi_10) does not.
    out = pol.run_tasks(req([1, 2], [0, 1], 1))
    assert list(out.mode) == ["control", "explore"]
    out = pol.run_tasks(req([0, 1], [0, 0], 1, battery=20.0, in_use=[[True]]))
    assert list(out.decline_reason) == ["low_battery_in_use"] * 2
    out = pol.run_tasks(req([0], [0], 1, battery=20.0, in_use=[[True]], charging=True))
    assert out.accepted[0] and out.mode[0] == "control"


def test_flamingo_gives_cores_back_under_interference(ps, profiles_dir):
    # the fair model, where the owner's app holds cores 6 and 7 (under android it takes idle big cores, and "7" alone is never shared)
    pol = FlamingoPolicy(PolicyConfig(interference=InterferenceModel(model="fair")))
    pol.init(1, np.array([1]), ps)
    pol.shared_table[1] = True  # the coordinator already holds the Mi 10 profile
    prof = load_profile(profiles_dir, "mi_10", "mobilenet_v2")
    assert [c.label for c in prof.choices] == ["7", "4", "01", "0"]
    out = pol.run_tasks(req([0], [1], 5, in_use=[[True]]))
    # "7" is held by the foreground app: one 2x step, detected, then "4" (free) for 4 steps
    t7, t4 = prof.choices[0].step_latency_s, prof.choices[1].step_latency_s
    assert out.choice_mix() == {"7": 1, "4": 4}
    assert out.duration_s[0] == pytest.approx(2 * t7 + 4 * t4)
    assert out.interference_s[0] == pytest.approx(2 * t7)
    base = BaselinePolicy(PolicyConfig(interference=InterferenceModel(model="fair")))
    base.init(1, np.array([1]), ps)
    b = base.run_tasks(req([0], [1], 5, in_use=[[True]]))
    assert b.duration_s[0] / out.duration_s[0] > 10 and b.energy_j[0] > 5 * out.energy_j[0]


def test_state_dict_resume_gives_the_same_outcomes(ps):
    gen = np.random.default_rng(5)
    n = 50
    phone = gen.integers(0, 2, n)
    rounds = []
    for _ in range(30):
        cl = gen.choice(n, 10, replace=False)
        rounds.append(TaskRequest(cl, phone[cl], 20, 0.0, gen.uniform(0, 100, 10), gen.random(10) < 0.3,
                                  gen.uniform(25, 40, 10), gen.random((10, 4)) < 0.4, 30.0))
    a = FlamingoPolicy()
    a.init(n, phone, ps)
    outs = []
    for i, r in enumerate(rounds):
        if i == 15:
            snap = a.state_dict()
        outs.append(run(a, r))
    b = FlamingoPolicy()
    b.init(n, phone, ps)
    b.load_state_dict(snap)
    for r, o in zip(rounds[15:], outs[15:]):
        o2 = run(b, r)
        assert np.array_equal(o.steps_by_choice, o2.steps_by_choice) and np.allclose(o.duration_s, o2.duration_s)
        assert list(o.decline_reason) == list(o2.decline_reason)


def test_make_policy_and_config():
    cfg = from_mapping(PolicyConfig, {"min_battery_pct": 40, "interference": {"model": "fair", "foreground_cores": [7],
                                                                              "shared_core_slowdown": 3}})
    assert cfg.interference.foreground_cores == (7,) and cfg.interference.shared_core_slowdown == 3.0
    with pytest.raises(ConfigError, match="exp.yaml: interference.share: expected no value: it was removed"):
        from_mapping(PolicyConfig, {"interference": {"share": "cfs_nice"}}, source="exp.yaml")
    assert isinstance(make_policy("flamingo", cfg), FlamingoPolicy)
    assert isinstance(make_policy("flamingo_sim.devices.policies:BaselinePolicy"), BaselinePolicy)
    with pytest.raises(ConfigError, match="cannot import"):
        make_policy("no_such_module:Thing")
    with pytest.raises(ConfigError, match="^policies: unknown policy 'greedy'; expected one of 'baseline', 'flamingo', 'least_energy'"):
        make_policy("greedy")
    with pytest.raises(ConfigError, match="unknown key 'probe_secs'"):
        from_mapping(PolicyConfig, {"probe_secs": 3}, source="exp.yaml")


def test_shared_exploration_is_collective_per_device_model(ps):
    # Three Pixel 3 clients in one round take the model's first three choices; the next round's
    # explorers continue from the fourth; once all 8 are measured every Pixel 3 client controls.
    pol = FlamingoPolicy(PolicyConfig(exploration="collective"))
    pol.init(6, np.array([0, 0, 0, 0, 0, 0]), ps)
    out = run(pol, req([0, 1, 2], [0, 0, 0], 1))
    assert list(out.mode) == ["explore"] * 3
    mix = [[lab for lab, n in zip(out.labels, row) if n] for row in out.steps_by_choice]
    assert mix == [["4567"], ["456"], ["45"]]
    assert pol.model_done[0].sum() == 3 and not pol.shared_table[0]
    out = run(pol, req([3, 4, 5, 0, 1, 2], [0] * 6, 1))
    mix = [[lab for lab, n in zip(out.labels, row) if n] for row in out.steps_by_choice]
    # five choices left (4, 0123, 012, 01, 0): the sixth explorer finds none and runs 4567
    assert mix == [["4"], ["0123"], ["012"], ["01"], ["0"], ["4567"]]
    assert list(out.mode) == ["explore"] * 5 + ["default"]
    assert pol.shared_table[0]
    assert run(pol, req([5], [0], 1)).mode[0] == "control"


class FourMethods:
    """A policy by its methods alone, without the optional settle."""

    name = "four"

    def __init__(self, config=None) -> None:
        self.inner = BaselinePolicy(config)

    def init(self, n_clients, phone_idx, profile_set):
        self.inner.init(n_clients, phone_idx, profile_set)

    def run_tasks(self, request):
        return self.inner.run_tasks(request)

    def state_dict(self):
        return self.inner.state_dict()

    def load_state_dict(self, state):
        self.inner.load_state_dict(state)


class FourMethodsSubclassed(FourMethods, Policy):
    """The same, subclassing the protocol: it inherits settle's default."""


def test_an_imported_policy_gets_settle_from_the_contract_or_inherits_it():
    policy = make_policy("tests.devices.test_policies:FourMethods")  # settle: the default defined on Policy, given by the factory
    assert policy.settle(None, np.ones(1)) is None  # type: ignore[arg-type]
    assert policy.settle.__func__ is Policy.settle  # type: ignore[attr-defined]
    policy = make_policy("tests.devices.test_policies:FourMethodsSubclassed")
    assert isinstance(policy, Policy) and policy.settle(None, np.ones(1)) is None  # type: ignore[arg-type]


def test_a_policy_without_a_required_method_is_one_line():
    class Bare:
        def __init__(self, config=None):
            pass

        def init(self, n_clients, phone_idx, profile_set):
            pass

    import sys
    import types
    mod = types.ModuleType("bare_policy_mod")
    mod.Bare = Bare  # type: ignore[attr-defined]
    sys.modules["bare_policy_mod"] = mod
    try:
        with pytest.raises(ConfigError, match=r"^policies: policy 'bare_policy_mod:Bare' lacks run_tasks, state_dict, load_state_dict, which the "
                                              r"contract flamingo_sim.devices.policies.base.Policy requires \(a policy needs init, run_tasks, state_dict, "
                                              r"load_state_dict; settle, DECLINE_REASONS are optional\)$"):
            make_policy("bare_policy_mod:Bare")
    finally:
        del sys.modules["bare_policy_mod"]


def test_baseline_admission_monitored_declines_as_flamingo_monitors(ps, profiles_dir):
    # clients: hot; in use + unplugged + 20 %; in use + charging + 20 %; idle + 20 %; in use + 80 %
    k = 5
    request = TaskRequest(np.arange(k), np.zeros(k, dtype=np.int64), 10, 0.0, np.array([80.0, 20.0, 20.0, 20.0, 80.0]),
                          np.array([False, False, True, False, False]), np.array([40.0, 30.0, 30.0, 30.0, 30.0]),
                          np.array([[False], [True], [True], [False], [True]]), 60.0)
    base = load_profile(profiles_dir, "pixel_3", "mobilenet_v2").baseline
    for admission, declined in (("accept_all", {}), ("monitored", {0: "too_hot", 1: "low_battery_in_use"})):
        pol = BaselinePolicy(PolicyConfig(baseline_admission=admission))
        pol.init(k, np.zeros(k, dtype=np.int64), ps)
        out = pol.run_tasks(request)
        assert {i: r for i, r in enumerate(out.decline_reason) if r} == declined
        assert list(out.accepted) == [i not in declined for i in range(k)]
        assert list(out.mode) == ["declined" if i in declined else "baseline" for i in range(k)]
        assert all(out.energy_j[i] == 0 and out.duration_s[i] == 0 for i in declined)
        assert out.duration_s[3] == pytest.approx(10 * base.step_latency_s)  # idle: no interference
        assert out.choice_mix() == {"4567": 10 * (k - len(declined))}


# -- the survivors of .ci/mutation.py over the device model (benchmarks/results/mutation_device_model_2cores.json) ---------

def test_a_state_saved_whole_by_an_older_version_is_read(ps):
    """An older version saved the clients' phones whole (``client_phone``) instead of their checksum: read back as int64,
    it replaces what init gave, and the checksum follows it (that of a policy given those phones at init)."""
    b = BaselinePolicy()
    b.init(3, np.array([0, 0, 1]), ps)
    b.load_state_dict({"name": "baseline", "n_clients": 3, "client_phone": [1, 0, 0]})
    assert b.client_phone.dtype == np.int64 and b.client_phone.tolist() == [1, 0, 0]
    fresh = BaselinePolicy()
    fresh.init(3, np.array([1, 0, 0]), ps)
    assert b.state_dict() == fresh.state_dict()


def test_a_state_of_another_policy_or_other_phones_is_refused_naming_both(ps):
    b = BaselinePolicy()
    b.init(3, np.array([0, 0, 1]), ps)
    with pytest.raises(ValueError, match=r"^state is for policy 'flamingo', not 'baseline'$"):
        b.load_state_dict({"name": "flamingo"})
    other = BaselinePolicy()
    other.init(4, np.array([1, 1, 0, 0]), ps)
    with pytest.raises(ValueError, match=r"^state is for 4 clients with other phones than this policy's 3$"):
        b.load_state_dict(other.state_dict())


def test_an_unprofiled_client_on_the_charger_runs_4567_at_its_profiled_power_and_a_hot_one_is_declined(ps):
    """Flamingo explores only unplugged: an unprofiled Pixel 3 on the charger runs the default, 4567 (profiles/pixel_3/
    mobilenet_v2.yaml: 49.7 s and 1.869 W a step), 10 steps = 497 s and 497 x 1.869 = 928.893 J; a phone at 40 degC (above
    the 35 degC limit) is declined, its mode ``declined``."""
    pol = FlamingoPolicy()
    pol.init(2, np.array([0, 0]), ps)
    request = TaskRequest(np.array([0, 1]), np.array([0, 0]), 10, 0.0, np.full(2, 80.0), np.full(2, True), np.array([30.0, 40.0]),
                          np.zeros((2, 1), bool), 60.0)
    out = pol.run_tasks(request)
    assert list(out.mode) == ["default", "declined"] and list(out.decline_reason) == ["", "too_hot"]
    assert out.duration_s[0] == pytest.approx(497.0, rel=1e-12)
    assert out.energy_j[0] == pytest.approx(928.893, rel=1e-12)
    assert out.choice_mix() == {"4567": 10}


def test_a_request_of_0_steps_is_a_task_of_no_time_and_a_negative_one_is_refused(ps):
    """0 local steps is a valid request (a round with nothing to train): each task is accepted and takes 0 s and 0 J;
    -1 steps, or slots of 0 s, are refused with one message."""
    pol = BaselinePolicy()
    pol.init(2, np.array([0, 1]), ps)
    out = pol.run_tasks(req([0, 1], [0, 1], n_steps=0))
    assert out.accepted.tolist() == [True, True]
    assert out.duration_s.tolist() == [0.0, 0.0] and out.energy_j.tolist() == [0.0, 0.0]
    for n_steps, slot_s in ((-1, 60.0), (10, 0.0)):
        with pytest.raises(ValueError, match=r"^TaskRequest needs n_steps >= 0 and slot_s > 0$"):
            req([0], [0], n_steps=n_steps, slot_s=slot_s)

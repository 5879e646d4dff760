"""A policy's TaskOutcome held to its TaskRequest (issue 49, ``check_outcome``): one entry per
requested task in every array, the declared kinds, finite non-negative times and energies,
non-negative integer steps with a column per label, and each declined task's reason registered.
Each violation is one PluginError line naming the policy, the field, what it must be and what
came back; the shipped policies' outcomes pass as they are (the same object)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from flamingo_sim.devices.policies import BaselinePolicy, FlamingoPolicy, LeastEnergyPolicy, PolicyConfig, TaskOutcome, TaskRequest
from flamingo_sim.devices.policies.base import DECLINE_REASONS, RESERVED_REASONS, check_outcome, decline_reasons
from flamingo_sim.devices.profiles import ProfileSet
from flamingo_sim.errors import PluginError

K = 4
REQUEST = TaskRequest(np.arange(K), np.zeros(K, dtype=np.int64), 10, 0.0, np.array([80.0, 20.0, 60.0, 90.0]),
                      np.array([False, False, True, False]), np.array([40.0, 30.0, 30.0, 30.0]),
                      np.array([[False], [True], [True], [False]]), 60.0)
LABELS = ("4567", "0123")


def outcome(**changes) -> TaskOutcome:
    """Task 0 declined too hot, the others trained 10 steps on 4567."""
    fields = dict(accepted=np.array([False, True, True, True]), decline_reason=np.array(["too_hot", "", "", ""], dtype=object),
                  duration_s=np.array([0.0, 5.0, 6.0, 7.0]), energy_j=np.array([0.0, 10.0, 12.0, 14.0]), interference_s=np.zeros(K),
                  steps_by_choice=np.array([[0, 0], [10, 0], [10, 0], [10, 0]]), labels=LABELS,
                  mode=np.array(["declined", "baseline", "baseline", "baseline"], dtype=object))
    fields.update(changes)
    return TaskOutcome(**fields)  # type: ignore[arg-type]


def problem(out, registered=DECLINE_REASONS) -> str:
    with pytest.raises(PluginError) as exc:
        check_outcome("charging", REQUEST, out, registered)
    assert "\n" not in str(exc.value)
    return str(exc.value).removeprefix("policy 'charging' broke its contract: ")


TASK = "one entry per requested task (4,)"


@pytest.mark.parametrize("changes, said", [
    (dict(accepted=np.array([False, True, True])), f"TaskOutcome.accepted must be a bool array of {TASK}, got shape (3,)"),
    (dict(accepted=np.array([0, 1, 1, 1])), f"TaskOutcome.accepted must be a bool array of {TASK}, got dtype int64"),
    (dict(accepted=[False, True, True, True]), f"TaskOutcome.accepted must be a bool array of {TASK}, got a list"),
    (dict(decline_reason=np.array([1, 0, 0, 0])), f"TaskOutcome.decline_reason must be a str array of {TASK}, got dtype int64"),
    (dict(mode=np.array(["declined", "baseline", None, "baseline"], dtype=object)),
     f"TaskOutcome.mode must be a str array of {TASK}, got dtype object"),
    (dict(duration_s=np.array([0.0, 5.0, 6.0])), f"TaskOutcome.duration_s must be a float array of {TASK}, got shape (3,)"),
    (dict(duration_s=np.array([0, 5, 6, 7])), f"TaskOutcome.duration_s must be a float array of {TASK}, got dtype int64"),
    (dict(duration_s=np.array([0.0, np.nan, 6.0, 7.0])), "TaskOutcome.duration_s must be finite and >= 0, got nan"),
    (dict(energy_j=np.array([0.0, -1.0, 12.0, np.inf])), "TaskOutcome.energy_j must be finite and >= 0, got -1.0 and 1 more"),
    (dict(interference_s=np.zeros((K, 1))), f"TaskOutcome.interference_s must be a float array of {TASK}, got shape (4, 1)"),
    (dict(labels=["4567", "0123"]), "TaskOutcome.labels must be a tuple of str (the profile set's labels), got a list"),
    (dict(steps_by_choice=np.zeros((K, 3), dtype=np.int64)),
     "TaskOutcome.steps_by_choice must be an integer array of shape (4, 2), one row per requested task, got shape (4, 3)"),
    (dict(steps_by_choice=np.zeros((K, 2))),
     "TaskOutcome.steps_by_choice must be an integer array of shape (4, 2), one row per requested task, got dtype float64"),
    (dict(steps_by_choice=np.array([[0, 0], [10, 0], [-2, 12], [10, 0]])), "TaskOutcome.steps_by_choice must be >= 0, got -2"),
    (dict(decline_reason=np.array(["too_hot", "busy", "", ""], dtype=object)),
     "TaskOutcome.decline_reason must be '' for an accepted task, got 'busy'"),
    (dict(decline_reason=np.array(["busy", "", "", ""], dtype=object)),
     "TaskOutcome.decline_reason of a declined task must be one of its DECLINE_REASONS (too_hot, in_use_exploring, low_battery_in_use), "
     "got 'busy', which it does not register"),
    (dict(decline_reason=np.array(["", "", "", ""], dtype=object)),
     "TaskOutcome.decline_reason of a declined task must be one of its DECLINE_REASONS (too_hot, in_use_exploring, low_battery_in_use), "
     "got '' (no reason)"),
    (dict(decline_reason=np.array(["out_of_memory", "", "", ""], dtype=object)),
     "TaskOutcome.decline_reason of a declined task must be one of its DECLINE_REASONS (too_hot, in_use_exploring, low_battery_in_use), "
     "got 'out_of_memory', which it does not register"),
])
def test_each_violation_is_one_line_naming_the_policy_the_field_and_what_came_back(changes, said):
    assert problem(outcome(**changes)) == said


def test_what_is_not_a_task_outcome_is_named():
    assert problem({"accepted": np.ones(K, bool)}) == "run_tasks must return a TaskOutcome, got a dict"
    assert problem(None) == "run_tasks must return a TaskOutcome, got a NoneType"
    with pytest.raises(PluginError, match=r"^policy 'charging' broke its contract: run_tasks must return a TaskOutcome, got a tuple$"):
        check_outcome("charging", REQUEST, (np.ones(K, bool),))


def test_an_outcome_that_keeps_the_contract_comes_back_as_it_was_returned():
    out = outcome()
    assert check_outcome("charging", REQUEST, out) is out
    own = outcome(decline_reason=np.array(["not_charging", "", "", ""], dtype=object))  # a reason of its own, registered
    assert check_outcome("charging", REQUEST, own, (*DECLINE_REASONS, "not_charging")) is own
    strs = dataclasses.replace(out, decline_reason=np.array(["too_hot", "", "", ""]), mode=np.array(["declined", "a", "b", "c"]))
    assert check_outcome("charging", REQUEST, strs) is strs  # numpy str arrays as well as objects
    unsigned = dataclasses.replace(out, steps_by_choice=out.steps_by_choice.astype(np.uint32))
    assert check_outcome("charging", REQUEST, unsigned) is unsigned


@pytest.mark.parametrize("policy", [BaselinePolicy(PolicyConfig(baseline_admission="monitored")), FlamingoPolicy(), LeastEnergyPolicy()],
                         ids=["baseline", "flamingo", "least_energy"])
def test_the_shipped_policies_keep_the_contract_round_after_round(policy, profiles_dir):
    ps = ProfileSet.load(profiles_dir, ["pixel_3", "mi_10"], "mobilenet_v2")
    n = 40
    phone = np.arange(n) % 2
    policy.init(n, phone, ps)
    gen = np.random.default_rng(3)
    for _ in range(12):
        clients = np.sort(gen.choice(n, size=10, replace=False))
        request = TaskRequest(clients, phone[clients], 20, 0.0, gen.uniform(0, 100, 10), gen.random(10) < 0.3, gen.uniform(25, 40, 10),
                              gen.random((10, 4)) < 0.4, 30.0)
        out = policy.run_tasks(request)
        assert check_outcome(policy.name, request, out, decline_reasons(policy)) is out
        policy.settle(out, np.ones(10))


def test_no_policy_may_register_the_engines_own_drop_reasons():
    from flamingo_sim.fl.sim.limits import OUT_OF_MEMORY
    from flamingo_sim.fl.sim.rounds import REASONS

    assert set(RESERVED_REASONS) == {OUT_OF_MEMORY, *REASONS}
    assert not set(DECLINE_REASONS) & set(RESERVED_REASONS)

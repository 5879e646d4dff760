"""The frozen per-round record and the typed seams the engine uses."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from flamingo_sim.devices.battery import EnergyBudget
from flamingo_sim.devices.policies import BaselinePolicy
from flamingo_sim.fl.plugins import experiment_policy
from flamingo_sim.fl.sim.records import RoundRecord
from flamingo_sim.fl.sim.rounds import DROP_REASONS
from flamingo_sim.fl.sim.simulation import Simulation
from flamingo_sim.fl.strategy.selection import UniformSelector
from tests.fl.sim.test_simulation import STEPS, scripted_parts


def test_record_is_frozen_and_round_trips_through_its_row():
    parts = scripted_parts(rounds=1)
    record = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector()).step()
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.accuracy = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        record.dropped["declined"] = 7  # type: ignore[index]
    row = record.to_row()
    assert list(row)[:11] == ["policy", "seed", "round", "time_s", "duration_s", "accuracy", "loss", "train_loss", "n_online", "n_selected", "n_kept"]
    assert [k for k in row if k.startswith("dropped_")] == [f"dropped_{r}" for r in DROP_REASONS]
    assert row["steps_4567"] == STEPS and row["interference_s_pixel_3"] == 0.0
    again = RoundRecord.from_row(row)
    assert again.to_row() == row  # round 1 is evaluated: no NaN in the row
    assert again.steps_by_choice == record.steps_by_choice and again.dropped == record.dropped


def test_record_needs_every_drop_reason():
    parts = scripted_parts(rounds=1)
    row = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector()).step().to_row()
    del row["dropped_too_slow"]
    with pytest.raises(KeyError):
        RoundRecord.from_row(row)
    fields = {f.name: row.get(f.name) for f in dataclasses.fields(RoundRecord)}
    fields.update(dropped={"declined": 0}, steps_by_choice={}, interference_s_by_phone={})
    with pytest.raises(ValueError, match="RoundRecord.dropped: expected the reasons"):
        RoundRecord(**fields)


class InterruptingPolicy(BaselinePolicy):
    """The baseline, but it gives up every task it accepted before the end."""

    def run_tasks(self, request):
        out = super().run_tasks(request)
        return dataclasses.replace(out, interrupted=out.accepted.copy())


def test_a_policy_that_interrupts_its_tasks_is_counted():
    parts = scripted_parts(rounds=1)
    row = Simulation(parts, InterruptingPolicy(parts.cfg.policy), "interrupting", 0, UniformSelector()).step().to_row()
    # client 2 still runs flat and client 3 is still taken offline by its owner (those reasons
    # come first); client 0, the one the baseline keeps, now gives up: nobody is kept
    assert (row["dropped_interrupted"], row["dropped_battery_exhausted"], row["dropped_unavailable"], row["n_kept"]) == (1, 1, 1, 0)


def test_outcome_interrupted_defaults_to_all_false_and_checks_its_shape():
    parts = scripted_parts(rounds=1)
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    plan = sim.plan_round()
    assert plan.outcome.interrupted.dtype == bool and not plan.outcome.interrupted.any()
    assert plan.outcome.interrupted.shape == plan.chosen.shape
    with pytest.raises(ValueError, match=r"TaskOutcome.interrupted must have shape \(3,\)"):
        dataclasses.replace(plan.outcome, interrupted=np.zeros(2, dtype=bool))


def test_take_offline_waits_for_reentry():
    budget = EnergyBudget(np.full(3, 1000.0), min_pct=10.0, reentry_pct=20.0)
    budget.reset([50.0, 50.0, 15.0])
    budget.take_offline(np.array([0, 2]))
    assert budget.online.tolist() == [False, True, False]
    budget.advance([50.0, 50.0, 15.0], [50.0, 50.0, 19.0], [0, 0, 1], 0.0)
    assert budget.online.tolist() == [True, True, False]  # 50 % >= reentry; 19 % is not


def test_set_global_params_copies_and_checks():
    parts = scripted_parts(rounds=1)
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    new = {k: torch.full_like(v, 0.5) for k, v in sim.params.items()}
    sim.set_global_params(new)
    next(iter(new.values())).fill_(9.0)  # the simulation holds its own copy
    assert all(torch.equal(v, torch.full_like(v, 0.5)) for v in sim.params.values())
    with pytest.raises(ValueError, match=r"entries differ from the model's \(missing \[.*\], unexpected \['extra'\]\)"):
        sim.set_global_params({"extra": torch.zeros(1)})
    name = next(iter(sim.params))
    with pytest.raises(ValueError, match=f"set_global_params: {name} has shape \\(7,\\)"):
        sim.set_global_params({**sim.params, name: torch.zeros(7)})


def test_clock_past_the_trace_horizon_is_said_once():
    # three 10-minute slots, no shift: replay wraps after 1800 s; each round lasts 646.4 s,
    # so round 3 ends at 1939.2 s, past it
    parts = scripted_parts(rounds=5)
    assert parts.traces.horizon_s == 1800.0
    said: list[str] = []
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector(), log=said.append)
    sim.step()
    sim.step()
    assert said == []
    sim.step()
    sim.step()
    assert said == [
        ("WARNING: virtual time 0.5 h passed the trace set's wrap-free horizon of 0.5 h (round 3); "
        "from there on clients replay their battery traces from the start")
    ]

"""The round loop on a scripted scenario of four clients whose outcome is known by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from flamingo_sim.config import from_mapping
from flamingo_sim.devices.execution import InterferenceModel
from flamingo_sim.devices.profiles import ProfileSet, load_profile
from flamingo_sim.fl.config import ExperimentConfig
from flamingo_sim.fl.data.proxy import SyntheticFederated
from flamingo_sim.fl.plugins import experiment_policy
from flamingo_sim.fl.sim.population import build_population
from flamingo_sim.fl.sim.simulation import USAGE_SLOTS, Components, Simulation
from flamingo_sim.fl.strategy.selection import UniformSelector
from flamingo_sim.models import build_model
from flamingo_sim.traces.store import ClientTraces

ROOT = Path(__file__).resolve().parents[3]
CAPACITY_J = 2915 * 3.6 * 3.85  # Pixel 3
PIXEL3 = load_profile(ROOT / "profiles", "pixel_3", "mobilenet_v2")
LAT_S, POWER_W = PIXEL3.baseline.step_latency_s, PIXEL3.baseline.power_w  # the baseline (4567): 49.7 s, 1.87 W
STEPS = 12
COMM_S = 2 * 14.0 * 8 / 20.0  # 14 MB down and up at 20 Mbit/s


def scripted_parts(**fl) -> Components:
    # Four devices, one client each (no shift). Level per 10-minute slot:
    levels = np.array(
        [
            [80.0, 80.0, 80.0],  # 0: plenty of battery -> kept
            [5.0, 5.0, 5.0],  # 1: below 10 % -> offline, never selected
            [10.4, 10.4, 10.4],  # 2: 0.4 % spare, the task needs 2.8 % -> battery exhausted
            [60.0, 5.0, 5.0],  # 3: the owner drains it to 5 % at 600 s, before it finishes -> unavailable
        ],
        dtype=np.float32,
    )
    traces = ClientTraces(
        step_s=600,
        device_ids=np.arange(4),
        level_pct=levels,
        state=np.array([[0, 0, 0], [0, 0, 0], [0, 0, 0], [0, -1, 0]], dtype=np.int8),
        extras={},
        client_ids=np.arange(4),
        client_device=np.arange(4),
        shift_s=np.zeros(4, dtype=np.int64),
    )
    cfg = from_mapping(
        ExperimentConfig,
        {
            "name": "scripted",
            "phones": {"mix": {"pixel_3": 1.0}},
            "network": {"model_size_mb": 14.0, "bandwidth_mbps": 20.0, "bandwidth_sigma": 0.0},
            "fl": {"participants_per_round": 1, "overcommit": 3, "local_steps": STEPS, "rounds": 2, **fl},
            "devices": {"thermal": "none", "memory": "none"},  # the round loop by hand; heat and memory: test_limits
        },
    )
    data = SyntheticFederated(n_clients=4, n_features=5, n_classes=3, seed=0, mean_samples=40, test_samples=50, test_clients=4)
    return Components(
        cfg=cfg,
        traces=traces,
        population=build_population(4, 4, {"pixel_3": 1.0}, 20.0, 0.0, seed=0),
        profiles=ProfileSet.load(ROOT / "profiles", ["pixel_3"], "mobilenet_v2"),
        dataset=data,
        model=build_model("logreg", data.input_shape, data.n_classes, seed=0),
        test_data=data.test_data(),
        choice_labels=("4567", "456", "45", "4", "0123", "012", "01", "0"),
    )


def test_scripted_round_by_hand():
    parts = scripted_parts()
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    assert sim.budget.online.tolist() == [True, False, True, True]
    row = sim.step().to_row()
    task_s = STEPS * LAT_S + COMM_S  # 607.6 s: past the 600 s tick where client 3's trace drops
    task_j = STEPS * LAT_S * POWER_W  # 1115 J = 2.8 % of the battery
    assert (row["n_online"], row["n_selected"], row["n_kept"]) == (3, 3, 1)
    assert (row["dropped_battery_exhausted"], row["dropped_unavailable"], row["dropped_declined"]) == (1, 1, 0)
    assert row["duration_s"] == pytest.approx(task_s)
    assert row["time_s"] == pytest.approx(task_s)
    spare_2 = 0.004 * CAPACITY_J  # client 2 trains until it hits the 10 % floor
    assert row["energy_j"] == pytest.approx(task_j + spare_2 + task_j)
    assert row["steps_4567"] == STEPS  # only the kept client's steps count in the choice mix
    # after the round: client 0 carries the training deficit, client 2 ran flat and waits for a
    # charge, client 3 is offline because of its owner (not lost to training)
    assert sim.budget.level_pct[0] == pytest.approx(80.0 - 100 * task_j / CAPACITY_J)
    assert sim.budget.online.tolist() == [True, False, False, False]
    assert sim.trace_budget.online.tolist() == [True, False, True, False]
    assert row["clients_lost"] == 1 and row["clients_lost_cum"] == 1
    assert row["accuracy"] == row["accuracy"]  # evaluated after round 1

    row2 = sim.step().to_row()  # only client 0 is online now
    assert (row2["n_online"], row2["n_selected"], row2["n_kept"]) == (1, 1, 1)
    assert sim.is_done()


def test_flamingo_prices_the_same_client_faster_and_cheaper():
    parts = scripted_parts(rounds=1)
    base = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector()).step().to_row()
    # Flamingo with the coordinator's Pixel 3 profile in hand (no exploration): its fastest
    # viable choice is 4 (31.06 s/step, 1.9 W) instead of 4567.
    pol = experiment_policy(parts.cfg, None, "flamingo")
    sim = Simulation(parts, pol, "flamingo", 0, UniformSelector())
    pol.shared_table[:] = True
    row = sim.step().to_row()
    assert PIXEL3.best.label == "4"
    assert row["duration_s"] == pytest.approx(STEPS * PIXEL3.best.step_latency_s + COMM_S)
    assert row["steps_4"] == STEPS
    assert row["duration_s"] < base["duration_s"]


def test_training_changes_the_model_and_fedavg_keeps_shapes():
    parts = scripted_parts(rounds=1)
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    before = {k: v.clone() for k, v in sim.params.items()}
    sim.step()
    assert before.keys() == sim.params.keys()
    assert all(before[k].shape == sim.params[k].shape for k in before)
    assert any(not torch.equal(before[k], sim.params[k]) for k in before)


def test_a_step_is_priced_at_the_batch_it_trains():
    # the profiles are measured at batch 16; at fl.batch_size 8 every step does half the work: half the time and energy
    parts = scripted_parts(batch_size=8)
    row = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector()).step().to_row()
    assert row["duration_s"] == pytest.approx(STEPS * LAT_S / 2 + COMM_S)
    half_j = STEPS * LAT_S * POWER_W / 2
    assert row["steps_4567"] == STEPS and row["energy_j"] == pytest.approx(half_j + 0.004 * CAPACITY_J + half_j)  # as by hand above
    full = scripted_parts()
    ref = Simulation(full, experiment_policy(full.cfg, None, "baseline"), "baseline", 0, UniformSelector()).step().to_row()
    assert ref["duration_s"] == pytest.approx(STEPS * LAT_S + COMM_S)


def test_interference_is_recorded_per_phone():
    parts = scripted_parts(rounds=1)
    in_use = np.ones((4, 3), dtype=np.float32)  # the owner uses every phone all the time
    traces = parts.traces
    parts.traces = ClientTraces(
        step_s=600, device_ids=traces.device_ids, level_pct=traces.level_pct, state=traces.state,
        extras={"screen_on_frac": in_use}, client_ids=traces.client_ids,
        client_device=traces.client_device, shift_s=traces.shift_s,
    )
    # android (the default): the Pixel 3's foreground cpuset (0-3, 6-7) keeps cores 4 and 5 for the top app, where the
    # owner's two threads run, so the unpinned baseline on 7, 6, 3, 2 never meets them: nothing recorded
    # owner, except through the shared DRAM: with that term off nothing is recorded
    apart = dataclasses.replace(parts.cfg.policy, interference=InterferenceModel(owner_memory_share=0.0))
    cfg0 = dataclasses.replace(parts.cfg, policy=apart)
    row = Simulation(dataclasses.replace(parts, cfg=cfg0), experiment_policy(cfg0, None, "baseline"), "baseline", 0,
                     UniformSelector()).step().to_row()
    assert row["interference_s"] == 0.0 and row["foreground_lost_s_pixel_3"] == 0.0
    assert row["duration_s"] == pytest.approx(STEPS * LAT_S + COMM_S)
    # with it (the default), the owner loses the memory-bound share's queueing for all the time training ran beside it
    row = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector()).step().to_row()
    u = (4 * 1205.0 + 6 * 11.4) * 2**20 / LAT_S / (3733e6 * 8)
    assert row["interference_s"] > 0
    assert row["foreground_lost_s_pixel_3"] == pytest.approx(row["interference_s"] * (1 - 1 / (1 + 0.34 * u / (1 - u))))
    assert row["duration_s"] == pytest.approx(STEPS * LAT_S + COMM_S)
    # fair with the earlier full-power accounting: the foreground app holds cores 6 and 7, every 4567 step runs 2x slower
    # and all of it is interference; the owner feels the kept client (0) and the one its trace took offline (3) in full,
    # and the exhausted one (2) for the share of its task its 0.4 % spare paid for
    fair = dataclasses.replace(parts.cfg.policy, interference=InterferenceModel(model="fair", energy="full_power"))
    cfg = dataclasses.replace(parts.cfg, policy=fair)
    row = Simulation(dataclasses.replace(parts, cfg=cfg), experiment_policy(cfg, None, "baseline"), "baseline", 0, UniformSelector()).step().to_row()
    shared_s = 2 * STEPS * LAT_S
    exhausted_frac = 0.004 * CAPACITY_J / (shared_s * POWER_W)
    assert row["duration_s"] == pytest.approx(shared_s + COMM_S)
    assert row["interference_s"] == pytest.approx(shared_s * (2 + exhausted_frac))
    assert row["interference_s_pixel_3"] == pytest.approx(row["interference_s"])
    assert row["foreground_lost_s_pixel_3"] == pytest.approx(row["interference_s"] / 2)  # each owner's thread kept half its core
    # the owners' foreground time while the round ran: every selected client is in use for the
    # whole round (its duration), except the exhausted one, which stopped earlier but is still
    # counted until the round ends
    assert row["foreground_s_pixel_3"] == pytest.approx(3 * row["duration_s"])


def _with_extras(parts: Components, extras: dict) -> Components:
    tr = parts.traces
    parts.traces = ClientTraces(step_s=600, device_ids=tr.device_ids, level_pct=tr.level_pct, state=tr.state, extras=extras,
                                client_ids=tr.client_ids, client_device=tr.client_device, shift_s=tr.shift_s)
    return parts


def test_phone_on_the_charger_counts_as_plugged_in():
    # Client 0's trace says 'charging' although its level is flat (battery_state 0, as a phone
    # held full on the charger reads): it trains on the charger's power, so no deficit.
    charging = np.zeros((4, 3), dtype=np.float32)
    charging[0] = 1.0
    parts = _with_extras(scripted_parts(rounds=1), {"charging": charging})
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    row = sim.step().to_row()
    assert row["n_kept"] == 1 and row["energy_j"] > 0
    assert sim.budget.level_pct[0] == pytest.approx(80.0)  # compare 80 - 4.0 % without the charger
    # Flamingo does not explore on the charger (the battery cannot measure): 4567, no progress
    parts = _with_extras(scripted_parts(rounds=1), {"charging": charging})
    pol = experiment_policy(parts.cfg, None, "flamingo")
    sim = Simulation(parts, pol, "flamingo", 0, UniformSelector())
    plan = sim.plan_round()
    modes = dict(zip(plan.chosen.tolist(), plan.outcome.mode))
    assert modes[0] == "default" and modes[2] == "explore"
    assert pol.explored[0] == 0


def test_charge_state_from_level_changes_only():
    # traces.charge_state: level (the paper's appendix A.2): the same phone held full on the charger
    # (plug column 1, level flat) counts as unplugged, so its training draws on its battery: 80 - 4.0 %.
    import dataclasses

    charging = np.zeros((4, 3), dtype=np.float32)
    charging[0] = 1.0
    parts = _with_extras(scripted_parts(rounds=1), {"charging": charging})
    parts.cfg = dataclasses.replace(parts.cfg, traces=dataclasses.replace(parts.cfg.traces, charge_state="level"))
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    assert not sim._plugged(0.0, np.array([0]))[0]
    sim.step()
    task_pct = 100 * STEPS * LAT_S * POWER_W / CAPACITY_J
    assert sim.budget.level_pct[0] == pytest.approx(80.0 - task_pct, abs=0.01)
    # a rising level still counts as charging under either reading
    parts = _with_extras(scripted_parts(rounds=1), {"charging": charging})
    parts.cfg = dataclasses.replace(parts.cfg, traces=dataclasses.replace(parts.cfg.traces, charge_state="level"))
    parts.traces.state[0, 0] = 1
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    assert sim._plugged(0.0, np.array([0]))[0]


def test_an_update_lost_after_training_counts_as_interrupted_not_kept():
    """Simulation.lose_updates (a Flower ClientApp that raised): the scripted round's one kept client
    drops as interrupted; its energy and the round's time stay as planned."""
    parts = scripted_parts()
    whole = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    plain = whole.finish_round(whole.plan_round(), float("nan")).to_row()
    sim = Simulation(scripted_parts(), experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    plan = sim.plan_round()
    assert plan.kept.tolist() == [0]
    with pytest.raises(ValueError, match=r"^lose_updates: clients \[2\] are not among round 1's kept clients$"):
        sim.lose_updates(plan, np.array([2]))
    lost = sim.lose_updates(plan, np.array([0]))
    assert plan.kept.tolist() == [0] and lost.kept.tolist() == [] and lost.settled.kept.tolist() == []  # the plan itself unchanged
    row = sim.finish_round(lost, float("nan")).to_row()
    assert (row["n_kept"], row["dropped_interrupted"]) == (0, plain["dropped_interrupted"] + 1) == (0, 1)
    assert (row["energy_j"], row["duration_s"], row["time_s"]) == (plain["energy_j"], plain["duration_s"], plain["time_s"])
    assert sim.times_kept[0] == 0 and whole.times_kept[0] == 1
    with pytest.raises(ValueError, match=r"^lose_updates: plan is for round 1, the simulation is at round 2$"):
        sim.plan_round()
        sim.lose_updates(lost, np.array([0]))


def test_the_loop_reads_its_rules_and_nothing_else_of_the_experiment():
    """Simulation takes RoundRules once, when it is built: with the experiment taken away afterwards,
    rounds run and give what they give with it (so no round reads data, phones, policies, selection,
    aggregation or tracking); the rules are the experiment's own sections, and an unresolved model
    size is refused when they are made."""
    import dataclasses

    from flamingo_sim.fl.sim.rules import RoundRules

    parts = scripted_parts(rounds=2)
    rules = parts.rules
    assert (rules.fl, rules.traces, rules.devices, rules.fedbuff) == (parts.cfg.fl, parts.cfg.traces, parts.cfg.devices, parts.cfg.fedbuff)
    assert rules.model_size_mb == 14.0 and rules.in_use_threshold == parts.cfg.policy.interference.in_use_threshold
    with pytest.raises(dataclasses.FrozenInstanceError):
        rules.model_size_mb = 1.0  # type: ignore[misc]
    reference = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    expected = [reference.step().to_row() for _ in range(2)]
    blind = scripted_parts(rounds=2)
    sim = Simulation(blind, experiment_policy(blind.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    assert not hasattr(sim, "cfg")
    blind.cfg = None  # type: ignore[assignment]
    got = [sim.step().to_row() for _ in range(2)]
    assert got == expected and sim.is_done()
    unresolved = dataclasses.replace(parts.cfg, network=dataclasses.replace(parts.cfg.network, model_size_mb=None))
    with pytest.raises(ValueError, match=r"^network\.model_size_mb is unset; flamingo_sim\.fl\.compose\.build_components resolves it$"):
        RoundRules.of(unresolved)


# --- what mutation testing found (.ci/mutation.py core): survivors these tests kill ---


def test_train_by_batch_trains_each_group_with_its_minibatch_and_keeps_the_job_order():
    """``devices.memory: shrink_batch``: the clients of one job train in groups of one minibatch size
    each, and the updates come back in the job's client order (two groups, interleaved)."""
    from flamingo_sim.fl.sim.seam import TrainJob

    parts = scripted_parts()
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    start = {k: v.clone() for k, v in sim.params.items()}
    got = sim._train_by_batch(TrainJob(start, (0, 2, 3), (0, 2, 3), 1), np.array([4, 2, 4]))
    fours = sim.seam.train(TrainJob(start, (0, 3), (0, 3), 1, batch_size=4))
    two = sim.seam.train(TrainJob(start, (2,), (2,), 1, batch_size=2))
    rows = [(fours, 0), (two, 0), (fours, 1)]  # the job's order: client 0, 2, 3
    for i, (part, j) in enumerate(rows):
        assert all(torch.equal(got.params[k][i], part.params[k][j]) for k in got.params), i
        assert got.losses[i] == part.losses[j] and got.n_samples[i] == part.n_samples[j]
    cohort = sim.seam.train(TrainJob(start, (2,), (2,), 1))  # the cohort's minibatch (16) trains client 2 otherwise
    assert any(not torch.equal(cohort.params[k][0], got.params[k][1]) for k in got.params)


class _Recording(UniformSelector):
    """The uniform selector, keeping the coordinator's view and what it observes."""

    def __init__(self) -> None:
        super().__init__()
        self.views: list = []
        self.observed: list = []

    def select(self, online, n, generator, view=None):
        self.views.append(view)
        return super().select(online, n, generator, view)

    def select_online(self, online, n, generator, view=None):
        self.views.append(view)
        return super().select_online(online, n, generator, view)

    def observe(self, round, clients, n_samples, train_loss, duration_s):
        self.observed.append((round, np.asarray(clients).copy(), None if duration_s is None else np.asarray(duration_s).copy()))


def _levels(parts: Components, row0: list[float]) -> Components:
    tr = parts.traces
    levels = tr.level_pct.copy()
    levels[0] = row0
    parts.traces = ClientTraces(step_s=600, device_ids=tr.device_ids, level_pct=levels, state=tr.state, extras=tr.extras,
                                client_ids=tr.client_ids, client_device=tr.client_device, shift_s=tr.shift_s)
    return parts


def test_the_owners_drain_during_the_task_comes_out_of_the_spare_energy():
    """Client 0 at 14.5 % has 4.5 % above the 10 % floor, and the task needs 2.8 %; but its owner
    drains it to 12 % at 600 s, before the task ends (607.6 s): 2.5 % of the spare is the owner's,
    so the task does not fit and the battery runs out; with 16.6 % (same drain, 4.1 % left) it fits."""
    short = _levels(scripted_parts(), [14.5, 12.0, 12.0])
    row = Simulation(short, experiment_policy(short.cfg, None, "baseline"), "baseline", 0, UniformSelector()).step().to_row()
    assert row["n_kept"] == 0 and row["dropped_battery_exhausted"] == 2  # clients 0 and 2
    enough = _levels(scripted_parts(), [16.6, 14.1, 14.1])
    row = Simulation(enough, experiment_policy(enough.cfg, None, "baseline"), "baseline", 0, UniformSelector()).step().to_row()
    assert row["n_kept"] == 1 and row["dropped_battery_exhausted"] == 1


def test_the_horizon_ends_the_run_in_hours():
    parts = scripted_parts(rounds=100, horizon_h=0.1)  # 360 s: the first round (607.6 s) passes it
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    assert not sim.is_done()
    sim.step()
    assert sim.is_done() and sim.clock_s > 360.0
    parts = scripted_parts(rounds=100, horizon_h=1.0)  # 3,600 s: not after the first round
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    sim.step()
    assert 0 < sim.clock_s < 3600.0 and not sim.is_done()


def test_foreground_time_counts_every_slot_and_the_last_one_persists():
    parts = _with_extras(scripted_parts(), {"screen_on_frac": np.ones((4, 3), dtype=np.float32)})
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    step = 600.0
    span = np.array([30.0, 5 * step + 17.0, (USAGE_SLOTS + 3) * step])  # within the first slot, several, past the last
    assert sim._foreground_s(0.0, np.array([0, 0, 0]), span).tolist() == span.tolist()  # in use all the time


def test_in_use_is_strictly_above_the_threshold_and_a_missing_charger_reading_falls_back_to_the_state():
    parts = scripted_parts()
    threshold = parts.cfg.policy.interference.in_use_threshold
    at = np.full((4, 3), threshold, dtype=np.float32)
    at[1] = np.nextafter(np.float32(threshold), np.float32(1))
    charging = np.full((4, 3), np.nan, dtype=np.float32)  # no reading: the level's state decides
    parts = _with_extras(parts, {"screen_on_frac": at, "charging": charging})
    tr = parts.traces
    state = tr.state.copy()
    state[0] = 1  # client 0's level rises: on the charger
    parts.traces = ClientTraces(step_s=600, device_ids=tr.device_ids, level_pct=tr.level_pct, state=state, extras=tr.extras,
                                client_ids=tr.client_ids, client_device=tr.client_device, shift_s=tr.shift_s)
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    use = sim._in_use(0.0, np.array([0, 1]))
    assert not use[0].any() and use[1, :3].all()  # at the threshold: not in use; just above: in use
    assert sim._plugged(0.0, np.array([0, 2])).tolist() == [True, False]


def test_jain_energy_is_over_the_whole_population_and_round_zero_counts_nothing():
    parts = scripted_parts()
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    zero = sim.initial_record().to_row()
    assert (zero["n_selected"], zero["n_kept"], zero["clients_lost"], zero["clients_lost_cum"], zero["energy_cum_j"]) == (0, 0, 0, 0, 0.0)
    row = sim.step().to_row()
    drawn = sim.energy_drawn_j.values.astype(float)
    assert len(drawn) == 3  # clients 0, 2 and 3 drew energy; client 1 (offline) did not
    assert row["jain_energy"] == pytest.approx(drawn.sum() ** 2 / (4 * (drawn**2).sum()), rel=1e-15)


def test_the_selector_sees_the_rounds_view_and_hears_the_kept_clients_durations():
    import dataclasses

    parts = scripted_parts()
    parts.cfg = dataclasses.replace(parts.cfg, traces=dataclasses.replace(parts.cfg.traces, min_pct=8.0))  # not the view's default
    sel = _Recording()
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, sel)
    row = sim.step().to_row()
    (view,) = sel.views
    assert (view.round, view.min_pct, view.n_clients) == (1, 8.0, 4)
    # the view reads the budget's levels when asked (after the round here: client 0 paid for its task)
    assert view.battery_pct_at(np.array([0, 3])).tolist() == sim.budget.level_pct_at(np.array([0, 3])).tolist()
    ((rnd, clients, durations),) = sel.observed
    assert rnd == 1 and clients.tolist() == [0] and durations.tolist() == [row["duration_s"]]


def test_the_memory_budget_reaches_the_trainer_in_bytes_and_the_default_log_prints(capsys):
    parts = scripted_parts(memory_budget_gb=0.5)
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    assert sim.trainer.memory_budget_bytes == 1 << 29
    sim.log("a line for the user")
    assert capsys.readouterr().err == "a line for the user\n"

"""The round loop on the traces' network: a round by hand, the radio in the battery, who is reachable, lognormal as before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from flamingo_sim.config import from_mapping
from flamingo_sim.devices.profiles import ProfileSet, load_profile
from flamingo_sim.devices.radio import WIFI
from flamingo_sim.fl.config import ExperimentConfig
from flamingo_sim.fl.data.proxy import SyntheticFederated
from flamingo_sim.fl.plugins import experiment_policy
from flamingo_sim.fl.sim.fedbuff import AsyncSimulation
from flamingo_sim.fl.sim.population import build_population
from flamingo_sim.fl.sim.records import NETWORK_COLUMNS, RoundRecord
from flamingo_sim.fl.sim.simulation import Components, Simulation
from flamingo_sim.fl.strategy.selection import UniformSelector
from flamingo_sim.models import build_model
from flamingo_sim.traces.store import ClientTraces

#: Huang et al.'s powers at the scripted rates, bounded by the phones' power profiles (flamingo_sim/devices/radio.py):
#: LTE down at 10 Mbit/s 1807.7 mW -> 773.1 mW (OnePlus 8 rx, 200.8 mA x 3.85 V); LTE up at 4 Mbit/s 3041.6 mW ->
#: 2490.2 mW (its top tx level, 646.8 mA x 3.85 V); LTE's promotion (1210.7 mW) and tail (1060 mW) -> 773.1 mW;
#: WiFi down at 40 Mbit/s 5613.3 mW -> 584.1 mW (177 mA x 3.3 V); WiFi up at 20 Mbit/s 5796.3 mW -> 1295 mW (Pixel 3 tx, 350 mA x 3.7 V)
LTE_DOWN_W, LTE_UP_W, LTE_IDLE_W = min(0.05197 * 10 + 1.28804, 0.2008 * 3.85), min(0.43839 * 4 + 1.28804, 0.6468 * 3.85), 0.2008 * 3.85
WIFI_DOWN_W, WIFI_UP_W = min(0.13701 * 40 + 0.13286, 0.177 * 3.3), min(0.28317 * 20 + 0.13286, 0.350 * 3.7)

ROOT = Path(__file__).resolve().parents[3]
CAPACITY_J = 2915 * 3.6 * 3.85  # Pixel 3
PIXEL3 = load_profile(ROOT / "profiles", "pixel_3", "mobilenet_v2")
LAT_S, POWER_W = PIXEL3.baseline.step_latency_s, PIXEL3.baseline.power_w  # choice 4567
STEPS = 12
MBIT = 14.0 * 8


def parts_on(states: list[list[float]], model: str = "traces", levels: float = 80.0, mode: str = "sync", **network) -> Components:
    """One client per row of ``states`` (network_state per 10-minute slot, 12 slots), every battery at ``levels``."""
    st = np.array([row * (12 // len(row)) for row in states], dtype=np.float32)
    n = st.shape[0]
    traces = ClientTraces(step_s=600, device_ids=np.arange(n), level_pct=np.full(st.shape, levels, np.float32), state=np.zeros(st.shape, np.int8),
                          extras={"network_state": st}, client_ids=np.arange(n), client_device=np.arange(n), shift_s=np.zeros(n, np.int64))
    cfg = from_mapping(ExperimentConfig, {
        "name": "network",
        "phones": {"mix": {"pixel_3": 1.0}},
        "network": {"model_size_mb": 14.0, "model": model, "wifi_down_mbps": 40.0, "wifi_up_mbps": 20.0, "cellular_down_mbps": 10.0,
                    "cellular_up_mbps": 4.0, "spread_sigma": 0.0, "bandwidth_sigma": 0.0, **network},
        "fl": {"participants_per_round": n, "overcommit": 1, "local_steps": STEPS, "rounds": 2, "mode": mode},
        **({"devices": {"thermal": "none", "memory": "none"}} if mode == "sync" else {}),  # by hand without heat and memory
    })
    data = SyntheticFederated(n_clients=n, n_features=5, n_classes=3, seed=0, mean_samples=40, test_samples=50, test_clients=n)
    return Components(cfg=cfg, traces=traces, population=build_population(n, n, {"pixel_3": 1.0}, 20.0, 0.0, seed=0),
                      profiles=ProfileSet.load(ROOT / "profiles", ["pixel_3"], "mobilenet_v2"), dataset=data,
                      model=build_model("logreg", data.input_shape, data.n_classes, seed=0), test_data=data.test_data(),
                      choice_labels=("4567", "456", "45", "4", "0123", "012", "01", "0"))


def test_a_round_on_wifi_by_hand():
    """One client on WiFi: the download (promotion, 112 Mbit at 40 Mbit/s), 12 steps of 4567, the upload at 20 Mbit/s; the
    radio's energy (Huang et al.'s WiFi model, two promotions and two tails: the steps outlast the 0.238 s tail) joins the
    task's, is reported apart, and the battery pays both."""
    parts = parts_on([[1.0]])
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    row = sim.step().to_row()
    train_s, train_j = STEPS * LAT_S, STEPS * LAT_S * POWER_W
    comm_s = 2 * WIFI.promotion_s + MBIT / 40.0 + MBIT / 20.0
    radio_j = 2 * (WIFI.promotion_j + WIFI.tail_j) + WIFI_DOWN_W * (MBIT / 40.0) + WIFI_UP_W * (MBIT / 20.0)
    assert row["duration_s"] == pytest.approx(train_s + comm_s, rel=1e-12)
    assert row["transfer_s"] == pytest.approx(comm_s, rel=1e-12)
    assert row["radio_energy_j"] == pytest.approx(radio_j, rel=1e-12)
    assert row["energy_j"] == pytest.approx(train_j + radio_j, rel=1e-12)
    assert (row["n_unreachable"], row["n_cellular"]) == (0, 0)
    assert sim.budget.level_pct[0] == pytest.approx(80.0 - 100 * (train_j + radio_j) / CAPACITY_J, rel=1e-9)
    assert RoundRecord.from_row(row).to_row() == row  # the columns round-trip through a checkpoint's rows


def test_cellular_costs_more_radio_energy_than_wifi_and_takes_longer():
    parts = parts_on([[1.0], [2.0]])
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    plan = sim.plan_round()
    assert plan.transfers is not None and plan.transfers.start_state.tolist() == [1, 2]
    assert plan.comm_s[1] > plan.comm_s[0] and plan.transfers.radio_energy_j[1] > 2 * plan.transfers.radio_energy_j[0]


def test_no_network_or_cellular_under_unmetered_only_is_not_reachable():
    states = [[1.0], [2.0], [0.0], [1.0]]
    for unmetered, n_out in ((False, 1), (True, 2)):
        parts = parts_on(states, unmetered_only=unmetered)
        sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
        plan = sim.plan_round()
        assert plan.n_online == 4 and plan.n_unreachable == n_out
        assert sorted(plan.chosen.tolist()) == ([0, 1, 3] if not unmetered else [0, 3])


def test_the_lognormal_model_leaves_the_round_as_it_was():
    """The default: the transfers are Population.comm_s (bit for bit), everyone online is selectable, the radio costs
    nothing and the metrics have no network column."""
    parts = parts_on([[1.0], [2.0], [0.0]], model="lognormal")
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    plan = sim.plan_round()
    assert np.array_equal(plan.comm_s, parts.population.comm_s(14.0, plan.chosen))
    assert np.array_equal(plan.duration_s, plan.outcome.duration_s + parts.population.comm_s(14.0, plan.chosen))
    assert sorted(plan.chosen.tolist()) == [0, 1, 2] and plan.n_unreachable == 0
    row = sim.finish_round(plan, float("nan")).to_row()
    assert not set(NETWORK_COLUMNS) & set(row)
    assert row["energy_j"] == pytest.approx(3 * STEPS * LAT_S * POWER_W, rel=1e-12)
    # unmetered_only works with the lognormal pricing too (and then reports)
    parts = parts_on([[1.0], [2.0], [0.0]], model="lognormal", unmetered_only=True)
    sim = Simulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    row = sim.step().to_row()
    assert row["n_unreachable"] == 2 and row["radio_energy_j"] == 0.0


def test_fedbuff_runs_on_the_traces_network():
    parts = parts_on([[1.0], [2.0], [1.0]], mode="fedbuff")
    sim = AsyncSimulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    row = sim.step().to_row()
    assert row["radio_energy_j"] > 0 and row["transfer_s"] > 0
    assert row["energy_j"] > row["radio_energy_j"]

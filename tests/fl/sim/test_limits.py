"""Heat and memory in the round loop (``devices.thermal``, ``devices.memory``) on the scripted
four-client scenario of test_engine, checked against hand-computed steps."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from flamingo_sim.config import from_mapping
from flamingo_sim.devices.policies import PolicyConfig
from flamingo_sim.devices.soc import load_phones
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.config import DevicesConfig, ExperimentConfig
from flamingo_sim.fl.runner.compose import make_policy
from flamingo_sim.fl.sim.limits import DeviceLimits, training_memory_bytes
from flamingo_sim.fl.sim.simulation import Components, Simulation
from flamingo_sim.fl.strategy.selection import UniformSelector
from tests.fl.sim.test_simulation import COMM_S, LAT_S, POWER_W, ROOT, STEPS, scripted_parts
from tests.identity import assert_metrics_match, assert_summary_matches

PIXEL3 = load_phones(ROOT / "profiles")["pixel_3"]
assert PIXEL3.body is not None and PIXEL3.memory is not None
R, TAU = PIXEL3.body.resistance_k_per_w, PIXEL3.body.time_constant_s
TRACE_C = 30.0  # the scripted traces carry no temperature: the engine's default


def _sim(devices: dict, policy: str = "baseline", **policy_cfg) -> Simulation:
    parts = scripted_parts()
    cfg = dataclasses.replace(parts.cfg, devices=DevicesConfig(**devices), policy=PolicyConfig(**policy_cfg))
    parts = dataclasses.replace(parts, cfg=cfg)
    return Simulation(parts, make_policy(policy, cfg), policy, 0, UniformSelector())


def test_throttled_round_by_hand():
    sim = _sim({"thermal": "rc", "throttle_threshold_c": 35.0})
    row = sim.step().to_row()
    compute_s = STEPS * LAT_S  # 596.4 s on 4567 at 2.731 W: the excess heads for 2.731 x 4.30 = 11.7 K
    onset_s = TAU * math.log(POWER_W * R / (POWER_W * R - (35.0 - TRACE_C)))  # reaches 5 K at ~318 s
    throttled_s = (compute_s - onset_s) / 0.6  # big cores at 60 % speed
    assert 300.0 < onset_s < 330.0
    assert row["n_kept"] == 1
    assert row["duration_s"] == pytest.approx(onset_s + throttled_s + COMM_S, rel=1e-12)
    assert row["throttled_pixel_3"] == 3  # the three online clients all priced past the onset
    assert row["throttled_s_pixel_3"] == pytest.approx(3 * throttled_s, rel=1e-12)
    # the kept client's battery paid P x onset + 0.5 P x the throttled time
    assert sim.client_energy_j[0] == pytest.approx(POWER_W * onset_s + 0.5 * POWER_W * throttled_s, rel=1e-12)
    assert row["declined_too_hot"] == 0


def test_no_throttling_below_the_threshold_prices_as_the_profiles():
    hot = _sim({"thermal": "rc"}).step().to_row()  # 40 degC: the 11.7 K steady state would pass it at ~1090 s, after the task
    cold = _sim({}).step().to_row()
    assert hot["duration_s"] == cold["duration_s"] and hot["energy_j"] == cold["energy_j"]
    assert hot["throttled_pixel_3"] == 0
    assert "throttled_pixel_3" not in cold and "dropped_out_of_memory" not in cold  # columns only with a model on


def test_monitoring_reads_the_modelled_temperature():
    # Round 1 heats client 0 (the only one left online after it); round 2 asks it again right away.
    hot = _sim({"thermal": "rc", "throttle_threshold_c": 35.0}, baseline_admission="monitored", max_temperature_c=35.0)
    hot.step()
    excess = hot.limits.excess_c[0]
    assert excess == pytest.approx(5.0 + (0.5 * POWER_W * R - 5.0) * (1 - math.exp(-((STEPS * LAT_S - TAU * math.log(
        POWER_W * R / (POWER_W * R - 5.0))) / 0.6) / TAU)), rel=1e-12)  # at 1.37 W the excess sinks from 5 K towards 5.87 K
    row = hot.step().to_row()
    assert (row["n_selected"], row["n_kept"], row["declined_too_hot"]) == (1, 0, 1)
    cold = _sim({}, baseline_admission="monitored", max_temperature_c=35.0)
    cold.step()
    assert cold.step().to_row()["n_kept"] == 1  # the trace alone (30 degC) never says too hot


def test_excess_decays_between_requests():
    sim = _sim({"thermal": "rc"})
    limits = sim.limits
    assert limits is not None
    limits.excess_c[:] = 10.0
    limits.at_s[:] = 100.0
    t = limits.temperature_c(100.0 + TAU, np.array([0, 2]), np.array([25.0, 31.0]))
    assert t == pytest.approx([25.0 + 10.0 / math.e, 31.0 + 10.0 / math.e], rel=1e-12)


def test_out_of_memory_drops_with_its_own_reason():
    fixed, per_sample = training_memory_bytes("mobilenet_v2", 224, 3)
    need_gb = (fixed + 16 * per_sample) / 1e9  # ~2.5 GB at batch 16 against the Pixel 3's 2.0 GB
    assert need_gb > PIXEL3.memory.app_limit_gb
    row = _sim({"memory": "drop"}).step().to_row()
    assert (row["n_kept"], row["dropped_out_of_memory"], row["out_of_memory_pixel_3"], row["dropped_declined"]) == (0, 3, 3, 0)
    assert row["energy_j"] == 0.0
    fits = _sim({"memory": "drop", "memory_limit_factor": need_gb / PIXEL3.memory.app_limit_gb * 1.01}).step().to_row()
    assert (fits["n_kept"], fits["dropped_out_of_memory"]) == (1, 0)


def test_shrink_batch_trains_the_largest_batch_that_fits():
    fixed, per_sample = training_memory_bytes("mobilenet_v2", 224, 3)
    fit = math.floor((PIXEL3.memory.app_limit_gb * 1e9 - fixed) / per_sample)
    assert 1 <= fit < 16
    sim = _sim({"memory": "shrink_batch"})
    row = sim.step().to_row()
    assert (row["n_kept"], row["batch_shrunk_pixel_3"], row["dropped_out_of_memory"]) == (1, 3, 0)
    assert row["duration_s"] == pytest.approx(STEPS * LAT_S * fit / 16 + COMM_S, rel=1e-12)  # a step's work scales with its batch
    assert sim.samples_trained == STEPS * fit
    # nothing fits: dropped even when shrinking
    none_fit = _sim({"memory": "shrink_batch", "memory_limit_factor": fixed / 1e9 / PIXEL3.memory.app_limit_gb * 0.5}).step().to_row()
    assert (none_fit["dropped_out_of_memory"], none_fit["batch_shrunk_pixel_3"]) == (3, 0)


def test_thermal_state_round_trips_through_a_checkpoint():
    sim = _sim({"thermal": "rc", "throttle_threshold_c": 35.0})
    sim.step()
    state = sim.state_dict()
    again = _sim({"thermal": "rc", "throttle_threshold_c": 35.0})
    again.load_state_dict(state)
    assert again.limits is not None and sim.limits is not None
    assert np.array_equal(again.limits.excess_c, sim.limits.excess_c) and np.array_equal(again.limits.at_s, sim.limits.at_s)
    assert again.step().to_row() == sim.step().to_row()


def test_a_phone_without_heat_or_memory_entries_is_refused():
    parts = scripted_parts()
    bare = dataclasses.replace(parts.profiles.profiles[0].phone, body=None, memory=None)
    with pytest.raises(ConfigError, match="devices.thermal: phone 'pixel_3' has no body"):
        DeviceLimits(DevicesConfig(thermal="rc"), _with_phone(parts, bare), parts.population.phone_idx, 16, 3)
    with pytest.raises(ConfigError, match="devices.memory: phone 'pixel_3' has no memory entry"):
        DeviceLimits(DevicesConfig(memory="drop"), _with_phone(parts, bare), parts.population.phone_idx, 16, 3)


def _with_phone(parts: Components, phone):
    from flamingo_sim.devices.profiles import ProfileSet

    prof = dataclasses.replace(parts.profiles.profiles[0], phone=phone)
    return ProfileSet(parts.profiles.model, parts.profiles.phones, (prof,))


def test_config_refuses_bad_values_and_fedbuff():
    with pytest.raises(ValueError, match="time_constant_factor"):
        DevicesConfig(time_constant_factor=0.0)
    with pytest.raises(ConfigError, match=r"fl\.mode: sync"):
        from_mapping(ExperimentConfig, {"name": "x", "fl": {"mode": "fedbuff"}, "devices": {"thermal": "rc"}})


REFERENCE = Path(__file__).resolve().parent / "reference" / "main_job_short"


@pytest.mark.slow
def test_models_off_is_bit_identical_to_the_code_before_them(tmp_path):
    """The main job, shortened (10 rounds), with ``devices`` at its defaults equals the run that the
    code before the two models wrote (``reference/main_job_short``: metrics.parquet, summary.json;
    rewritten when Jain's index stopped using BLAS, which moved ``jain_energy`` by an ulp and nothing
    else; its ``provenance.json`` names the commit and the machine). Every simulated figure is
    compared exactly on any CPU; torch's accuracy and losses exactly on the reference's CPU kind,
    within the README's bounds elsewhere (:mod:`tests.identity`)."""
    env = {**os.environ, "FLAMINGO_SIM_QUIET": "1", "PYTHONPATH": str(ROOT)}
    env.pop("OMP_NUM_THREADS", None)
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "flamingo_sim", "run", str(ROOT / "experiments" / "openimage_mobilenet.yaml"), "--out",
                           str(out), "--set", "fl.rounds=10", "--set", "fl.eval_every=2"], capture_output=True, text=True, env=env,
                          timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr
    assert_metrics_match(pd.read_parquet(out / "metrics.parquet"), REFERENCE / "metrics.parquet")
    assert_summary_matches(json.loads((out / "summary.json").read_text()), REFERENCE / "summary.json")


def test_shrink_batch_is_refused_on_engines_that_train_every_client_alike():
    from flamingo_sim.fl.runner.compose import check_composition

    cfg = from_mapping(ExperimentConfig, {"name": "x", "devices": {"memory": "shrink_batch"}})
    with pytest.raises(ConfigError, match=r"x\.yaml: devices\.memory: 'shrink_batch' trains each client with its own minibatch natively only; use 'drop' with --engine flower"):
        check_composition(cfg, "x.yaml", engine="flower")
    check_composition(dataclasses.replace(cfg, devices=DevicesConfig(memory="drop")), "x.yaml", engine="flower")  # drop is fine

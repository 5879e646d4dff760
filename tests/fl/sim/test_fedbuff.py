"""FedBuff: staleness weights and the server step by hand, per-client clocks on a scripted scenario, runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.config import FedBuffConfig
from flamingo_sim.fl.plugins import experiment_policy
from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.fl.sim.fedbuff import AsyncSimulation
from flamingo_sim.fl.strategy.aggregate import fedbuff_step, staleness_weights
from flamingo_sim.fl.strategy.selection import UniformSelector
from tests.cli_runs import assert_identical
from tests.fl.sim.test_simulation import CAPACITY_J, COMM_S, LAT_S, POWER_W, STEPS, _with_extras, scripted_parts

ROOT = Path(__file__).resolve().parents[3]


def test_staleness_weights_by_hand():
    # (1 + tau) ** -0.5: tau 0 -> 1, 1 -> 1/sqrt(2) = 0.7071, 3 -> 1/2
    assert staleness_weights([0, 1, 3], 0.5).tolist() == pytest.approx([1.0, 0.70710678, 0.5])
    assert staleness_weights([0, 4], 1.0).tolist() == pytest.approx([1.0, 0.2])
    assert staleness_weights([2, 9], 0.0).tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="staleness must be >= 0"):
        staleness_weights([-1], 0.5)


def test_fedbuff_step_by_hand():
    x = {"w": torch.tensor([1.0]), "n": torch.tensor(4)}
    deltas = {"w": torch.tensor([[0.4], [-0.2], [1.0]]), "n": torch.tensor([3, 3, 3])}
    out = fedbuff_step(x, deltas, torch.tensor([1.0, 0.5, 0.25]), server_lr=2.0)
    # 1 + 2 * (0.4 * 1 - 0.2 * 0.5 + 1.0 * 0.25) / 3 = 1 + 2 * 0.55 / 3 = 1.3667
    assert out["w"].item() == pytest.approx(1 + 2 * 0.55 / 3)
    assert out["n"].item() == 4 + round(2 * (3 + 1.5 + 0.75) / 3)  # 7.5 -> 8 (integer entries rounded)
    assert out["w"].dtype == torch.float32 and out["n"].dtype == torch.int64  # each entry keeps its dtype


def test_fedbuff_step_with_a_buffer_of_one_and_its_refusals():
    x = {"w": torch.tensor([1.0, 2.0])}
    out = fedbuff_step(x, {"w": torch.tensor([[0.5, -1.0]])}, torch.tensor([0.5]), server_lr=1.0)  # buffer_size 1: one delta
    assert out["w"].tolist() == [1.25, 1.5]
    with pytest.raises(ValueError, match=r"^no deltas to apply$"):
        fedbuff_step(x, {"w": torch.zeros(0, 2)}, torch.tensor([]), server_lr=1.0)
    with pytest.raises(ValueError, match=r"^w: expected deltas of shape \(2, 2\), got \(1, 2\)$"):
        fedbuff_step(x, {"w": torch.zeros(1, 2)}, torch.tensor([1.0, 1.0]), server_lr=1.0)


@pytest.mark.slow
def test_per_client_clock_on_the_scripted_scenario():
    parts = scripted_parts()
    parts = dataclasses.replace(parts, cfg=dataclasses.replace(parts.cfg, fedbuff=FedBuffConfig(buffer_size=1, concurrency=3)))
    sim = AsyncSimulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    before = {k: v.clone() for k, v in sim.params.items()}
    row = sim.step().to_row()
    # the three online clients start at t = 0; client 0 (plenty of battery) arrives after its own task:
    task_s, task_j = STEPS * LAT_S + COMM_S, STEPS * LAT_S * POWER_W  # 607.6 s, 1115 J
    assert row["time_s"] == pytest.approx(task_s)
    assert row["n_kept"] == 1 and row["staleness_mean"] == 0.0
    # client 2 (0.4 % = 161.6 J spare) runs flat after that share of its task: 607.6 * 161.6 / 1115 = 88.1 s;
    # at the re-entry level (= min_pct) it is online again with no spare energy, so its slot
    # re-dispatches it every retry_s (60 s), each task ending at once: at 88.1 + 60 j s for j = 0..8
    # (< 607.6 s), 9 more dispatches, each battery_exhausted; drops count at arrival (retry_s after
    # dispatch), so the one dispatched at 568.1 s is not counted yet
    flat_s = task_s * 0.004 * CAPACITY_J / task_j
    assert flat_s == pytest.approx(88.1, abs=0.05)
    again = int(np.ceil((task_s - flat_s) / 60.0))
    assert again == 9
    assert row["n_selected"] == 3 + again
    assert row["dropped_battery_exhausted"] == 1 + again - 1
    assert sim.times_kept.tolist() == [1, 0, 0, 0]
    assert any(not torch.equal(before[k], sim.params[k]) for k in before)
    with pytest.raises(NotImplementedError):
        sim.state_dict()


def test_fedbuff_config_errors():
    with pytest.raises(ConfigError, match=r"toolkit_fedbuff\.yaml: fedbuff\.buffer_size: expected an integer >= 1, got 0$"):
        run_experiment(ROOT / "experiments/toolkit_fedbuff.yaml", overrides=["fedbuff.buffer_size=0"])
    with pytest.raises(ConfigError, match=r"aggregation: fl\.mode 'fedbuff' updates the server with FedBuff's own step"):
        run_experiment(ROOT / "experiments/toolkit_fedbuff.yaml", overrides=["aggregation.name=fedyogi"])


@pytest.mark.slow
def test_fedbuff_run_is_deterministic_and_reports_like_sync(tmp_path, monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")
    small = ["fl.rounds=4", "fl.participants_per_round=8", "fl.local_steps=4", "fl.eval_every=2", "data.proxy.n_clients=200",
             "fedbuff.buffer_size=4", "fedbuff.concurrency=10", "policies=[baseline]"]
    a = run_experiment(ROOT / "experiments/toolkit_fedbuff.yaml", out_dir=tmp_path / "a", overrides=small, log=lambda m: None)
    b = run_experiment(ROOT / "experiments/toolkit_fedbuff.yaml", out_dir=tmp_path / "b", overrides=small, log=lambda m: None)
    assert_identical(a.metrics, b.metrics)
    assert a.metrics["round"].iloc[0] == 0 and a.metrics["time_s"].iloc[0] == 0.0  # round 0: the initial model at t = 0
    m = a.metrics[a.metrics["round"] >= 1]
    assert (m["n_kept"] == 4).all() and np.all(np.diff(m["time_s"]) > 0) and (m["staleness_mean"] >= 0).all()
    sync = run_experiment(ROOT / "experiments/openimage_mobilenet.yaml", out_dir=tmp_path / "s", overrides=small[:5] + ["policies=[baseline]"], log=lambda m: None)
    assert set(sync.metrics.columns) <= set(m.columns)  # the same columns, plus staleness_mean
    assert a.summary["policies"]["baseline"]["time_to_target_s"] is not None
    with pytest.raises(ConfigError, match=r"fl\.mode: 'fedbuff' runs natively \(not on FedScale or Flower\) and writes no checkpoints \(no resume\)"):
        run_experiment(ROOT / "experiments/toolkit_fedbuff.yaml", out_dir=tmp_path / "a", overrides=small, resume=True, log=lambda m: None)


# --- what mutation testing found (.ci/mutation.py core): survivors these tests kill ---


def test_fedbuff_accumulates_energy_and_foreground_and_frees_only_unreferenced_versions():
    """Over the scripted scenario's updates: the cumulative energy is the sum of the windows' (and
    positive); the owners' foreground time only grows; each model version is kept while a task in
    flight or in the buffer started from it, and the reference counts add up to those tasks."""
    parts = _with_extras(scripted_parts(), {"screen_on_frac": np.ones((4, 3), dtype=np.float32)})  # the owners use their phones
    parts = dataclasses.replace(parts, cfg=dataclasses.replace(parts.cfg, fedbuff=FedBuffConfig(buffer_size=1, concurrency=3)))
    sim = AsyncSimulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    energy, foreground = 0.0, 0.0
    for _ in range(2):
        row = sim.step().to_row()
        energy += row["energy_j"]
        assert row["energy_j"] > 0 and row["energy_cum_j"] == pytest.approx(energy, rel=1e-12)
        fg = sum(v for k, v in row.items() if k.startswith("foreground_s_"))
        assert fg > 0 and all(v >= 0 for k, v in row.items() if k.startswith(("foreground_s_", "training_foreground_s_")))
        foreground += fg
        assert all(n >= 0 for n in sim.version_refs.values())
        assert sum(sim.version_refs.values()) == len(sim.busy) + len(sim.buffer)
        assert set(sim.versions) == {sim.round} | {v for v, n in sim.version_refs.items() if n > 0}
    assert foreground > 0


def test_fedbuff_says_why_it_has_no_checkpoint():
    parts = scripted_parts()
    parts = dataclasses.replace(parts, cfg=dataclasses.replace(parts.cfg, fedbuff=FedBuffConfig(buffer_size=1, concurrency=3)))
    sim = AsyncSimulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    with pytest.raises(NotImplementedError, match=r"^fl.mode 'fedbuff' runs are not checkpointed$"):
        sim.state_dict()


def _with_devices(parts, **devices):
    from flamingo_sim.fl.config import DevicesConfig

    cfg = dataclasses.replace(parts.cfg, fedbuff=FedBuffConfig(buffer_size=1, concurrency=3),
                              devices=DevicesConfig(**devices).resolved("fedbuff"))
    return dataclasses.replace(parts, cfg=cfg)


def test_fedbuff_drops_a_task_that_does_not_fit_memory_with_its_own_reason():
    parts = _with_devices(scripted_parts(horizon_h=0.1), thermal="none", memory="drop", memory_limit_factor=1e-6)
    sim = AsyncSimulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    row = sim.step().to_row()  # nothing fits: the horizon (360 s) ends the update with an empty buffer
    assert row["n_kept"] == 0 and row["dropped_declined"] == 0
    # every arrival so far was out of memory (each slot retried every 60 s), counted once, on the Pixel 3
    assert row["dropped_out_of_memory"] == row["out_of_memory_pixel_3"] > 0
    assert row["n_selected"] - 3 <= row["dropped_out_of_memory"] <= row["n_selected"]  # at most one in flight per slot


def test_fedbuff_trains_with_the_minibatch_that_fits():
    parts = _with_devices(scripted_parts(), thermal="none", memory="shrink_batch")
    sim = AsyncSimulation(parts, experiment_policy(parts.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    fit = int(sim.pricing.memory.batch_fit[0])
    small = _with_devices(scripted_parts(), thermal="none", memory="shrink_batch",
                          memory_limit_factor=0.999 * (sim.pricing.memory.fixed_bytes + 4 * sim.pricing.memory.per_sample_bytes) / sim.pricing.memory.limit_bytes[0])
    sim = AsyncSimulation(small, experiment_policy(small.cfg, None, "baseline"), "baseline", 0, UniformSelector())
    assert int(sim.pricing.memory.batch_fit[0]) == 3 < fit
    row = sim.step().to_row()
    # with a minibatch of 3 the tasks are shorter (123 s): the update comes at the first kept arrival;
    # the window's arrivals are that one and client 2's (battery exhausted at 95 s), both shrunk
    assert row["n_kept"] == 1 and row["dropped_battery_exhausted"] == 1 and row["batch_shrunk_pixel_3"] == 2
    assert sim.samples_trained == STEPS * 3

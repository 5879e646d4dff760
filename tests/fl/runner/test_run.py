"""End to end: the shipped experiments scaled down, determinism, resume, and bad configs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from flamingo_sim.cli import main
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.fl.sim.simulation import Simulation
from tests.cli_runs import assert_identical

ROOT = Path(__file__).resolve().parents[3]
SMALL = ["fl.rounds=4", "fl.participants_per_round=8", "fl.local_steps=4", "fl.eval_every=2", "data.proxy.n_clients=200"]
#: Two one-step rounds of two clients on a tiny real-layout dataset (append data.root=...).
TINY_REAL = ["data.image_size=32", "fl.rounds=2", "fl.participants_per_round=2", "fl.local_steps=1", "fl.eval_every=1", "policies=[baseline]"]


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")


@pytest.mark.parametrize("name", ["openimage_mobilenet", "openimage_shufflenet", "speech_resnet34", "fedscale_openimage_mobilenet",
                                  "fedscale_speech_resnet34"])
def test_shipped_experiment_runs_scaled_down(tmp_path, capsys, name):
    out = tmp_path / "run"
    assert main(["run", str(ROOT / "experiments" / f"{name}.yaml"), "--out", str(out), *sum((["--set", s] for s in SMALL), [])]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["experiment"] == name and "NOT real data" in summary["data"]
    base, flam = summary["policies"]["baseline"], summary["policies"]["flamingo"]
    for entry in (base, flam):
        assert 0.0 < entry["final_accuracy"] <= 1.0
        assert entry["total_energy_j"] > 0
        assert entry["clients_lost"] >= 0
    assert set(flam) >= {"time_to_target_s", "energy_to_target_j", "final_accuracy", "clients_lost", "speedup", "energy_efficiency"}
    metrics = pd.read_parquet(out / "metrics.parquet")
    assert len(metrics) == 10 and set(metrics["policy"]) == {"baseline", "flamingo"}  # rounds 0-4 of each
    zero = metrics[metrics["round"] == 0]  # the initial model, evaluated at t = 0, nothing trained
    assert (zero["time_s"] == 0).all() and zero["accuracy"].notna().all() and (zero["n_kept"] == 0).all()
    assert (zero["energy_cum_j"] == 0).all() and (zero["n_online"] > 0).all()
    assert (metrics.groupby("policy")["time_s"].diff().dropna() > 0).all()  # the clock moves forward
    assert (metrics["n_kept"] <= 8).all() and (metrics["n_selected"] <= 11).all()  # ceil(8 x 1.3)
    baseline_rows = metrics[metrics["policy"] == "baseline"]
    assert (baseline_rows["steps_4567"] == baseline_rows["n_kept"] * 4).all()  # the baseline always runs 4567
    assert "baseline" in capsys.readouterr().out  # the summary table


def test_same_config_and_seed_give_identical_results(tmp_path):
    a = run_experiment(ROOT / "experiments/openimage_mobilenet.yaml", out_dir=tmp_path / "a", overrides=SMALL, log=lambda m: None)
    b = run_experiment(ROOT / "experiments/openimage_mobilenet.yaml", out_dir=tmp_path / "b", overrides=SMALL, log=lambda m: None)
    assert_identical(a.metrics, b.metrics)
    c = run_experiment(ROOT / "experiments/openimage_mobilenet.yaml", out_dir=tmp_path / "c", overrides=SMALL + ["seeds=[1]"], log=lambda m: None)
    assert not a.metrics["energy_cum_j"].equals(c.metrics["energy_cum_j"])


def test_resume_after_interrupt_equals_uninterrupted(tmp_path, monkeypatch):
    exp = ROOT / "experiments/openimage_mobilenet.yaml"
    overrides = SMALL + ["fl.rounds=6", "checkpoint_every=2"]
    whole = run_experiment(exp, out_dir=tmp_path / "whole", overrides=overrides, log=lambda m: None)

    real_step = Simulation.step

    def interrupted_step(self):  # Ctrl-C during flamingo's round 5
        if self.policy_name == "flamingo" and self.round == 4:
            raise KeyboardInterrupt
        return real_step(self)

    monkeypatch.setattr(Simulation, "step", interrupted_step)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(exp, out_dir=tmp_path / "cut", overrides=overrides, log=lambda m: None)
    # the run directory is consistent: a readable metrics table up to the last checkpoint
    partial = pd.read_parquet(tmp_path / "cut" / "metrics.parquet")
    assert partial.groupby("policy")["round"].max().to_dict() == {"baseline": 6, "flamingo": 4}
    assert not (tmp_path / "cut" / "summary.json").exists()
    monkeypatch.setattr(Simulation, "step", real_step)

    resumed = run_experiment(exp, out_dir=tmp_path / "cut", overrides=overrides, resume=True, log=lambda m: None)
    assert_identical(resumed.metrics, whole.metrics)
    assert resumed.summary["policies"] == whole.summary["policies"]


def write(tmp_path, text):
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "yaml_text, overrides, message",
    [
        ("name: x\nfl: {roundz: 3}\n", [], r"exp\.yaml: unknown key 'fl\.roundz'"),
        ("name: x\ntraces: {path: /nonexistent/traces}\n", [], r"exp\.yaml: traces\.path: trace set '/nonexistent/traces' not found"),
        ("name: x\nphones: {mix: {nokia_3310: 1.0}}\n", [], r"exp\.yaml: phones\.mix: unknown phone 'nokia_3310' \(known: galaxy_s10e"),
        ("name: x\nmodel: vgg16\n", [], r"exp\.yaml: model: no profile of DNN model 'vgg16' for phone 'galaxy_tab_s6' in profile set 'paper' \(profiled models: mobilenet_v2, resnet34, shufflenet_v2_x2\)"),
        ("name: x\npolicies: [baseline, my_pkg.nope:Policy]\n", [], r"policy 'my_pkg\.nope:Policy': cannot import \(No module named 'my_pkg'; looked on the Python path, then in "),
        ("name: x\npolicies: [baseline, greedy]\n", [], r"exp\.yaml: policies: unknown policy 'greedy'; expected one of 'baseline', 'flamingo', 'least_energy' \(built-in or installed in entry-point group 'flamingo_sim\.policies'\)"),
        ("name: x\n", ["fl.rounds=zero"], r"exp\.yaml: fl\.rounds: expected an integer, got 'zero'"),
        ("name: x\ndata: {root: /nonexistent/openimage}\n", [], r"exp\.yaml: data\.root: '/nonexistent/openimage' not found \(set data\.root: null to run the generated proxy task\)$"),
        ("name: x\ndata: {fallback: error}\n", [], r"exp\.yaml: data: data\.root is null \(no real openimage data\) and data\.fallback is 'error'$"),
        ("name: x\ndata: {filter_less: 0}\n", [], r"exp\.yaml: data\.filter_less: expected an integer >= 1, got 0$"),
        ("name: x\ndata: {transform: imagenet}\n", [], r"exp\.yaml: data\.transform: expected one of 'default' or 'fedscale', got 'imagenet'$"),
        ("name: x\ndata: {speech_channels: 2}\n", [], r"exp\.yaml: data\.speech_channels: expected one of 1 or 3, got 2$"),
    ],
)
def test_bad_configs_give_one_clear_line(tmp_path, capsys, yaml_text, overrides, message):
    import re

    path = write(tmp_path, yaml_text)
    args = ["run", str(path), "--out", str(tmp_path / "out")] + sum((["--set", s] for s in overrides), [])
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert re.search(message, err[-1]), err
    assert "Traceback" not in "\n".join(err)
    assert not (tmp_path / "out").exists()  # nothing written for a config that cannot run


def test_existing_run_directory_is_not_overwritten(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="exists and is not empty"):
        run_experiment(ROOT / "experiments/openimage_mobilenet.yaml", out_dir=out, overrides=SMALL)
    assert (out / "keep.txt").read_text() == "mine"
    with pytest.raises(ConfigError, match=r"^resume: needs out_dir, the run directory to continue$"):
        run_experiment(ROOT / "experiments/openimage_mobilenet.yaml", resume=True)


@pytest.mark.slow
def test_fedscale_benchmark_experiment_on_a_real_layout(tmp_path):
    """fedscale_openimage_mobilenet.yaml: batch 20, filter_less 21, FedScale's transform on real files."""
    from tests.fl.data.test_data import _write_fedscale

    root = tmp_path / "openimage"
    _write_fedscale(root, {"a": 21, "b": 20, "c": 22})
    result = run_experiment(ROOT / "experiments/fedscale_openimage_mobilenet.yaml", out_dir=tmp_path / "run", log=lambda m: None,
                            overrides=[f"data.root={root}", *TINY_REAL])
    data = result.summary["data"]
    assert data.startswith(f"FedScale image dataset at {root} (train split): 2 clients, 43 samples")
    assert "32x32 (fedscale transform: mean (0.4914, 0.4822, 0.4465)" in data and "fewer than 21 samples" in data
    cfg = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert cfg["fl"]["batch_size"] == 20 and cfg["fl"]["lr"] == 0.05 and cfg["data"]["filter_less"] == 21
    assert result.metrics["accuracy"].notna().all()


@pytest.mark.slow
def test_real_fedscale_layout_trains_the_named_dnn(tmp_path):
    """With data.root set, the run reads FedScale's OpenImage layout and trains MobileNetV2."""
    from tests.fl.data.test_data import _write_fedscale

    root = tmp_path / "openimage"
    _write_fedscale(root, {"a": 16, "b": 20, "c": 16})
    result = run_experiment(
        ROOT / "experiments/openimage_mobilenet.yaml",
        out_dir=tmp_path / "run",
        overrides=[f"data.root={root}", *TINY_REAL],
        log=lambda m: None,
    )
    assert result.summary["data"].startswith(f"FedScale image dataset at {root} (train split): 3 clients, 52 samples")
    assert result.metrics["n_kept"].tolist() == [0, 2, 2]  # round 0 (the initial model), then 2 rounds
    assert result.metrics["accuracy"].notna().all()


def test_seeds_vary_the_run_not_the_task():
    import torch

    from flamingo_sim.fl.compose import build_components
    from flamingo_sim.fl.config import load_experiment

    exp = ROOT / "experiments/openimage_mobilenet.yaml"
    cfg = load_experiment(exp, SMALL)
    a, b = (build_components(cfg, exp, seed, log=lambda m: None) for seed in (0, 1))
    # the proxy task is the same dataset for every seed (data.proxy.seed), like real data ...
    assert all(torch.equal(u, v) for u, v in zip(a.dataset.client_data(7), b.dataset.client_data(7)))
    assert all(torch.equal(u, v) for u, v in zip(a.test_data, b.test_data))
    # ... while phones, bandwidths and the initial model differ
    assert not (a.population.phone_idx == b.population.phone_idx).all()
    assert not torch.equal(next(a.model.parameters()), next(b.model.parameters()))
    c = build_components(load_experiment(exp, SMALL + ["data.proxy.seed=3"]), exp, 0, log=lambda m: None)
    assert not torch.equal(a.dataset.client_data(7)[0], c.dataset.client_data(7)[0])

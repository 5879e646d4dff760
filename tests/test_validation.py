"""Every bad value of an experiment is one line (file, dotted key, what was expected), caught
before the run directory exists; the values that are allowed to be null work."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from flamingo_sim.cli import main
from flamingo_sim.config import FieldError, check_ranges, from_mapping
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.compose import update_size_mb
from flamingo_sim.fl.config import ExperimentConfig, NetworkConfig
from flamingo_sim.models import build_model

F32 = " that fits float32, the training's dtype (its size between 1.2e-38 and 3.4e+38, or 0)"

#: (override, the error line after "exp.yaml: ")
BAD_VALUES = [
    # the examples
    ("network.bandwidth_mbps=-5", "network.bandwidth_mbps: expected a number > 0, got -5.0"),
    ("network.bandwidth_mbps=0", "network.bandwidth_mbps: expected a number > 0, got 0.0"),
    ("data.proxy.n_features=0", "data.proxy.n_features: expected an integer >= 1, got 0"),
    ("data.image_size=-3", "data.image_size: expected an integer >= 8, got -3"),
    ("fl.rounds=null", "fl: set rounds, horizon_h or both (both are null: the run would never end)"),
    # every other section, like them
    ("network.bandwidth_sigma=-0.1", "network.bandwidth_sigma: expected a number >= 0, got -0.1"),
    ("network.model_size_mb=0", "network.model_size_mb: expected a number > 0, got 0.0"),
    ("network.bandwidth_mbps=.inf", "network.bandwidth_mbps: expected a number > 0, got inf"),
    ("fl.lr=.nan", f"fl.lr: expected a number > 0{F32}, got nan"),
    ("fl.lr=0", f"fl.lr: expected a number > 0{F32}, got 0.0"),
    ("fl.overcommit=0.5", "fl.overcommit: expected a number >= 1, got 0.5"),
    ("fl.participants_per_round=0", "fl.participants_per_round: expected an integer >= 1, got 0"),
    ("fl.local_steps=-1", "fl.local_steps: expected an integer >= 1, got -1"),
    ("fl.batch_size=0", "fl.batch_size: expected an integer >= 1, got 0"),
    ("fl.rounds=0", "fl.rounds: expected an integer >= 1, got 0"),
    ("fl.horizon_h=-1", "fl.horizon_h: expected a number > 0, got -1.0"),
    ("fl.eval_every=0", "fl.eval_every: expected an integer >= 1, got 0"),
    ("fl.deadline_s=0", "fl.deadline_s: expected a number > 0, got 0.0"),
    ("data.image_size=4", "data.image_size: expected an integer >= 8, got 4"),
    ("data.max_clients=0", "data.max_clients: expected an integer >= 1, got 0"),
    ("data.max_test_samples=0", "data.max_test_samples: expected an integer >= 1, got 0"),
    ("data.cache_gb=0", "data.cache_gb: expected a number > 0, got 0.0"),
    ("data.device_cache_gb=-1", "data.device_cache_gb: expected a number >= 0, got -1.0"),
    ("data.proxy.n_clients=0", "data.proxy.n_clients: expected an integer >= 1, got 0"),
    ("data.proxy.n_classes=1", "data.proxy.n_classes: expected an integer >= 2, got 1"),
    ("data.proxy.alpha=-1", "data.proxy.alpha: expected a number >= 0, got -1.0"),
    ("data.proxy.beta=-1", "data.proxy.beta: expected a number >= 0, got -1.0"),
    ("data.proxy.mean_samples=16", "data.proxy.mean_samples: expected a number > 16, got 16.0"),
    ("data.proxy.seed=-1", "data.proxy.seed: expected an integer >= 0, got -1"),
    ("data.proxy.model=resnet34", "data.proxy.model: expected one of 'mlp', 'logreg', got 'resnet34'"),
    ("traces.min_pct=-1", "traces.min_pct: expected a number in [0, 100], got -1.0"),
    ("traces.reentry_pct=101", "traces.reentry_pct: expected a number in [0, 100], got 101.0"),
    ("traces.reentry_pct=5", "traces: need min_pct <= reentry_pct, got 10.0 and 5.0"),
    ("phones.mix.pixel_3=-0.2", "phones.mix.pixel_3: expected a number >= 0, got -0.2"),
    ("phones.mix={pixel_3: 0}", "phones.mix: expected shares that sum to > 0, got {'pixel_3': 0.0}"),
    ("phones.mix={}", "phones.mix: expected at least one phone with its share, got {}"),
    # renormalised to 50/50 without a word before
    ("phones.mix={pixel_3: 0.3, mi_10: 0.3}", "phones.mix: expected each phone's share of the fleet, summing to 1 (these sum to 0.6), "
                                              "got {'pixel_3': 0.3, 'mi_10': 0.3}"),
    ("phones.mix.pixel_3=0.4", "phones.mix: expected each phone's share of the fleet, summing to 1 (these sum to 0.4), got {'pixel_3': 0.4}"),
    # YAML read 'off' as False, and the line did not say so
    ("devices.thermal=off", "devices.thermal: expected one of 'none' or 'rc', got False (YAML reads an unquoted on/off, yes/no or "
                            "true/false as a boolean: quote the word, or use one of the names above)"),
    ("policy.min_battery_pct=120", "policy.min_battery_pct: expected a number in [0, 100], got 120.0"),
    ("policy.max_temperature_c=500", "policy.max_temperature_c: expected a number in [-50, 150], got 500.0"),
    ("policy.interference_factor=0.9", "policy.interference_factor: expected a number >= 1, got 0.9"),
    ("policy.probe_s=0", "policy.probe_s: expected a number > 0, got 0.0"),
    ("policy.interference.shared_core_slowdown=0.5", "policy.interference.shared_core_slowdown: expected a number in [1, 100], got 0.5"),
    # a slowdown past any physical one overflowed the in-use clock (an IndexError mid-run before the bound)
    ("policy.interference.shared_core_slowdown=1e308", "policy.interference.shared_core_slowdown: expected a number in [1, 100], got 1e+308"),
    ("policy.interference.foreground_cores=[-1]", "policy.interference.foreground_cores[0]: expected an integer >= 0, got -1"),
    ("policy.interference.foreground_cores=[6,6]", "policy.interference.foreground_cores: expected each core index once, got [6, 6]"),
    ("target_accuracy=1.5", "target_accuracy: expected a number in (0, 1], got 1.5"),
    ("target_accuracy=0", "target_accuracy: expected a number in (0, 1], got 0.0"),
    ("checkpoint_every=0", "checkpoint_every: expected an integer >= 1, got 0"),
    ("seeds=[-1]", "seeds[0]: expected an integer in [0, 9223372036854775808), got -1"),
    ("seeds=[0,0]", "seeds: expected each seed once, got [0, 0]"),
    ("seeds=[]", "seeds: expected at least one seed, got []"),
    ("policies=[]", "policies: expected at least one policy, got []"),
    ("policies=[baseline,baseline]", "policies: expected each policy once, got ['baseline', 'baseline']"),
    ("name=a/b", "name: expected a non-empty name without slashes (it names the run directory), got 'a/b'"),
    ("name=''", "name: expected a non-empty name without slashes (it names the run directory), got ''"),
    ("model=''", "model: expected the name of a profiled DNN model, e.g. mobilenet_v2, got ''"),
    # the toolkit's sections, checked the same way (check_ranges)
    ("fedbuff.staleness_exponent=.nan", "fedbuff.staleness_exponent: expected a number >= 0, got nan"),
    ("fedbuff.concurrency=0", "fedbuff.concurrency: expected an integer >= 1, got 0"),
    ("aggregation={name: fedadam, tau: 0}", f"aggregation.tau: expected a number > 0{F32}, got 0.0"),
    ("selector.floor=0.5", "selector: selector 'uniform' takes no parameters (it declares no Params), got floor"),
    ("fl.selection=nope", "fl.selection: unknown selector 'nope'; expected one of 'uniform', 'battery', 'oort' (built-in or installed in entry-point "
                          "group 'flamingo_sim.selectors') or an import path 'package.module:ClassName'"),
    # an import path's parameters: checked once it is imported, still before anything is written
    ("aggregation={name: 'flamingo_sim.fl.strategy.aggregators:FedProx', mu: -1}", f"aggregation.mu: expected a number >= 0{F32}, got -1.0"),
]


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")


@pytest.mark.parametrize("override, message", BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_bad_value_is_one_line_and_writes_nothing(tmp_path, capsys, monkeypatch, override, message):
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: x\nfl: {rounds: 2, participants_per_round: 2, local_steps: 1}\ndata: {proxy: {n_clients: 50}}\n")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    assert main(["run", str(exp), "--out", str(out), "--set", override]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"flamingo-sim run: error: {exp}: {message}"]
    assert not out.exists()
    assert not (tmp_path / "runs").exists()


def test_rounds_null_runs_to_the_horizon(tmp_path):
    """docs/fl-engine.md: "rounds and/or horizon_h"; with rounds null the horizon ends the run."""
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: x\npolicies: [baseline]\ndata: {proxy: {n_clients: 60}}\n"
                   "fl: {participants_per_round: 3, local_steps: 1, eval_every: 1, horizon_h: 0.5}\n")
    out = tmp_path / "out"
    assert main(["run", str(exp), "--out", str(out), "--set", "fl.rounds=null"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    metrics = pd.read_parquet(out / "metrics.parquet")
    assert metrics["time_s"].iloc[-1] >= 0.5 * 3600 > metrics["time_s"].iloc[-2]  # stopped by the horizon, not before
    assert summary["model_size_source"].startswith("derived: mobilenet_v2 with 10 classes, 2,236,682 parameters")


def test_update_size_is_derived_from_the_model_unless_set():
    cfg = from_mapping(ExperimentConfig, {"name": "x"})
    assert cfg.network.model_size_mb is None
    mlp = build_model("mlp", (60,), 10)
    # MobileNetV2's parameters: 2,223,872 in the features, 1280 x C + C in the classifier.
    size, source = update_size_mb(cfg, 1000, "mlp", mlp)
    assert size == pytest.approx((2_223_872 + 1281 * 1000) * 4 / 1e6)  # 14.02 MB: the paper's "3.5 M parameters"
    assert source == "derived: mobilenet_v2 with 1000 classes, 3,504,872 parameters x 4 bytes"
    user = from_mapping(ExperimentConfig, {"name": "x", "network": {"model_size_mb": 3.0}})
    assert update_size_mb(user, 1000, "mlp", mlp) == (3.0, "network.model_size_mb")
    # a model with no trainable architecture (user-profiled): the trained model's parameters
    other = from_mapping(ExperimentConfig, {"name": "x", "model": "my_net"})
    assert update_size_mb(other, 10, "mlp", mlp) == ((60 * 128 + 128 + 128 * 10 + 10) * 4 / 1e6, "derived: mlp with 10 classes, 9,098 parameters x 4 bytes")


@pytest.mark.parametrize(
    "rule, ok, bad",
    [(">= 1", [1, 2.5], [0, 0.99]), ("> 0", [1e-9], [0, -1]), ("[0, 1]", [0, 1], [-0.01, 1.01]),
     ("(0, 1]", [1], [0]), ("[0, 1)", [0], [1]), ("< 5", [4], [5]), ("<= 5", [5], [5.1]),
     # a value the training holds in float32 (issue 44: fl.lr=1e308 overflowed mid-run)
     ("> 0, float32", [1e-3, 3.4e38, 1.2e-38], [0, 1e39, 1e308, 1e-39, 1e-300]), (">= 0, float32", [0, 1], [1e-40, -1])],
)
def test_check_ranges(rule, ok, bad):
    class Obj:
        pass

    obj = Obj()
    for v in ok:
        obj.v = v  # type: ignore[attr-defined]
        check_ranges(obj, v=rule)
    for v in [*bad, float("nan"), float("inf")]:
        obj.v = v  # type: ignore[attr-defined]
        with pytest.raises(FieldError):
            check_ranges(obj, v=rule)
    obj.v = None  # type: ignore[attr-defined]
    check_ranges(obj, v=rule)  # unset optional values pass


def test_network_defaults_leave_the_size_to_the_model():
    assert NetworkConfig().model_size_mb is None
    with pytest.raises(ConfigError, match=r"^e\.yaml: network\.bandwidth_mbps: expected a number > 0, got -5\.0$"):
        from_mapping(ExperimentConfig, {"name": "x", "network": {"bandwidth_mbps": -5}}, source="e.yaml")


def test_shipped_experiments_are_valid():
    from flamingo_sim.fl.config import load_experiment

    root = Path(__file__).resolve().parents[1] / "experiments"
    shipped = sorted(root.glob("*.yaml"))
    assert root / "openimage_mobilenet.yaml" in shipped, f"the shipped experiments are missing (found {len(shipped)} under {root})"
    for exp in shipped:
        assert load_experiment(exp).name, exp

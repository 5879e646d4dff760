"""The plug-in examples (examples/): each plug-in reads its parameter from its YAML, behaves as its
file says (hand-computed cases), appears in the configuration reference, and its experiment runs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from flamingo_sim.cli import main
from flamingo_sim.devices.policies import TaskRequest
from flamingo_sim.devices.profiles import ProfileSet
from flamingo_sim.fl.config import load_experiment
from flamingo_sim.fl.config_reference import plugin_params_of, reference_markdown
from flamingo_sim.fl.plugins import check_plugins, experiment_policy, plugin_search
from flamingo_sim.fl.runner.run import run_experiment
from flamingo_sim.fl.strategy.aggregators import make_aggregator
from flamingo_sim.fl.strategy.base import CoordinatorView
from flamingo_sim.fl.strategy.selection import make_selector

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CHARGING, FAIR, TRIMMED = (EXAMPLES / f"{n}.yaml" for n in ("charging_only", "fair_selector", "trimmed_mean"))
POLICY = "charging_policy:ChargingOnlyPolicy"


def test_each_example_is_one_short_file_beside_its_experiment():
    for module in ("charging_policy", "fair_selector", "trimmed_mean"):
        lines = (EXAMPLES / f"{module}.py").read_text().splitlines()
        assert len(lines) < 70, (module, len(lines))
    assert len((EXAMPLES / "charging_policy.py").read_text().splitlines()) < 60  # the goal for a new policy
    assert sorted(p.name for p in EXAMPLES.glob("*.yaml")) == ["charging_only.yaml", "fair_selector.yaml", "trimmed_mean.yaml"]


def test_the_guide_shows_the_examples_as_they_are():
    """docs/plugins.md includes each example file whole (pymdownx.snippets) and runs each experiment."""
    page = (ROOT / "docs/plugins.md").read_text()
    for name in ("charging_policy.py", "charging_only.yaml", "fair_selector.py", "fair_selector.yaml", "trimmed_mean.py", "trimmed_mean.yaml"):
        assert f'--8<-- "examples/{name}"' in page
    assert "flamingo-sim run examples/charging_only.yaml" in page
    hooks = (ROOT / "docs/hooks.py").read_text()  # the build's parameter tables come from these experiments
    assert all(f'"examples/{p.name}"' in hooks for p in (CHARGING, FAIR, TRIMMED))


def test_the_charging_policy_reads_its_parameter_and_trains_only_while_charging():
    cfg = load_experiment(CHARGING)
    policy = experiment_policy(cfg, CHARGING, POLICY)
    assert policy.min_battery_pct == 40.0  # type: ignore[attr-defined]  # from policy_params, not the class default (20)
    ps = ProfileSet.load(ROOT / "profiles", ["pixel_3"], "mobilenet_v2")
    policy.init(4, np.zeros(4, dtype=np.int64), ps)
    # charging at 50 % (trains), charging at 30 % (below 40), unplugged at 90 %, charging at exactly 40 %
    request = TaskRequest(np.arange(4), np.zeros(4, dtype=np.int64), 10, 0.0, np.array([50.0, 30.0, 90.0, 40.0]),
                          np.array([True, True, False, True]), np.full(4, 30.0), np.zeros((4, 1), bool), 60.0)
    out = policy.run_tasks(request)
    assert list(out.accepted) == [True, False, False, True]
    assert list(out.decline_reason) == ["", "not_charging", "not_charging", ""]
    step_s = float(ps.baseline_latency_s[0])
    assert out.duration_s[0] == pytest.approx(10 * step_s) and out.duration_s[1] == 0  # 10 steps of 4567, nobody using the phone
    assert out.choice_mix() == {"4567": 20}


def test_the_fair_selector_reads_its_parameter_and_picks_the_least_selected():
    cfg = load_experiment(FAIR)
    selector = make_selector(cfg.fl.selection, cfg.selector.parameters(), str(FAIR), search=plugin_search(FAIR))
    assert selector.explore == 0.5  # type: ignore[attr-defined]
    selector.explore = 0.0  # type: ignore[attr-defined]  # fairness alone: 10 clients, 4 a round
    view = CoordinatorView(1, np.full(10, 80.0))
    rng = np.random.default_rng(0)
    first = selector.select(np.arange(10), 4, rng, view)
    second = selector.select(np.arange(10), 4, rng, view)
    assert len(set(first) | set(second)) == 8  # the second round takes none of the first's
    third = selector.select(np.arange(10), 4, rng, view)
    never = set(range(10)) - set(first) - set(second)
    assert len(never) == 2 and never <= set(third)  # the two never selected come first
    assert selector.state_dict()["times"].sum() == 12
    selector.observe(1, first, np.ones(4), np.ones(4), np.ones(4))  # the contract's default: nothing


def test_the_trimmed_mean_reads_its_parameter_and_drops_the_extremes():
    cfg = load_experiment(TRIMMED)
    agg = make_aggregator(cfg.aggregation, source=str(TRIMMED), search=plugin_search(TRIMMED))
    assert agg.trim == 0.2 and agg.proximal_mu == 0.0  # type: ignore[attr-defined]  # proximal_mu: the contract's default
    stacked = {"w": torch.tensor([[0.0, 5.0], [1.0, 4.0], [2.0, 3.0], [3.0, 2.0], [100.0, -100.0]]), "n": torch.tensor([1, 2, 3, 4, 5])}
    out = agg.aggregate({"w": torch.zeros(2), "n": torch.tensor(7)}, stacked, torch.ones(5))
    # 5 clients, trim 0.2: one dropped at each end of each coordinate -> mean of (1, 2, 3) and of (2, 3, 4)
    assert torch.equal(out["w"], torch.tensor([2.0, 3.0])) and int(out["n"]) == 7


def test_the_examples_parameters_are_in_their_configuration_reference():
    md = reference_markdown(plugins=[p for exp in (CHARGING, FAIR, TRIMMED) for p in plugin_params_of(exp)])
    assert f"### `policy_params.{POLICY}` (policy `{POLICY}`)" in md
    assert f"| `policy_params.{POLICY}.min_battery_pct` | float | `20.0` | `[0, 100]` | Battery level (%) a charging phone needs before it trains. |" in md
    assert "### `selector` with `fl.selection: fair_selector:FairSelector`" in md
    assert "| `selector.explore` | float | `0.25` | `[0, 1]` |" in md
    assert "### `aggregation` with `name: trimmed_mean:TrimmedMean`" in md
    assert "| `aggregation.trim` | float | `0.1` | `[0, 0.5)` |" in md


def test_a_bad_example_parameter_is_one_line_before_any_output(tmp_path, capsys):
    out = tmp_path / "o"
    code = main(["run", str(CHARGING), "--out", str(out), "--set", f"policy_params.{POLICY}.min_battery_pct=140"])
    assert code == 2 and not out.exists()
    assert capsys.readouterr().err.strip().endswith(f"{CHARGING}: policy_params.{POLICY}.min_battery_pct: expected a number in [0, 100], got 140.0")


@pytest.mark.slow
@pytest.mark.parametrize("experiment", [CHARGING, FAIR, TRIMMED], ids=lambda p: p.stem)
def test_each_example_experiment_runs(experiment, tmp_path, monkeypatch):
    monkeypatch.setenv("FLAMINGO_SIM_QUIET", "1")
    result = run_experiment(experiment, out_dir=tmp_path / "run", log=lambda _m: None)
    cfg = load_experiment(experiment)
    metrics = result.metrics
    shown = check_plugins(cfg, experiment)  # a plug-in is shown by its own name (charging_policy:ChargingOnlyPolicy -> charging_only)
    assert sorted(metrics["policy"].unique()) == sorted(shown.values()) and len(shown) == len(cfg.policies)
    assert metrics["round"].max() == cfg.fl.rounds
    assert all(math.isfinite(a) for a in metrics["accuracy"].dropna())

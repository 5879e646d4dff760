"""The plug-in registry (flamingo_sim.plugins): built-in names, import paths, entry points of an
installed package, parameters checked by a plug-in's Params, the contracts' optional defaults."""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from flamingo_sim.config import from_mapping
from flamingo_sim.devices.policies import POLICIES, BaselinePolicy, make_policy
from flamingo_sim.errors import ConfigError
from flamingo_sim.fl.config import AggregationConfig, ExperimentConfig
from flamingo_sim.fl.config_reference import plugin_params_of, reference_markdown
from flamingo_sim.fl.runner.engines import ENGINES, EngineOptions, make_engine
from flamingo_sim.fl.strategy.aggregators import make_aggregator
from flamingo_sim.fl.strategy.base import Aggregator, CoordinatorView, Selector
from flamingo_sim.fl.strategy.selection import make_selector
from flamingo_sim.plugins import entry_points

ROOT = Path(__file__).resolve().parents[1]

PLUGIN = '''
"""A third-party plug-in package: a policy, a selector, an aggregator and an engine."""
from dataclasses import dataclass

import numpy as np

from flamingo_sim.config import check_ranges
from flamingo_sim.devices.policies import BaselinePolicy


@dataclass(frozen=True)
class PickyParams:
    #: Battery level (%) below which a request is declined.
    min_battery_pct: float = 50.0

    def __post_init__(self):
        check_ranges(self, min_battery_pct="[0, 100]")


class PickyPolicy(BaselinePolicy):
    name = "picky"
    Params = PickyParams

    def __init__(self, config=None, min_battery_pct=50.0):
        super().__init__(config)
        self.min_battery_pct = min_battery_pct


class FirstSelector:  # select only: observe and the state come from the contract
    def select(self, online, n, generator, view):
        return np.sort(np.asarray(online)[:n])


class KeepGlobal:  # aggregate only; takes neither weighting nor buffers
    def aggregate(self, global_state, stacked, n_samples):
        return dict(global_state)


class QuietEngine:
    def __init__(self, options):
        self.options = options

    def run(self, sim, callbacks, done, work_dir):
        return list(done)
'''


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """A package ``picky_plugins`` installed in a site folder of its own, found by its entry points only."""
    site = tmp_path / "site"
    (site / "picky_plugins").mkdir(parents=True)
    (site / "picky_plugins" / "__init__.py").write_text(PLUGIN)
    info = site / "picky_plugins-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: picky-plugins\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""\
        [flamingo_sim.policies]
        picky = picky_plugins:PickyPolicy
        baseline = picky_plugins:PickyPolicy
        broken = picky_plugins_gone:Nothing

        [flamingo_sim.selectors]
        first = picky_plugins:FirstSelector

        [flamingo_sim.aggregators]
        keep = picky_plugins:KeepGlobal

        [flamingo_sim.engines]
        quiet = picky_plugins:QuietEngine
        """))
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    yield site
    sys.modules.pop("picky_plugins", None)


def test_a_separate_package_is_found_by_its_entry_points(installed):
    policy = make_policy("picky", None, {"min_battery_pct": 70}, source="e.yaml")
    assert type(policy).__module__ == "picky_plugins" and policy.min_battery_pct == 70.0
    assert make_policy("picky").min_battery_pct == 50.0  # its Params' default
    assert isinstance(make_policy("baseline"), BaselinePolicy)  # a built-in name wins over an entry point's
    assert type(make_selector("first")).__name__ == "FirstSelector"
    assert type(make_aggregator(AggregationConfig(name="keep"))).__name__ == "KeepGlobal"
    assert type(make_engine("quiet", EngineOptions())).__name__ == "QuietEngine"
    assert "picky" in POLICIES.names() and "quiet" in ENGINES.names()


def test_an_installed_plugin_in_an_experiment_is_checked_with_the_file(installed):
    data = {"name": "x", "policies": ["picky"], "fl": {"selection": "first"}, "aggregation": {"name": "keep"}}
    cfg = from_mapping(ExperimentConfig, data, source="e.yaml")  # installed names are known to the config's check
    assert cfg.policies == ["picky"]
    with pytest.raises(ConfigError) as exc:
        make_policy("picky", None, {"min_battery_pct": 140}, source="e.yaml")
    assert str(exc.value) == "e.yaml: policy_params.picky.min_battery_pct: expected a number in [0, 100], got 140.0"


def test_installed_plugins_are_listed_in_errors_and_a_broken_one_is_one_line(installed):
    with pytest.raises(ConfigError) as exc:
        make_policy("greedy")
    assert str(exc.value) == ("policies: unknown policy 'greedy'; expected one of 'baseline', 'flamingo', 'least_energy', 'broken', 'picky' "
                              "(built-in or installed in entry-point group 'flamingo_sim.policies') or an import path 'package.module:ClassName'")
    with pytest.raises(ConfigError) as exc:
        make_policy("broken")
    assert str(exc.value) == ("policies: policy 'broken' (entry point 'picky_plugins_gone:Nothing') cannot be imported: "
                              "No module named 'picky_plugins_gone'; looked on the Python path")


def test_optional_parts_take_the_contracts_defaults(installed):
    selector = make_selector("first")
    assert selector.observe.__func__ is Selector.observe  # type: ignore[attr-defined]
    assert selector.state_dict() == {} and selector.load_state_dict({}) is None
    view = CoordinatorView(1, np.full(10, 50.0))
    assert list(selector.select(np.arange(10), 3, np.random.default_rng(0), view)) == [0, 1, 2]
    agg = make_aggregator(AggregationConfig(name="keep"))
    assert agg.proximal_mu == 0.0 and agg.state_dict() == {} and Aggregator.proximal_mu == 0.0
    assert make_engine("quiet", EngineOptions()).resumable is False  # type: ignore[attr-defined]


def test_a_plugin_without_its_required_part_is_one_line():
    with pytest.raises(ConfigError) as exc:
        make_selector("tests.test_plugins:NotASelector", source="e.yaml")
    assert str(exc.value) == ("e.yaml: fl.selection: selector 'tests.test_plugins:NotASelector' lacks select, which the contract "
                              "flamingo_sim.fl.strategy.base.Selector requires (a selector needs select; observe, state_dict, load_state_dict are optional)")
    with pytest.raises(ConfigError, match=r"^e.yaml: aggregation.name: aggregator 'tests.test_plugins:Nope': cannot import "):
        make_aggregator(AggregationConfig(name="tests.test_plugins:Nope"), source="e.yaml")


class NotASelector:
    def pick(self, online, n):
        return online[:n]


def test_a_plugin_without_params_refuses_a_section():
    with pytest.raises(ConfigError) as exc:
        make_selector("uniform", {"floor": 0.3}, "e.yaml")
    assert str(exc.value) == "e.yaml: selector: selector 'uniform' takes no parameters (it declares no Params), got floor"


def test_the_engines_of_the_integrations_are_entry_points_even_with_old_metadata(monkeypatch):
    from flamingo_sim.integrations.flower.engine import FlowerEngine

    assert entry_points("flamingo_sim.engines")["flower"] == "flamingo_sim.integrations.flower.engine:FlowerEngine"
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: [])  # an install older than the entry points
    assert ENGINES.load("flower", "engine") is FlowerEngine  # read from pyproject.toml beside the package
    assert ENGINES.names() == ["native", "fedscale", "flower"]


def test_least_energy_margin_is_set_from_yaml():
    cfg = from_mapping(ExperimentConfig, {"name": "x", "policies": ["baseline", "least_energy"], "policy_params": {"least_energy": {"margin": 0.5}}}, source="e.yaml")
    from flamingo_sim.fl.plugins import experiment_policy

    assert experiment_policy(cfg, "e.yaml", "least_energy").margin == 0.5  # type: ignore[attr-defined]
    assert experiment_policy(cfg, "e.yaml", "baseline").name == "baseline"
    for data, message in [
        ({"policies": ["least_energy"], "policy_params": {"least_energy": {"margin": 0}}}, "e.yaml: policy_params.least_energy.margin: expected a number in (0, 1], got 0.0"),
        ({"policies": ["least_energy"], "policy_params": {"least_energy": {"margni": 0.5}}}, "e.yaml: unknown key 'policy_params.least_energy.margni' (known here: margin)"),
        ({"policies": ["baseline"], "policy_params": {"least_energy": {"margin": 0.5}}}, "e.yaml: policy_params.least_energy: not a policy of this experiment (policies: baseline)"),
        ({"policies": ["baseline"], "policy_params": {"baseline": {"x": 1}}},
         "e.yaml: policy_params.baseline: policy 'baseline' takes no parameters (it declares no Params), got x"),
    ]:
        with pytest.raises(ConfigError) as exc:
            from_mapping(ExperimentConfig, {"name": "x", **data}, source="e.yaml")
        assert str(exc.value) == message


def test_an_experiments_plugins_appear_in_its_reference(installed, tmp_path):
    exp = tmp_path / "e.yaml"
    exp.write_text("name: x\npolicies: [baseline, picky]\n")
    md = reference_markdown(plugins=plugin_params_of(exp))
    assert "### `policy_params.picky` (policy `picky`)" in md
    assert "| `policy_params.picky.min_battery_pct` | float | `50.0` | `[0, 100]` | Battery level (%) below which a request is declined. |" in md


def test_a_shipped_plugin_may_be_imported_only_when_asked_for():
    from flamingo_sim.fl.strategy.base import SELECTOR
    from flamingo_sim.plugins import Registry

    lazy = Registry(SELECTOR, {"oort_lazily": "flamingo_sim.fl.strategy.selection:OortSelector"})
    from flamingo_sim.fl.strategy.selection import OortSelector

    assert lazy.load("oort_lazily", "fl.selection") is OortSelector
    assert type(lazy.build("oort_lazily", {"exploration": 0.5}, source="e.yaml", key="fl.selection", params_key="selector")) is OortSelector


def test_a_plugin_module_that_fails_as_it_runs_is_one_line(tmp_path):
    (tmp_path / "half_written.py").write_text("class Policy(:\n")
    with pytest.raises(ConfigError) as exc:
        make_policy("half_written:Policy", source="e.yaml", search=[tmp_path])
    assert str(exc.value).startswith("e.yaml: policies: policy 'half_written:Policy': cannot import (SyntaxError: ")
